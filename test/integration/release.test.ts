// npm run release (scripts/release.mjs): the file, its SHA-256 and its SBOM, made the same way twice
// from one commit, and refused from a checkout that is not that commit. Run in a git repository
// of its own, a copy of the release's inputs, as a fresh clone would be.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { copyBuildInputs } from '../support/build-inputs.ts';
import { ROOT } from '../support/proxy-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'release-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const RELEASE_FILES = ['proxy.js', 'proxy.js.sha256', 'proxy.js.cdx.json'];

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=test', '-c', 'user.email=test@example.invalid', '-c', 'commit.gpgsign=false', ...args], { cwd, encoding: 'utf8' }).trim();
}

/** A git repository holding what a release is made of, committed, with node_modules linked in. */
function repository(at: string): string {
  copyBuildInputs(at, ['LICENSE', 'scripts/release.mjs', 'scripts/sbom.mjs']);
  writeFileSync(join(at, '.gitignore'), 'node_modules\ndist\n');
  git(at, 'init', '-q');
  git(at, 'add', '.');
  git(at, 'commit', '-q', '-m', 'a release');
  return at;
}

/** `node scripts/release.mjs [args]` of `repo`, run from `cwd`. */
function release(repo: string, cwd: string, ...args: string[]) {
  return spawnSync(process.execPath, [join(repo, 'scripts', 'release.mjs'), ...args], { cwd, encoding: 'utf8', env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir } });
}

const readRelease = (repo: string) => Object.fromEntries(RELEASE_FILES.map((f) => [f, readFileSync(join(repo, 'dist', f))]));

interface Sbom {
  bomFormat: string;
  specVersion: string;
  version: number;
  serialNumber?: string;
  metadata: {
    timestamp?: string;
    lifecycles: { phase: string }[];
    tools: { components: { type: string; name: string; version: string }[] };
    component: { type: string; 'bom-ref': string; name: string; version: string; licenses: { license: { id: string } }[]; hashes: { alg: string; content: string }[]; properties: { name: string; value: string }[] };
  };
  components: { type: string; 'bom-ref': string; group?: string; name: string; version: string; scope?: string; purl: string; hashes?: { alg: string; content: string }[] }[];
  dependencies: { ref: string; dependsOn?: string[] }[];
  compositions: { aggregate: string; assemblies?: string[]; dependencies?: string[] }[];
}

let repo: string;
let head: string;
let first: Record<string, Buffer>;

before(() => {
  repo = repository(join(dir, 'repo'));
  head = git(repo, 'rev-parse', 'HEAD');
  const r = release(repo, repo);
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  first = readRelease(repo);
});

test('release: npm run release writes dist/proxy.js, its SHA-256 as sha256sum checks it, and a CycloneDX 1.6 SBOM that names the file by its hash, no component at run time and the build\'s tools by their locked versions', () => {
  const sha256 = createHash('sha256').update(first['proxy.js']!).digest('hex');
  assert.equal(first['proxy.js.sha256']!.toString(), `${sha256}  proxy.js\n`);
  const check = spawnSync('sha256sum', ['-c', 'proxy.js.sha256'], { cwd: join(repo, 'dist'), encoding: 'utf8' });
  assert.equal(check.status, 0, check.stderr);
  assert.equal(check.stdout, 'proxy.js: OK\n');

  const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { name: string; version: string; license: string; devDependencies: Record<string, string> };
  const lock = JSON.parse(readFileSync(join(repo, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version: string; integrity: string }> };
  const sbom = JSON.parse(first['proxy.js.cdx.json']!.toString()) as Sbom;
  assert.equal(sbom.bomFormat, 'CycloneDX');
  assert.equal(sbom.specVersion, '1.6');
  assert.equal(sbom.version, 1);
  assert.equal(sbom.serialNumber, undefined, 'no serial number: two builds of one commit give one SBOM');
  assert.equal(sbom.metadata.timestamp, new Date(Number(git(repo, 'log', '-1', '--format=%ct')) * 1000).toISOString().replace('.000Z', 'Z'), "the commit's time, not the clock's");

  // The file: named, versioned, licensed, hashed; its provenance is the header's.
  const file = sbom.metadata.component;
  assert.deepEqual([file.type, file.name, file.version, file['bom-ref']], ['application', pkg.name, pkg.version, `${pkg.name}@${pkg.version}`]);
  assert.deepEqual(file.licenses, [{ license: { id: pkg.license } }]);
  assert.deepEqual(file.hashes, [{ alg: 'SHA-256', content: sha256 }], 'the hash of the file beside it');
  const property = (name: string) => file.properties.find((p) => p.name === name)?.value;
  assert.equal(property('credential-proxy:file'), 'proxy.js');
  assert.equal(property('credential-proxy:source-commit'), head);
  const header = first['proxy.js']!.toString().split('\n').slice(0, 6).join('\n');
  assert.ok(header.includes(`// source commit:   ${head}`));
  assert.ok(header.includes(`// sources sha256:  ${property('credential-proxy:sources-sha256')}  `), 'the sources digest the header states');
  assert.ok(header.includes(`// lockfile sha256: ${property('credential-proxy:lockfile-sha256')}  `), 'the lockfile digest the header states');

  // Zero run-time dependencies: every component is excluded (never reachable at run time), and
  // the file's entry in the dependency graph is present and empty, the graph stated complete.
  assert.ok(sbom.components.length > 0);
  for (const c of sbom.components) assert.equal(c.scope, 'excluded', `${c.purl} is a build tool, excluded at run time`);
  assert.deepEqual(sbom.dependencies, [{ ref: file['bom-ref'], dependsOn: [] }]);
  assert.deepEqual(sbom.compositions, [{ aggregate: 'complete', assemblies: [file['bom-ref']], dependencies: [file['bom-ref']] }]);

  // The build's tools at the versions package-lock.json locks, with its hashes; the node that ran it.
  for (const name of Object.keys(pkg.devDependencies)) {
    const locked = lock.packages[`node_modules/${name}`]!;
    const c = sbom.components.find((x) => (x.group === undefined ? x.name : `${x.group}/${x.name}`) === name);
    assert.ok(c, `${name} is a component`);
    assert.equal(c.version, locked.version, name);
    assert.equal(c.purl, `pkg:npm/${name.replace(/^@/, '%40')}@${locked.version}`);
    assert.deepEqual(c.hashes, [{ alg: 'SHA-512', content: Buffer.from(locked.integrity.slice('sha512-'.length), 'base64').toString('hex') }]);
  }
  assert.deepEqual(sbom.metadata.tools.components.map((t) => [t.name, t.version]), [['node', process.versions.node]]);
  assert.deepEqual(sbom.metadata.lifecycles, [{ phase: 'build' }]);
});

test('release: two releases of one commit, from two clones in two places and two working directories, are the same three files byte for byte', () => {
  const clone = join(dir, 'elsewhere', 'a', 'longer', 'path');
  mkdirSync(join(clone, '..'), { recursive: true });
  execFileSync('git', ['clone', '-q', repo, clone]);
  symlinkSync(join(ROOT, 'node_modules'), join(clone, 'node_modules'), 'dir');
  const r = release(clone, tmpdir());
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  const second = readRelease(clone);
  for (const f of RELEASE_FILES) assert.ok(second[f]!.equals(first[f]!), `dist/${f} differs between the two releases`);
});

test('release: a checkout with uncommitted changes to a release input is refused, naming them; --snapshot builds it, and the SBOM says -dirty', () => {
  renameSync(join(repo, 'dist'), join(dir, 'first-dist'));
  writeFileSync(join(repo, 'src', 'main.ts'), `${readFileSync(join(repo, 'src', 'main.ts'), 'utf8')}\n// an edit\n`);
  const refused = release(repo, repo);
  assert.equal(refused.status, 1);
  assert.match(refused.stderr, /^release: uncommitted changes to what the release is made of:\n M src\/main\.ts\ncommit or stash them\n/);
  assert.match(refused.stderr, /--snapshot builds the files anyway/);
  assert.equal(existsSync(join(repo, 'dist')), false, 'nothing written');

  const snapshot = release(repo, repo, '--snapshot');
  assert.equal(snapshot.status, 0, snapshot.stderr);
  assert.match(snapshot.stdout, /a snapshot, not a release/);
  const sbom = JSON.parse(readFileSync(join(repo, 'dist', 'proxy.js.cdx.json'), 'utf8')) as Sbom;
  assert.equal(sbom.metadata.component.properties.find((p) => p.name === 'credential-proxy:source-commit')?.value, `${head}-dirty`);
  assert.equal(sbom.metadata.timestamp, undefined, 'no commit holds it: no time');
});
