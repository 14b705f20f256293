// The audited file is reproducible: the same sources, lockfile and build scripts give the same
// bytes, wherever the checkout lies and whichever directory the build runs from, and its header
// names what it was built from (scripts/build-bundle.mjs, the function build.mjs calls). A
// reviewer relies on this to tie the file they were given to the src/ they read (SECURITY.md,
// "How to review").
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { copyBuildInputs } from '../support/build-inputs.ts';

const ROOT = join(__dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'reproducible-build-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const buildBundle = async (root: string, outfile: string) => (await import('../../scripts/build-bundle.mjs')).buildBundle({ root, outfile });
/** What a build of `root` would put in its header, without the build: buildBundle's own provenance(). */
const provenanceOf = async (root: string) => (await import('../../scripts/build-bundle.mjs')).provenance(root);

/** One build of the checkout itself, for the tests that read a build of it (built on first use). */
let checkoutBuild: ReturnType<typeof buildBundle> | undefined;
const buildOfCheckout = () => (checkoutBuild ??= buildBundle(ROOT, join(dir, 'checkout', 'proxy.js')));

/** A copy of the build's inputs (no .git: outside any repository) at `at`, with the build scripts and node_modules linked in. */
const checkoutCopy = (at: string): string => copyBuildInputs(at);

/** The code after the header: what esbuild wrote from src/. */
// What tells two builds of the same sources apart: the header, and the commit it names, which
// the code holds once more for proxy_build_info (src/config/version.ts, defined by the build).
const body = (text: string) => text.slice(text.indexOf('\n"use strict";\n')).replace(/^var COMMIT = .*$/m, 'var COMMIT = (the commit the header names);');

test('reproducible build: two builds of the checkout, into two directories, give the same bytes and the same header', async () => {
  // Other people edit this tree while the tests run: build twice at once, and again if the
  // sources changed between the two (then the headers differ and say so). The first of the two
  // is the build of the checkout the other tests read.
  for (let attempt = 1; ; attempt++) {
    const one = attempt === 1 ? buildOfCheckout() : buildBundle(ROOT, join(dir, 'one', 'proxy.js'));
    const [a, b] = await Promise.all([one, buildBundle(ROOT, join(dir, 'two', 'deeper', 'proxy.js'))]);
    if (attempt < 3 && JSON.stringify(a.provenance) !== JSON.stringify(b.provenance)) continue;
    assert.deepEqual(a.provenance, b.provenance);
    assert.equal(a.sha256, b.sha256, 'same sources, same bytes');
    assert.ok(a.bytes.equals(b.bytes));
    assert.ok(a.text.startsWith(`${a.header}\n"use strict";\n`), 'the header is the first thing in the file');
    assert.doesNotMatch(a.text, new RegExp(ROOT.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'no absolute path of the checkout');
    assert.doesNotMatch(a.text, new RegExp(dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'no path of the output');
    break;
  }
});

test('reproducible build: the bytes do not depend on where the checkout lies or which directory node build.mjs runs from', async () => {
  const near = checkoutCopy(join(dir, 'near'));
  const far = checkoutCopy(join(dir, 'a', 'much', 'longer', 'path', 'to', 'the', 'checkout'));
  const a = await buildBundle(near, join(near, 'dist', 'proxy.js'));
  assert.equal(a.provenance.commit, 'unknown', 'outside git the header says so');
  assert.match(a.text, /^\/\/ src\/main\.ts$/m, 'module comments are relative to the checkout');

  // The command, run in the other copy from another directory, writes the same bytes the
  // function wrote in the first.
  const run = spawnSync(process.execPath, [join(far, 'build.mjs')], { cwd: tmpdir(), encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  assert.ok(readFileSync(join(far, 'dist', 'proxy.js')).equals(a.bytes), 'another checkout path, node build.mjs from elsewhere: the same bytes');
  assert.match(run.stdout, /^build: dist\/proxy\.js \d+\.\d KiB, requires node:\S+/, 'the build line is unchanged');
  assert.match(run.stdout, /^size by area /m, 'then the size table');
  assert.match(run.stdout, /^ {2}total +\d+\.\d \/ +\d+\.\d$/m);
  assert.match(run.stdout, /^renamed by esbuild /m, 'then the renamed names');

  // The same source as the real checkout: only the header tells them apart.
  const real = await buildOfCheckout();
  if (real.provenance.sourcesSha256 === a.provenance.sourcesSha256) assert.equal(body(real.text), body(a.text));
});

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=test', '-c', 'user.email=test@example.invalid', '-c', 'commit.gpgsign=false', ...args], { cwd, encoding: 'utf8' }).trim();
}

test('reproducible build: the header names the version, the commit (-dirty for an uncommitted build input, not for other files) and the sources as sha256sum digests them', async () => {
  const repo = checkoutCopy(join(dir, 'repo'));
  writeFileSync(join(repo, '.gitignore'), 'node_modules\ndist\n');
  writeFileSync(join(repo, 'README.md'), 'readme\n');
  git(repo, 'init', '-q');
  git(repo, 'add', '.');
  git(repo, 'commit', '-q', '-m', 'sources');
  const head = git(repo, 'rev-parse', 'HEAD');
  const { version } = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { version: string };

  const clean = await buildBundle(repo, join(repo, 'dist', 'proxy.js'));
  assert.equal(clean.provenance.commit, head);
  const lines = clean.text.split('\n');
  assert.equal(lines[0], '#!/usr/bin/env node');
  assert.match(lines[1]!, new RegExp(`^// credential-proxy ${version.replace(/\./g, '\\.')}: bundled from src/ by build\\.mjs \\(esbuild \\d+\\.\\d+\\.\\d+\\)`));
  assert.equal(lines[2], `// source commit:   ${head}`);
  const shell = spawnSync('sh', ['-c', 'find src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum'], { cwd: repo, encoding: 'utf8' });
  assert.equal(shell.status, 0, shell.stderr);
  assert.equal(clean.provenance.sourcesSha256, shell.stdout.split(' ')[0], 'the digest the header states is the shell one-liner it shows');
  assert.match(lines[3]!, new RegExp(`^// sources sha256: +${clean.provenance.sourcesSha256} `));
  const lock = spawnSync('sha256sum', ['package-lock.json'], { cwd: repo, encoding: 'utf8' });
  assert.match(lines[4]!, new RegExp(`^// lockfile sha256: ${lock.stdout.split(' ')[0]} `));
  const { license } = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { license: string };
  assert.equal(license, 'Apache-2.0');
  assert.ok(clean.header.split('\n').includes(`// SPDX-License-Identifier: Apache-2.0 (the licence's full text: LICENSE, at the root of the sources)`), 'the header names the licence package.json names');

  // The header is its provenance (above): the edits below are read from provenance() alone, the
  // function buildBundle calls, without a build each.
  writeFileSync(join(repo, 'README.md'), 'edited\n');
  assert.equal((await provenanceOf(repo)).commit, head, 'a file the bundle does not depend on: still clean');
  writeFileSync(join(repo, 'src', 'untracked-note.txt'), 'new\n');
  const dirty = await provenanceOf(repo);
  assert.equal(dirty.commit, `${head}-dirty`, 'an untracked file in src/');
  assert.notEqual(dirty.sourcesSha256, clean.provenance.sourcesSha256);
  rmSync(join(repo, 'src', 'untracked-note.txt'));
  writeFileSync(join(repo, 'package-lock.json'), readFileSync(join(repo, 'package-lock.json'), 'utf8') + '\n');
  assert.equal((await provenanceOf(repo)).commit, `${head}-dirty`, 'a changed lockfile');
});

test('the audit repeats what the header says, and a bundle without the header fails it', async () => {
  const { auditFile } = await import('../../scripts/audit-bundle.mjs');
  const built = await buildOfCheckout();
  const r = auditFile(built.outfile);
  assert.equal(r.status, 0, r.stdout);
  assert.match(r.stdout, new RegExp(`^ {2}header: +credential-proxy \\S+, commit ${built.provenance.commit}`, 'm'));
  assert.match(r.stdout, new RegExp(`sources sha256 ${built.provenance.sourcesSha256}, lockfile sha256 ${built.provenance.lockfileSha256}`));

  const stripped = join(dir, 'no-header.js');
  writeFileSync(stripped, built.text.replace(/^\/\/ (source commit|sources sha256|lockfile sha256):.*\n/gm, ''));
  const bad = auditFile(stripped);
  assert.equal(bad.status, 1);
  assert.match(bad.stdout, /no build header/);
});
