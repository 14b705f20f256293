// How the bundle's size is counted against its budgets (scripts/bundle-report.mjs), on a metafile
// written here: an area over its budget, one without a budget and a total over its own are each
// reported over. The budgets and the renamed names checked on the bundle itself (a build):
// test/integration/bundle-report.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Metafile } from 'esbuild';

const report = () => import('../../scripts/bundle-report.mjs');

test('size budget: an area over its budget, an area without one and a total over its own are each reported over', async () => {
  const { sizesByArea, checkSizeBudget, unusedBudgets } = await report();
  const metafile = {
    inputs: {},
    outputs: {
      'dist/proxy.js': {
        bytes: 5000,
        inputs: { 'src/main.ts': { bytesInOutput: 1000 }, 'src/http/a.ts': { bytesInOutput: 1500 }, 'src/http/b.ts': { bytesInOutput: 600 }, 'src/json/c.ts': { bytesInOutput: 1800 } },
        imports: [],
        exports: [],
      },
    },
  } as unknown as Metafile;
  const sizes = sizesByArea(metafile);
  assert.deepEqual(sizes.areas, [
    { area: 'src/http', bytes: 2100, files: 2 },
    { area: 'src/json', bytes: 1800, files: 1 },
    { area: 'src/main.ts', bytes: 1000, files: 1 },
  ]);
  assert.equal(sizes.other, 100, 'what no source file accounts for: the header, esbuild helpers');
  const rows = checkSizeBudget(sizes, { 'src/http': 2, 'src/main.ts': 1, 'src/gone': 3, total: 4.8 });
  assert.deepEqual(
    rows.map((r) => [r.area, r.over]),
    [['src/http', true], ['src/json', true], ['src/main.ts', false], ['total', true]],
  );
  assert.deepEqual(unusedBudgets(sizes, { 'src/http': 2, 'src/gone': 3, total: 5 }), ['src/gone']);
});
