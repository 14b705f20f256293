// The house's one-way graph (docs/architecture.md, "Layers"): every import in src/, type-only ones
// and dynamic import() included, points to the same layer or a lower one, and no file reaches
// itself again through its imports. The imports are read by TypeScript's own pre-processor
// (ts.preProcessFile), which lists import and export declarations, import = require and import()
// of a literal, as the compiler sees them: no pattern of ours to fool.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

const ROOT = join(__dirname, '..', '..');
const SRC = join(ROOT, 'src');

/** Top to bottom: a file may import its own layer's files and those of every layer below. */
const LAYERS: readonly (readonly string[])[] = [
  ['main.ts'],
  ['run'],
  ['metrics', 'telemetry'],
  ['git'],
  ['gateway'],
  ['limits'],
  ['auth'],
  ['store'],
  ['config'],
  ['http', 'json'],
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** A src/ file's layer: the index in LAYERS of its top folder (or main.ts). */
function layerOf(file: string): number {
  const top = relative(SRC, file).split('/')[0]!;
  const i = LAYERS.findIndex((l) => l.includes(top));
  assert.ok(i >= 0, `${relative(ROOT, file)}: its folder has no layer in LAYERS (docs/architecture.md, "Layers")`);
  return i;
}

/** Each src/ file and the src/ files it imports. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8');
    const imported = ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
    const targets = imported.filter((name) => name.startsWith('.')).map((name) => posix.normalize(posix.join(dirname(file), name)));
    graph.set(file, targets);
  }
  return graph;
}

test('layers: no import in src/ points to a higher layer (docs/architecture.md, "Layers")', () => {
  const upward: string[] = [];
  for (const [file, targets] of importGraph()) {
    for (const target of targets) if (layerOf(target) < layerOf(file)) upward.push(`${relative(ROOT, file)} imports ${relative(ROOT, target)}`);
  }
  assert.deepEqual(upward, []);
});

test('layers: no import cycle in src/, type-only imports included', () => {
  const graph = importGraph();
  const state = new Map<string, 'open' | 'done'>();
  const cycles: string[] = [];
  const visit = (file: string, path: string[]): void => {
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'open') {
      cycles.push([...path.slice(path.indexOf(file)), file].map((f) => relative(ROOT, f)).join(' -> '));
      return;
    }
    state.set(file, 'open');
    for (const target of graph.get(file) ?? []) visit(target, [...path, file]);
    state.set(file, 'done');
  };
  for (const file of graph.keys()) visit(file, []);
  assert.deepEqual(cycles, []);
});

test('layers: the order the test holds is the one docs/architecture.md states', () => {
  const doc = readFileSync(join(ROOT, 'docs', 'architecture.md'), 'utf8').replace(/\s+/g, ' ');
  const stated = LAYERS.map((l) => l.map((f) => `\`${f === 'main.ts' ? f : `${f}/`}\``).join(' and ')).join(' → ');
  assert.ok(doc.includes(stated), `docs/architecture.md states: ${stated}`);
});
