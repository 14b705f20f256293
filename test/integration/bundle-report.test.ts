// What the audited file holds stays within its budgets: bytes per feature area (esbuild's
// metafile, scripts/size-budget.json) and the names esbuild renames because two modules declare
// them (scripts/name-clashes.json: the names, a list to shrink). node build.mjs prints both;
// these tests build the bundle (and a small one of their own) and fail on a new excess. How an
// excess is counted, on a metafile written here: test/unit/bundle-report.test.ts.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { build } from 'esbuild';

const ROOT = join(__dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'bundle-report-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const report = () => import('../../scripts/bundle-report.mjs');
/** The bundle as build.mjs builds it, into a temporary directory (dist/ is left alone). */
const bundle = import('../../scripts/build-bundle.mjs').then(({ buildBundle }) => buildBundle({ root: ROOT, outfile: join(dir, 'proxy.js') }));
const kib = (bytes: number) => (bytes / 1024).toFixed(1);

test('size budget: no feature area of the bundle (bytes per src/ folder, from the metafile) passes its budget in scripts/size-budget.json, nor does the total', async () => {
  const { sizesByArea, loadSizeBudget, checkSizeBudget } = await report();
  const sizes = sizesByArea((await bundle).metafile);
  assert.ok(sizes.areas.some((a) => a.area === 'src/main.ts') && sizes.areas.some((a) => a.area === 'src/gateway/protocols'), 'areas are folders, main.ts its own');
  assert.equal(sizes.total, (await bundle).bytes.length);
  const over = checkSizeBudget(sizes, loadSizeBudget()).filter((r) => r.over);
  assert.deepEqual(
    over.map((r) => `${r.area}: ${kib(r.bytes)} KiB, budget ${r.budgetBytes === null ? 'none' : `${kib(r.budgetBytes)} KiB`}`),
    [],
    'bring the area back under its budget, or raise it in scripts/size-budget.json with the reason in docs/architecture.md',
  );
});

test('renamed names: the bundle renames no name beyond the allowlist in scripts/name-clashes.json', async () => {
  const { renamedIdentifiers, loadNameClashes, compareClashes } = await report();
  const { text, sources } = await bundle;
  const { added } = compareClashes(renamedIdentifiers(text, sources), loadNameClashes());
  assert.deepEqual(
    added.map((r) => `${r.stem} numbered ${r.name} in ${r.module}`),
    [],
    'a name another module already declares: give it a name of its own (the list in scripts/name-clashes.json only shrinks)',
  );
});

test('renamed names: a name two modules declare is found, with the module that carries the numbered copy; esbuild helpers, properties and names src/ spells are not', async () => {
  const { renamedIdentifiers, compareClashes, clashesByStem } = await report();
  const root = join(dir, 'clash');
  mkdirSync(join(root, 'src'), { recursive: true });
  const sources: Record<string, string> = {
    'src/main.ts': `import { reject } from './a.ts';\nimport { run } from './b.ts';\nimport { readFileSync } from 'node:fs';\nconsole.log(reject('x'), run(), readFileSync, { reject: 1 }.reject);\n`,
    'src/a.ts': `export function reject(why: string): string { return why; }\n`,
    'src/b.ts': `import { readFileSync } from 'node:fs';\nfunction reject(): number { return 2; }\nconst sha256 = 'name with a digit that src/ spells';\nexport function run(): unknown { return [reject(), sha256, readFileSync]; }\n`,
  };
  for (const [file, text] of Object.entries(sources)) writeFileSync(join(root, file), text);
  const out = await build({ absWorkingDir: root, entryPoints: ['src/main.ts'], bundle: true, platform: 'node', format: 'cjs', write: false, outfile: 'out.js', logLevel: 'silent' });
  const text = out.outputFiles[0]!.text;
  assert.match(text, /\breject2\b/, 'esbuild numbers the second reject');
  assert.match(text, /\bimport_node_fs2\b/, 'and its own import helper');

  const renamed = renamedIdentifiers(text, sources);
  assert.deepEqual(
    renamed.map((r) => [r.name, r.stem, r.module]),
    [['reject2', 'reject', 'src/b.ts']],
  );
  assert.deepEqual(clashesByStem(renamed), { reject: ['src/b.ts'] });
  assert.deepEqual(compareClashes(renamed, ['reject']), { added: [], gone: [] });
  assert.deepEqual(compareClashes(renamed, ['reject', 'usage']).gone, ['usage'], 'an allowed name no longer renamed: the list can shrink');
  assert.deepEqual(compareClashes(renamed, ['usage']).added.map((r) => r.name), ['reject2'], 'not allowed: a new clash');
});

test('the build report: a table of the areas against their budgets, then the renamed names, new clashes marked', async () => {
  const { formatReport, sizesByArea, renamedIdentifiers, loadSizeBudget } = await report();
  const b = await bundle;
  const renamed = renamedIdentifiers(b.text, b.sources);
  const lines = formatReport({ sizes: sizesByArea(b.metafile), budgetsKiB: loadSizeBudget(), renamed, allowed: [] });
  assert.match(lines[0]!, /^size by area /);
  assert.ok(lines.some((l) => /^ {2}src\/main\.ts +\d+\.\d \/ +\d+\.\d/.test(l)));
  assert.ok(lines.some((l) => /^ {2}total +\d+\.\d \/ +\d+\.\d/.test(l)));
  assert.ok(lines.some((l) => /^renamed by esbuild /.test(l)));
  assert.equal(lines.filter((l) => /^ {2}NEW CLASH: /.test(l)).length, renamed.length, 'with an empty allowlist every rename is new');
  // The NEW CLASH line itself, whether or not the bundle has a rename today (scripts/name-clashes.json only shrinks).
  const one = formatReport({ sizes: sizesByArea(b.metafile), budgetsKiB: loadSizeBudget(), renamed: [{ name: 'reject2', stem: 'reject', module: 'src/b.ts', count: 1 }], allowed: [] });
  assert.ok(one.includes('  NEW CLASH: reject numbered reject2 in src/b.ts (not in scripts/name-clashes.json)'), one.join('\n'));
});
