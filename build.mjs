// Bundles src/main.ts into dist/proxy.js: one readable, unminified CommonJS file that imports
// nothing but node: built-ins, with a header naming its version, source commit and the SHA-256
// of its sources (scripts/build-bundle.mjs, which the reproducibility test calls too). Fails if
// anything from outside src/ would be bundled, and on any finding of the source audit
// (scripts/audit-source.mjs: what each file of src/ reaches, against the credential kernel and
// the lists of scripts/kernel.json), each named by its file and line, or of the module graph
// esbuild bundled; a failed build leaves no dist/proxy.js. Prints the size, the required
// built-ins, the audit's summary, the bytes per feature area against scripts/size-budget.json
// and the names esbuild renamed (scripts/bundle-report.mjs, kept by the bundle's digest);
// BUILD_QUIET=1 prints nothing.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { auditGraph, auditSources, formatFindings, readDeclaration } from './scripts/audit-source.mjs';
import { buildBundle } from './scripts/build-bundle.mjs';
import { formatReport, loadNameClashes, loadSizeBudget, renamedIdentifiers, sizesByArea } from './scripts/bundle-report.mjs';

const root = path.dirname(fileURLToPath(import.meta.url));
const outfile = path.join(root, 'dist', 'proxy.js');

// esbuild bundles in a process of its own while the source audit runs here.
const bundling = buildBundle({ root, outfile }).then(
  (bundle) => ({ bundle }),
  (error) => ({ error }),
);
// AUDIT_SOURCE_BESIDE=1: npm test runs the source audit beside the tests instead, on the program
// the type check builds anyway (check-exports.mjs --audit-source), and fails on its findings.
const beside = process.env.AUDIT_SOURCE_BESIDE === '1';
let source;
try {
  source = beside ? { findings: [], files: {}, declaration: readDeclaration(root), beside } : auditSources(root);
} catch (err) {
  source = { findings: [{ file: 'scripts/kernel.json', line: 0, message: `the source audit could not run: ${err.message}` }], files: {}, declaration: undefined };
}
const { bundle, error } = await bundling;
const findings = [...source.findings, ...(bundle === undefined || source.declaration === undefined ? [] : auditGraph(bundle.metafile, source.declaration))];
if (findings.length > 0) {
  rmSync(outfile, { force: true });
  console.error(formatFindings(findings));
}
if (error !== undefined) console.error(error.message);
if (findings.length > 0 || error !== undefined) {
  console.error('build: failed; dist/proxy.js not written');
  process.exit(1);
}
if (!process.env.BUILD_QUIET) {
  console.log(`build: dist/proxy.js ${(bundle.bytes.length / 1024).toFixed(1)} KiB, requires ${bundle.requires.join(', ')}`);
  const report = formatReport({
    sizes: sizesByArea(bundle.metafile),
    budgetsKiB: loadSizeBudget(),
    renamed: renamedOf(bundle),
    allowed: loadNameClashes(),
  });
  console.log(`header: commit ${bundle.provenance.commit}, sha256 ${bundle.sha256}`);
  const kernel = Object.keys(source.declaration.kernel);
  const lines = kernel.reduce((n, f) => n + (source.files[f]?.lines ?? 0), 0);
  if (source.beside) console.log(`audit: the source audit runs beside the tests (check-exports.mjs --audit-source); the module graph has no finding`);
  else console.log(`audit: src/ ${Object.keys(source.files).length} files, no finding${source.cached ? ' (src/ unchanged since the last run)' : ''}; the kernel ${kernel.length} files, ${lines} lines (scripts/kernel.json; what each file reaches: npm run audit:source)`);
  console.log(report.join('\n'));
}

/**
 * esbuild's renamed names (bundle-report.mjs, which parses the bundle), kept by the digest of the
 * code below the header: a build of unchanged sources does not load the compiler to find them again.
 */
function renamedOf(bundle) {
  const file = path.join(root, 'node_modules', '.cache', 'bundle-report', 'renamed.json');
  const key = createHash('sha256').update(bundle.text.slice(bundle.header.length)).digest('hex');
  try {
    const kept = JSON.parse(readFileSync(file, 'utf8'));
    if (kept.key === key) return kept.renamed;
  } catch {
    // None kept, or unreadable: found again.
  }
  const renamed = renamedIdentifiers(bundle.text, bundle.sources);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(`${file}.${process.pid}`, JSON.stringify({ key, renamed }));
  renameSync(`${file}.${process.pid}`, file);
  return renamed;
}
