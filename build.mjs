// Bundles src/main.ts into dist/proxy.js: one readable, unminified CommonJS file that imports
// nothing but node: built-ins. Fails if anything from outside src/ would be bundled.
import { build } from 'esbuild';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { onlySrcAndBuiltins } from './scripts/bundle-policy.mjs';

const root = path.dirname(fileURLToPath(import.meta.url));
const srcDir = path.join(root, 'src') + path.sep;
const outfile = path.join(root, 'dist', 'proxy.js');

await build({
  entryPoints: [path.join(root, 'src', 'main.ts')],
  outfile,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  minify: false,
  sourcemap: false,
  legalComments: 'inline',
  banner: { js: '#!/usr/bin/env node\n// credential-proxy: bundled from src/ by build.mjs. Imports only node: built-ins.' },
  plugins: [onlySrcAndBuiltins(srcDir, root)],
  logLevel: 'warning',
});

// Belt and braces: the output must require nothing but node: built-ins.
const bundled = readFileSync(outfile, 'utf8');
const requires = [...bundled.matchAll(/\brequire\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]);
const foreign = requires.filter((r) => !r.startsWith('node:'));
if (foreign.length > 0) {
  console.error(`build: dist/proxy.js requires non-builtin modules: ${[...new Set(foreign)].join(', ')}`);
  process.exit(1);
}
if (!process.env.BUILD_QUIET) {
  console.log(`build: dist/proxy.js ${(statSync(outfile).size / 1024).toFixed(1)} KiB, requires ${[...new Set(requires)].join(', ')}`);
}
