// Bundles src/main.ts into dist/proxy.js: one readable, unminified CommonJS file that imports
// nothing but node: built-ins, with a header naming its version, source commit and the SHA-256
// of its sources (scripts/build-bundle.mjs, which the reproducibility test calls too). Fails if
// anything from outside src/ would be bundled. Prints the size, the required built-ins, the
// bytes per feature area against scripts/size-budget.json and the names esbuild renamed
// (scripts/bundle-report.mjs); BUILD_QUIET=1 prints nothing.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildBundle } from './scripts/build-bundle.mjs';
import { formatReport, loadNameClashes, loadSizeBudget, renamedIdentifiers, sizesByArea } from './scripts/bundle-report.mjs';

const root = path.dirname(fileURLToPath(import.meta.url));
const outfile = path.join(root, 'dist', 'proxy.js');

let bundle;
try {
  bundle = await buildBundle({ root, outfile });
} catch (err) {
  console.error(err.message);
  process.exit(1);
}
if (!process.env.BUILD_QUIET) {
  console.log(`build: dist/proxy.js ${(bundle.bytes.length / 1024).toFixed(1)} KiB, requires ${bundle.requires.join(', ')}`);
  const report = formatReport({
    sizes: sizesByArea(bundle.metafile),
    budgetsKiB: loadSizeBudget(),
    renamed: renamedIdentifiers(bundle.text, bundle.sources),
    allowed: loadNameClashes(),
  });
  console.log(`header: commit ${bundle.provenance.commit}, sha256 ${bundle.sha256}`);
  console.log(report.join('\n'));
}
