#!/usr/bin/env node
// npm test. The steps and what each needs:
//   1. build dist/proxy.js (the integration tests that test the process run that file), and beside
//      it install the deploy kit's checkers where missing (scripts/deploy-tools.ts);
//   2. at the same time, as they need nothing of each other: the bundle's audit, the type check,
//      the unused exports and the source audit (one TypeScript program, check-exports.mjs
//      --typecheck --audit-source: the build leaves the source audit to it, AUDIT_SOURCE_BESIDE=1,
//      so that npm test builds no program of its own for it), the SSE fixture check, and every
//      test file under node --test.
// The test processes get a temporary directory of their own (testTemporaryDirectory): what a
// passing run leaves there fails it.
// Any step that fails fails npm test; the audit's, the type check's and the fixture check's output
// is printed after the tests', so the test report is not cut into. Each step's wall time is printed last.
//
// The test files run through tsx's CommonJS hooks (--require tsx/cjs), not its ESM loader
// (--import tsx): the test files are CommonJS either way (package.json has no "type"), and the
// ESM loader starts a second V8 thread in every test process, about 0.4 s of CPU each, which
// over 120 files was a third of the suite's CPU time. The one thing it served that the CommonJS
// hooks do not is import() of a .ts file: import .ts files statically.
//
// node --test starts one process per file it is given (Node 20 has no --test-isolation=none),
// and a process costs about 0.4 s of CPU before its first test (node, tsx, the test runner, then
// loading the same src/ and test/support/ modules again), more than most files' own tests. So the
// files run as a few groups, one process each, as many groups as files run at once: a group is a
// file in a temporary directory that loads its members in turn, each inside a describe() named
// after it, so that a member's top-level hooks (before, after, ...) wrap its own tests only, and a
// member that throws while loading fails that suite alone. Members of a group run one after
// another, as their tests did alone; groups run side by side.
//
// Groups are balanced by how long each file took last time (a reporter writes every file's time
// to node_modules/.cache/test-times.json; before the first run, scripts/test-times.json; files
// not timed yet count as the median), heaviest
// first into the lightest group. A file runs in a process of its own if it touches what the
// process shares (the working directory, process handlers, the environment, globals, mocked
// timers).
//
// The test processes trust the default test PKI's CA (NODE_EXTRA_CA_CERTS, which Node reads only
// when a process starts): a test may then serve the proxy in its own process instead of starting
// the bundle, trusting the CA its environment names, as the bundle would (and this one besides:
// test/support/serve-in-process.ts). A test that needs a CA its peer does not trust uses another
// PKI (makeTestPki('other')).
//
//   node scripts/test.mjs                       everything, as npm test
//   node scripts/test.mjs test/unit/x.test.ts   only the given test files (build and checks too)
//   TEST_PROCESSES=8 node scripts/test.mjs      that many groups at once (default: three per core)
//   node scripts/test.mjs --tests-only FILES    the files alone, on the dist/proxy.js already built:
//                                               no build, audit, type check or fixture check
//                                               (npm run test:node-lines, once per Node line)
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { require as tsxRequire } from 'tsx/cjs/api';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Every test file, in name order. */
function testFiles() {
  return ['test/unit', 'test/integration'].flatMap((dir) =>
    readdirSync(path.join(root, dir))
      .filter((f) => f.endsWith('.test.ts'))
      .sort()
      .map((f) => `${dir}/${f}`),
  );
}

const TIMES = path.join(root, 'node_modules', '.cache', 'test-times.json');
// A fresh clone's first run is balanced by these (test-times.json of a run with
// TEST_PROCESSES=1, every file alone in turn, so no file's time holds another's); a stale entry
// costs balance, never a result.
const SEED_TIMES = path.join(root, 'scripts', 'test-times.json');
const PROCESS_STATE = /process\.(chdir|on|once|exitCode)\b|process\.env(\.\w+|\[[^\]]+\])\s*=[^=]|delete process\.env|globalThis\.|global\.|mock\.timers/;

/** Seconds each file took, by path: from the last run here, else from scripts/test-times.json. */
function lastTimes() {
  const read = (file) => {
    try {
      return JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      return {};
    }
  };
  return { ...read(SEED_TIMES), ...read(TIMES) };
}

/** Keeps this run's file times (from test-times-reporter.mjs) with those of files it did not run. */
function saveTimes(file) {
  try {
    const times = { ...lastTimes(), ...JSON.parse(readFileSync(file, 'utf8')) };
    mkdirSync(path.dirname(TIMES), { recursive: true });
    writeFileSync(TIMES, `${JSON.stringify(times, null, 1)}\n`);
  } catch {
    // No times this run (node --test failed before reporting): keep the last ones.
  }
}

/**
 * How long one test file may take, and so each of its tests: a test inherits its file's bound
 * (node:test gives a test its parent's timeout). A test waits for what it needs without a deadline
 * of its own (test/support/eventually.ts: a deadline is a timing assertion, and eventually's own
 * guard, 120 s, names what never came); this bounds a wait that is not an eventually(), so that it
 * fails the test, named with its file ("cancelled by parent"), instead of holding npm test. Node 20
 * gives --test-timeout to the process files only, not to the tests inside them: without this a
 * test that hung was reported as its whole process timing out, with no test named.
 */
const FILE_TIMEOUT_MS = 150_000;
/**
 * The bound of one test process (a group of files run one after another, about 40 s): above one
 * hung file's 150 s and the rest of its group, so that a file's bound speaks first. It also bounds
 * a hung before() or after() hook, which node:test runs outside the file's timeout.
 */
const PROCESS_TIMEOUT_MS = 300_000;

/**
 * The process files node --test is given, written into `dir`: `count` groups balanced by last
 * time's seconds (heaviest file first, into the group with the least so far), then one process
 * for each file that must run alone.
 */
function processFiles(files, dir, count) {
  const alone = files.filter((f) => PROCESS_STATE.test(readFileSync(path.join(root, f), 'utf8')));
  const times = lastTimes();
  const known = files.map((f) => times[f]).filter((t) => typeof t === 'number').sort((x, y) => x - y);
  const typical = known.length > 0 ? known[Math.floor(known.length / 2)] : 1;
  const weight = (f) => (typeof times[f] === 'number' ? times[f] : typical);
  const groups = Array.from({ length: count }, () => ({ members: [], seconds: 0 }));
  for (const f of files.filter((f) => !alone.includes(f)).sort((x, y) => weight(y) - weight(x))) {
    const lightest = groups.reduce((min, g) => (g.seconds < min.seconds ? g : min));
    lightest.members.push(f);
    lightest.seconds += weight(f);
  }
  return [...groups.filter((g) => g.members.length > 0).map((g) => g.members), ...alone.map((f) => [f])].map((members, i) => {
    const file = path.join(dir, `group-${i + 1}.test.cjs`);
    writeFileSync(file, [
      `// ${members.length} test file(s) in one process, each in a describe() named after it (scripts/test.mjs)`,
      `const { describe } = require('node:test');`,
      `const { join } = require('node:path');`,
      `for (const file of ${JSON.stringify(members)}) describe(file, { timeout: ${FILE_TIMEOUT_MS} }, () => require(join(${JSON.stringify(root)}, file)));`,
      ``,
    ].join('\n'));
    return file;
  });
}

/**
 * Runs a command in the checkout, `env` laid over this process's. `buffered`: its output is kept and returned, not printed as it
 * comes (for the steps that run beside the tests).
 */
function run(name, env, args, buffered = false) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: buffered ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    let output = '';
    if (buffered) {
      child.stdout.setEncoding('utf8').on('data', (s) => (output += s));
      child.stderr.setEncoding('utf8').on('data', (s) => (output += s));
    }
    child.once('close', (code, signal) => resolve({ name, ok: code === 0, code: code ?? signal, output, seconds: (Date.now() - started) / 1000 }));
  });
}

/**
 * The test processes' temporary directory (TMPDIR): one per run, removed at its end, so that
 * nothing a test forgets to remove piles up in /tmp, and a passing run that left something fails,
 * naming it. tsx keeps its transform cache in the temporary directory too: a link to the shared
 * one keeps it warm. `remove()` returns what was left, the link aside.
 */
function testTemporaryDirectory() {
  const dir = mkdtempSync(path.join(tmpdir(), 'npm-test-tmp-'));
  const tsxCache = `tsx-${userInfo().uid}`;
  mkdirSync(path.join(tmpdir(), tsxCache), { recursive: true });
  symlinkSync(path.join(tmpdir(), tsxCache), path.join(dir, tsxCache));
  return {
    dir,
    remove: () => {
      const left = readdirSync(dir).filter((f) => f !== tsxCache);
      rmSync(dir, { recursive: true, force: true });
      return left;
    },
  };
}

const started = Date.now();
const testsOnly = process.argv[2] === '--tests-only';
const args = process.argv.slice(testsOnly ? 3 : 2);
const files = args.length > 0 ? args : testFiles();
// Three test files per core: most files spend much of their time waiting on child processes
// (the bundle, git, redis-server and its sentinels' failovers, openssl) and sockets, not on the
// CPU. On 2 idle cores (2026-11-29, 1,870 tests) 4 groups took 50.0 s, 6 took 38.9 s and 8 40.9 s,
// with the same CPU (70 s) each time.
const concurrency = Number(process.env.TEST_PROCESSES ?? Math.max(2, availableParallelism() * 3));

const results = [];
// The deploy kit's checkers (kubectl, the Kubernetes schemas) live outside the tree like the agents
// of e2e:agents; npm test installs what is missing itself, beside the build, so that a fresh clone
// with an empty home directory passes by the README's command alone. Installed, this is a look.
const needsDeployTools = files.some((f) => /deploy-kit/.test(f));
if (testsOnly) {
  if (!existsSync(path.join(root, 'dist', 'proxy.js'))) {
    console.error('npm test: --tests-only runs on the bundle built before: build it first (node build.mjs)');
    process.exit(1);
  }
} else {
  const [build, deployTools] = await Promise.all([
    run('build', { AUDIT_SOURCE_BESIDE: '1' }, ['build.mjs']),
    needsDeployTools ? run('deploy tools', {}, ['--require', 'tsx/cjs', 'scripts/deploy-tools.ts'], true) : undefined,
  ]);
  results.push(build);
  if (deployTools) {
    results.push(deployTools);
    if (!deployTools.ok) process.stdout.write(deployTools.output);
  }
  if (!build.ok) {
    console.error(`npm test: build failed (exit ${build.code})`);
    process.exit(1);
  }
}
const beside = testsOnly ? [] : [
  run('audit:bundle', {}, ['scripts/audit-bundle.mjs'], true),
  run('typecheck, exports and source audit', {}, ['scripts/check-exports.mjs', '--typecheck', '--audit-source'], true),
  run('SSE fixtures', {}, ['--require', 'tsx/cjs', 'scripts/e2e/write-sse-fixtures.ts', '--check'], true),
];
const trusted = tsxRequire('../test/support/tls.ts', import.meta.url).makeTestPki();
const groupDir = mkdtempSync(path.join(tmpdir(), 'npm-test-groups-'));
const processes = processFiles(files, groupDir, concurrency);
const timesNow = path.join(groupDir, 'times.json');
const reporters = ['--test-reporter', process.stdout.isTTY ? 'spec' : 'tap', '--test-reporter-destination', 'stdout', '--test-reporter', './scripts/test-times-reporter.mjs', '--test-reporter-destination', timesNow];
const testTmp = testTemporaryDirectory();
const tests = await run('node --test', { NODE_EXTRA_CA_CERTS: trusted.caFile, TMPDIR: testTmp.dir }, ['--test', `--test-concurrency=${concurrency}`, `--test-timeout=${PROCESS_TIMEOUT_MS}`, ...reporters, '--require', 'tsx/cjs', ...processes]);
results.push(tests);
saveTimes(timesNow);
rmSync(groupDir, { recursive: true, force: true });
trusted.cleanup();
const left = testTmp.remove();
if (left.length > 0 && tests.ok) {
  // Only a passing run is held to it: a failed or cut test may not have reached its clean-up.
  results.push({ name: 'temporary files', ok: false, code: 1, seconds: 0 });
  console.error(`npm test: the tests left ${left.length} entr${left.length === 1 ? 'y' : 'ies'} in their temporary directory (now removed): ${left.join(', ')}. A test removes what it makes in os.tmpdir() (t.after, after()).`);
}
for (const r of await Promise.all(beside)) {
  results.push(r);
  process.stdout.write(r.output);
}

const failed = results.filter((r) => !r.ok);
console.log(`npm test: ${results.map((r) => `${r.name} ${r.seconds.toFixed(1)} s${r.ok ? '' : ' FAILED'}`).join(', ')}; ${((Date.now() - started) / 1000).toFixed(1)} s in all (${files.length} test files in ${processes.length} processes, ${concurrency} at a time)`);
if (failed.length > 0) {
  console.error(`npm test: failed: ${failed.map((r) => r.name).join(', ')}`);
  process.exit(1);
}
