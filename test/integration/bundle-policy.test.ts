import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { build } from 'esbuild';

const root = join(__dirname, '..', '..');
const srcDir = join(root, 'src') + '/';

async function bundleErrors(contents: string): Promise<string[]> {
  const { onlySrcAndBuiltins } = await import('../../scripts/bundle-policy.mjs');
  try {
    await build({
      stdin: { contents, resolveDir: __dirname, sourcefile: 'entry.ts', loader: 'ts' },
      bundle: true,
      write: false,
      platform: 'node',
      format: 'cjs',
      logLevel: 'silent',
      plugins: [onlySrcAndBuiltins(srcDir, root)],
    });
    return [];
  } catch (err) {
    return (err as { errors: { text: string }[] }).errors.map((e) => e.text);
  }
}

test('the bundle may contain files from src/ and node: built-ins', async () => {
  assert.deepEqual(await bundleErrors(`import { VERSION } from '../../src/config/version.ts'; import { createHash } from 'node:crypto'; console.log(VERSION, createHash);`), []);
});

test('the build fails if a file outside src/ would be bundled', async () => {
  const errors = await bundleErrors(`import { makeTestPki } from '../support/tls.ts'; console.log(makeTestPki);`);
  assert.match(errors.join('\n'), /test\/support\/tls\.ts is outside src\/ and may not be bundled/);
});

test('the build fails on a package import or a built-in without the node: prefix', async () => {
  assert.match((await bundleErrors(`import * as e from 'esbuild'; console.log(e);`)).join('\n'), /"esbuild" .*only node: built-ins/);
  assert.match((await bundleErrors(`import * as fs from 'fs'; console.log(fs);`)).join('\n'), /"fs" .*only node: built-ins/);
  assert.match((await bundleErrors(`import * as x from 'node:not-a-module'; console.log(x);`)).join('\n'), /node:not-a-module is not a Node built-in/);
});
