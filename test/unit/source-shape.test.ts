// The shape the architecture promises (docs/architecture.md): no function in src/ over 100 lines,
// no file over 400, and src/main.ts a dispatcher under 150. A long function is the named steps
// it already is; a long file is more than one concern. Measured with the TypeScript parser, so a
// function is what the language says it is (declarations, methods, arrows, function expressions).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { after, test } from 'node:test';
import type * as TypeScript from 'typescript';
import { contentMemo } from '../support/content-memo.ts';

const ROOT = join(__dirname, '..', '..');
const MAX_FUNCTION_LINES = 100;
const MAX_FILE_LINES = 400;
const MAX_MAIN_LINES = 150;

// The parser is loaded only when an answer is not kept (the memo below): loading it (9 MB of
// JavaScript) was most of this file's time on a run where nothing had changed. Its version, part
// of every answer's key, is read from its package.json.
let parser: typeof TypeScript | undefined;
const typescript = (): typeof TypeScript => (parser ??= require('typescript') as typeof TypeScript);
const TS_VERSION = (JSON.parse(readFileSync(require.resolve('typescript/package.json'), 'utf8')) as { version: string }).version;
const memo = contentMemo<string[]>('source-shape', `${TS_VERSION}\n${longFunctions.toString()}\n${MAX_FUNCTION_LINES}`);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** Pure: every function of a source text longer than `max` lines, as `line name (n lines)`. */
function longFunctions(fileName: string, text: string, max: number): string[] {
  const ts = typescript();
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (node: TypeScript.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(node.end).line;
      const name = 'name' in node && node.name ? node.name.getText(sf) : '<anonymous>';
      if (last - first + 1 > max) out.push(`${first + 1} ${name} (${last - first + 1} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

const lines = (text: string) => text.split('\n').length - (text.endsWith('\n') ? 1 : 0);

test('source shape: no function in src/ is over 100 lines', () => {
  // Parsing src/ is most of this file's time: each file's answer is kept under the digest of its
  // name and text, the parser's version and this measure's code (test/support/content-memo.ts).
  const long = sourceFiles(join(ROOT, 'src')).flatMap((f) => {
    const text = readFileSync(f, 'utf8');
    return memo.answer(`${relative(ROOT, f)}\0${text}`, () => longFunctions(f, text, MAX_FUNCTION_LINES)).map((l) => `${relative(ROOT, f)}:${l}`);
  });
  assert.deepEqual(long, []);
});

test('source shape: no file in src/ is over 400 lines, and src/main.ts is under 150', () => {
  const long = sourceFiles(join(ROOT, 'src'))
    .map((f) => [relative(ROOT, f), lines(readFileSync(f, 'utf8'))] as const)
    .filter(([, n]) => n > MAX_FILE_LINES)
    .map(([f, n]) => `${f} (${n} lines)`);
  assert.deepEqual(long, []);
  assert.ok(lines(readFileSync(join(ROOT, 'src', 'main.ts'), 'utf8')) < MAX_MAIN_LINES);
});

test('source shape: the measure finds a long function and ignores a short one (the test can fail)', () => {
  const body = Array.from({ length: 120 }, (_, i) => `  const v${i} = ${i};`).join('\n');
  // Kept like any other answer: the same text, parser and measure give the same answer.
  const measure = (text: string) => memo.answer(`x.ts\0${text}`, () => longFunctions('x.ts', text, MAX_FUNCTION_LINES));
  assert.deepEqual(measure(`function long() {\n${body}\n}\nconst short = () => 1;\n`), ['1 long (122 lines)']);
  assert.deepEqual(measure(`class C { m() {\n${body}\n} }\n`), ['1 m (122 lines)']);
});

after(() => memo.save());
