#!/usr/bin/env node
// npm run release: the files a release ships, in dist/:
//   proxy.js           built from src/ as npm run build builds it (scripts/build-bundle.mjs), src/
//                      and its module graph held to the credential kernel (scripts/audit-source.mjs),
//                      then audited (scripts/audit-bundle.mjs): a finding of either stops the release
//   proxy.js.sha256    its SHA-256 as sha256sum prints it: `cd dist && sha256sum -c proxy.js.sha256`
//   proxy.js.cdx.json  its SBOM, CycloneDX 1.6 JSON (scripts/sbom.mjs): no component at run time,
//                      the development packages that built it (package-lock.json) and the node
//                      that ran the build
// A release names the commit it was built from: a checkout with uncommitted changes to what the
// release is made of, or outside git, is refused. `--snapshot` builds one anyway, for a look (the
// header and the SBOM then say -dirty or unknown).
// Reproducible: the same commit, node_modules (npm ci) and node give the same three files byte for
// byte. The SBOM's time is the commit's (SOURCE_DATE_EPOCH, seconds, when set), never the clock's.
//
//   npm run release                 (= node scripts/release.mjs)
//   node scripts/release.mjs --snapshot
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { auditFile } from './audit-bundle.mjs';
import { auditGraph, auditSources, formatFindings } from './audit-source.mjs';
import { BUILD_INPUTS, buildBundle } from './build-bundle.mjs';
import { cycloneDx } from './sbom.mjs';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
const FILE = 'proxy.js';
/** What a release is made of: the build's inputs, the audits with their declaration, and the scripts that write the rest. */
const RELEASE_INPUTS = [...BUILD_INPUTS, 'scripts/kernel.json', 'scripts/audit-source.mjs', 'scripts/audit-rules.mjs', 'scripts/audit-bundle.mjs', 'scripts/release.mjs', 'scripts/sbom.mjs'];

function git(args) {
  try {
    // As build-bundle.mjs: only a repository at the checkout's root, never one around it.
    const env = { ...process.env, GIT_CEILING_DIRECTORIES: path.dirname(root) };
    return execFileSync('git', ['--no-optional-locks', ...args], { cwd: root, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trimEnd();
  } catch {
    return null;
  }
}

/** Undefined when the checkout can make a release; else why not, and what to do. */
function notReleasable() {
  const head = git(['rev-parse', '--verify', '--quiet', 'HEAD']);
  if (head === null) return 'the checkout is not a git repository (or has no commit): a release names its commit';
  const changed = git(['status', '--porcelain', '--untracked-files=all', '--', ...RELEASE_INPUTS]);
  if (changed === null) return 'git status failed';
  if (changed !== '') return `uncommitted changes to what the release is made of:\n${changed}\ncommit or stash them`;
  return undefined;
}

/** ISO 8601 UTC: SOURCE_DATE_EPOCH when set, else the commit's time; undefined outside git. */
function releaseTime(commit) {
  const epoch = process.env.SOURCE_DATE_EPOCH ?? (/^[0-9a-f]{40,64}$/.test(commit) ? git(['log', '-1', '--format=%ct', commit]) : null);
  if (epoch === null || epoch === undefined) return undefined;
  if (!/^\d+$/.test(epoch)) throw new Error(`SOURCE_DATE_EPOCH is "${epoch}": it must be whole seconds since 1970`);
  return new Date(Number(epoch) * 1000).toISOString().replace('.000Z', 'Z');
}

async function main() {
  const snapshot = process.argv.includes('--snapshot');
  const unknown = process.argv.slice(2).filter((a) => a !== '--snapshot');
  if (unknown.length > 0) throw new Error(`unknown argument ${unknown.join(' ')}; the one option is --snapshot`);
  const refusal = notReleasable();
  if (refusal !== undefined && !snapshot) throw new Error(`${refusal}\n(node scripts/release.mjs --snapshot builds the files anyway, marked as not a release)`);

  // The source audit as npm run build runs it: a finding leaves no file.
  const source = auditSources(root);
  const bundle = await buildBundle({ root, outfile: path.join(dist, FILE) });
  const findings = [...source.findings, ...auditGraph(bundle.metafile, source.declaration)];
  if (findings.length > 0) {
    rmSync(bundle.outfile, { force: true });
    throw new Error(formatFindings(findings));
  }
  const audit = auditFile(bundle.outfile);
  if (audit.status !== 0) throw new Error(`the audit of dist/${FILE} failed:\n${audit.stdout}${audit.stderr}`);

  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
  const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8'));
  const installed = Object.keys(lock.packages).filter((at) => at !== '' && existsSync(path.join(root, at, 'package.json')));
  const sbom = cycloneDx({ pkg, lock, installed, bundle, file: FILE, node: process.versions.node, timestamp: releaseTime(bundle.provenance.commit) });

  writeFileSync(path.join(dist, `${FILE}.sha256`), `${bundle.sha256}  ${FILE}\n`);
  writeFileSync(path.join(dist, `${FILE}.cdx.json`), `${JSON.stringify(sbom, null, 2)}\n`);
  console.log(
    [
      `release: credential-proxy ${pkg.version}${refusal === undefined ? '' : ' (a snapshot, not a release)'}, commit ${bundle.provenance.commit}, node ${process.versions.node}`,
      `  dist/${FILE}            ${bundle.bytes.length} bytes, source and bundle audits clean, requires ${bundle.requires.join(', ')}`,
      `  dist/${FILE}.sha256     ${bundle.sha256}`,
      `  dist/${FILE}.cdx.json   CycloneDX ${sbom.specVersion}: no component at run time, ${sbom.components.length} development packages (scope excluded)`,
    ].join('\n'),
  );
}

main().catch((err) => {
  console.error(`release: ${err.message}`);
  process.exitCode = 1;
});
