#!/usr/bin/env node
// npm test. The steps and what each needs:
//   1. build dist/proxy.js, then audit it (the integration tests run that file);
//   2. at the same time, as they need nothing of each other: the type check and the unused
//      exports (one TypeScript program, check-exports.mjs --typecheck), the SSE fixture check,
//      and every test file under node --test.
// Any step that fails fails npm test; the type check's and the fixture check's output is printed
// after the tests', so the test report is not cut into. Each step's wall time is printed last.
//
// The test files run through tsx's CommonJS hooks (--require tsx/cjs), not its ESM loader
// (--import tsx): the test files are CommonJS either way (package.json has no "type"), and the
// ESM loader starts a second V8 thread in every test process, about 0.4 s of CPU each, which
// over 120 files was a third of the suite's CPU time. The one thing it served that the CommonJS
// hooks do not is import() of a .ts file: import .ts files statically.
//
// Unit files without a top-level hook (before, after, beforeEach, afterEach) run several to a
// process: node --test starts one process per file it is given (Node 20 has no
// --test-isolation=none), and a process costs about 0.3 s of CPU before its first test, more
// than most unit files' own tests. A group is a file in a temporary directory that requires its
// members in name order; their tests keep their names and their files' locations, run one after
// another as they would alone, and a file that throws while loading is a failed test named after
// it (the others still run). A file runs alone if it has top-level hooks (in a group they would
// wrap every file's tests) or touches what the process shares (the environment, the working
// directory, process handlers, globals, mocked timers).
//
//   node scripts/test.mjs                       everything, as npm test
//   node scripts/test.mjs test/unit/x.test.ts   only the given test files (build and checks too)
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

// The files that take longest start first, so that none of them is left running alone at the
// end while the other core idles (measured 2026-11-26: the split-at-every-byte and fuzz tests
// are CPU-bound for several seconds; git-e2e and large-body wait on git and a 256 MiB push).
const LONGEST_FIRST = [
  'test/unit/responses.test.ts',
  'test/integration/git-e2e.test.ts',
  'test/unit/fuzz-sse.test.ts',
  'test/integration/large-body.test.ts',
  'test/integration/audit-bundle.test.ts',
  'test/integration/git-server-fixture.test.ts',
  'test/integration/faults.test.ts',
  'test/integration/cli.test.ts',
];

/** Every test file, the longest first, then the rest in name order. */
function testFiles() {
  const all = ['test/unit', 'test/integration'].flatMap((dir) =>
    readdirSync(path.join(root, dir))
      .filter((f) => f.endsWith('.test.ts'))
      .sort()
      .map((f) => `${dir}/${f}`),
  );
  return [...LONGEST_FIRST.filter((f) => all.includes(f)), ...all.filter((f) => !LONGEST_FIRST.includes(f))];
}

const GROUP_SIZE = 8;
const TOP_LEVEL_HOOK = /^(before|after|beforeEach|afterEach)\s*\(/m;
const PROCESS_STATE = /process\.(chdir|on|once|exitCode)\b|process\.env(\.\w+|\[[^\]]+\])\s*=[^=]|delete process\.env|globalThis\.|global\.|mock\.timers/;

/**
 * The files node --test is given: the longest alone and first, then the groups of unit files
 * that may share a process (written into `dir`), then every other file alone.
 */
function processFiles(files, dir) {
  const runsAlone = (f) => {
    const text = readFileSync(path.join(root, f), 'utf8');
    return !f.startsWith('test/unit/') || LONGEST_FIRST.includes(f) || TOP_LEVEL_HOOK.test(text) || PROCESS_STATE.test(text);
  };
  const groupable = files.filter((f) => !runsAlone(f));
  const groups = [];
  for (let i = 0; i < groupable.length; i += GROUP_SIZE) {
    const members = groupable.slice(i, i + GROUP_SIZE);
    const file = path.join(dir, `unit-${groups.length + 1}.test.cjs`);
    // A member that throws while loading is a failed test named after it; the others still run.
    writeFileSync(file, [
      `// ${members.length} unit test files in one process (scripts/test.mjs)`,
      `for (const file of ${JSON.stringify(members)}) {`,
      `  try {`,
      `    require(require('node:path').join(${JSON.stringify(root)}, file));`,
      `  } catch (err) {`,
      `    require('node:test').test(\`\${file}: the file failed to load\`, () => { throw err; });`,
      `  }`,
      `}`,
      ``,
    ].join('\n'));
    groups.push(file);
  }
  const alone = files.filter((f) => !groupable.includes(f));
  return [...alone.filter((f) => LONGEST_FIRST.includes(f)), ...groups, ...alone.filter((f) => !LONGEST_FIRST.includes(f))];
}

/**
 * Runs a command in the checkout. `buffered`: its output is kept and returned, not printed as it
 * comes (for the steps that run beside the tests).
 */
function run(name, args, buffered = false) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: buffered ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    let output = '';
    if (buffered) {
      child.stdout.setEncoding('utf8').on('data', (s) => (output += s));
      child.stderr.setEncoding('utf8').on('data', (s) => (output += s));
    }
    child.once('close', (code, signal) => resolve({ name, ok: code === 0, code: code ?? signal, output, seconds: (Date.now() - started) / 1000 }));
  });
}

const started = Date.now();
const files = process.argv.length > 2 ? process.argv.slice(2) : testFiles();
// Two test files per core: most files spend much of their time waiting on child processes
// (the bundle, git, redis-server, openssl) and sockets, not on the CPU.
const concurrency = Math.max(2, availableParallelism() * 2);

const results = [];
for (const [name, args] of [
  ['build', ['build.mjs']],
  ['audit:bundle', ['scripts/audit-bundle.mjs']],
]) {
  const r = await run(name, args);
  results.push(r);
  if (!r.ok) {
    console.error(`npm test: ${name} failed (exit ${r.code})`);
    process.exit(1);
  }
}
const beside = [
  run('typecheck and exports', ['scripts/check-exports.mjs', '--typecheck'], true),
  run('SSE fixtures', ['--require', 'tsx/cjs', 'scripts/e2e/write-sse-fixtures.ts', '--check'], true),
];
const groupDir = mkdtempSync(path.join(tmpdir(), 'npm-test-groups-'));
const processes = processFiles(files, groupDir);
results.push(await run('node --test', ['--test', `--test-concurrency=${concurrency}`, '--require', 'tsx/cjs', ...processes]));
rmSync(groupDir, { recursive: true, force: true });
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
