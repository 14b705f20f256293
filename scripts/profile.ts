// `npm run profile` (issue 44): where a request's time goes, path by path. For each hot path (ref
// discovery, a push streaming, a non-streamed model call, a streamed one, a Messages stream) it
// starts the bench's upstreams and load generator (scripts/bench/), a fresh built bundle and a
// fresh floor (scripts/bench/floor-proxy.mjs), both under `node --cpu-prof`, drives the bench's
// load through them in turns, stops them (the profiles are written at exit) and prints, for the
// proxy against the floor: CPU per request (from /proc), and the profile's busy time per request
// grouped by the request's steps (scripts/bench/profile-steps.ts), then the top functions by self
// time. Profiles and summaries land in bench-results/profile/.
//   PROFILE_ONLY=refs,chat  a subset (refs, push, chat, stream, messages, open: 200 streams opened together)
//   PROFILE_SECONDS=8       load per path and per process (default 8; the push: PROFILE_PUSH_MIB, 256, x3)
//   PROFILE_BUNDLE=file     profile another bundle than dist/proxy.js
//   PROFILE_INTERVAL_US=250 the CPU profile's sampling interval (default 1000)
//   PROFILE_NICE=-15        run the profiled processes at this niceness (root only): on shared cores
//                           a profile's samples take the time a process waited preempted to the
//                           function it was in (often a write that woke a peer); fewer preemptions,
//                           truer per-function figures
//   PROFILE_AB=file         no profiler: CPU per request (/proc) of dist/proxy.js against that bundle
//                           (the code before a change) and the floor, the three taking turns request
//                           by request in one load, PROFILE_ROUNDS times (default 5); medians and
//                           the range of the ratio proxy/base over the rounds
//   PROFILE_LATENCY=1       no profiler: the wall time of each phase of a model call (chat, stream,
//                           messages), through the floor, the held floor (the body read whole before
//                           it is sent, as the gateway must) and the proxy (bench/latency-probe.cjs)
//   PROFILE_SYSCALLS=1      no profiler: system calls per request of the proxy and of the floor
//                           (strace -c attached to each for the load; strace must be installed), to
//                           tell a write the proxy makes more often from one the profile charges
//                           more time (a write that wakes a peer on shared cores)
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { BUNDLE, ROOT } from '../test/support/proxy-process.ts';
import { makeTestPki } from '../test/support/tls.ts';
import { entry, startChild, type Child } from './bench/ipc.ts';
import type { Target } from './bench/loadgen-proc.ts';
import { cpuSeconds, launchFloor, launchProxy, proxyArgs, proxyEnvFor } from './bench/procs.ts';
import { summariseSteps } from './bench/profile-steps.ts';
import { CLAUDE_MODEL } from './bench/shared.ts';

const PATHS = ['refs', 'push', 'chat', 'stream', 'messages', 'open'] as const;
type PathName = (typeof PATHS)[number];
const OUT = join(ROOT, 'bench-results', 'profile');
const only = (process.env.PROFILE_ONLY ?? '').split(',').filter(Boolean);
for (const o of only) if (!(PATHS as readonly string[]).includes(o)) throw new Error(`PROFILE_ONLY: unknown path ${o} (${PATHS.join(', ')})`);
const SECONDS = Number(process.env.PROFILE_SECONDS ?? 8);
const PUSH_MIB = Number(process.env.PROFILE_PUSH_MIB ?? 256);
const OPEN_STREAMS = 200;
const bundle = process.env.PROFILE_BUNDLE || BUNDLE;
const AB = process.env.PROFILE_AB || undefined;
/**
 * PROFILE_HEAP=1: allocations sampled (every 4 KiB allocated, freed ones included: alloc-profile.cjs)
 * in place of the CPU profile; what a request allocates is what its share of garbage collection costs.
 */
const HEAP = process.env.PROFILE_HEAP === '1';
const profArgs = (dir: string) => (HEAP ? ['--require', join(__dirname, 'bench', 'alloc-profile.cjs')] : ['--cpu-prof', '--cpu-prof-interval', process.env.PROFILE_INTERVAL_US ?? '1000', '--cpu-prof-dir', dir]);
const prefix = process.env.PROFILE_NICE ? ['nice', '-n', process.env.PROFILE_NICE] : [];
const ROUNDS = Number(process.env.PROFILE_ROUNDS ?? 5);

/** Drives `kind` through the targets in turns for about SECONDS each; returns requests per target. */
async function drive(lg: Child, up: Child, path: PathName, targets: Target[], seed: string): Promise<Record<string, number>> {
  const count: Record<string, number> = {};
  if (path === 'open') {
    // OPEN_STREAMS streams opened together, each to its first chunk, then ended: what opening costs.
    for (let r = 0; r < Math.max(2, Math.round(SECONDS / 2)); r++) {
      for (const t of r % 2 ? [...targets].reverse() : targets) {
        const st = await lg.call<{ opened: number }>('streamsStart', { target: t, count: OPEN_STREAMS, intervalMs: 50, concurrency: 128, rampLimitMs: 20_000 });
        await up.call('endStreams');
        await lg.call('streamsFinish', { timeoutMs: 30_000 });
        count[t.name] = (count[t.name] ?? 0) + st.opened;
        // The pool's idle connections close (4 s) before the next round, as between the bench's runs.
        await new Promise((res) => setTimeout(res, 4500));
      }
    }
    return count;
  }
  if (path === 'push') {
    for (let r = 0; r < 3; r++) {
      for (const t of r % 2 ? [...targets].reverse() : targets) {
        await lg.call('upload', { target: t, mib: PUSH_MIB, seed });
        count[t.name] = (count[t.name] ?? 0) + 1;
      }
    }
    return count;
  }
  if (path === 'refs') {
    const got = await lg.call<Record<string, { counts: number[] }>>('closedLoop', { targets, kind: 'refs', conns: 64, sliceMs: 250, rounds: SECONDS * 4, warmupMs: AB ? 0 : 500 });
    for (const [k, v] of Object.entries(got)) count[k] = v.counts.reduce((a, b) => a + b, 0);
    return count;
  }
  // One call at a time, the targets taking turns call by call: about 1 ms a call through the proxy.
  const kind = path === 'chat' ? 'chat' : path === 'stream' ? 'ttfb' : 'messages';
  const n = Math.round(SECONDS * 700);
  const got = await lg.call<Record<string, { latencies: Float64Array }>>('sequential', { targets, kind, n, warmup: 100 });
  for (const [k, v] of Object.entries(got)) count[k] = v.latencies.length + 100;
  return count;
}

const SYSCALLS = process.env.PROFILE_SYSCALLS === '1';
const LATENCY = process.env.PROFILE_LATENCY === '1';

/** PROFILE_SYSCALLS: `strace -c` attached to a running process until `stop` resolves; its counts by system call. */
function countSyscalls(pid: number, file: string): { stop(): Promise<Map<string, number>> } {
  const tracer = spawn('strace', ['-f', '-c', '-o', file, '-p', String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  tracer.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exited = new Promise<void>((resolve) => tracer.once('close', () => resolve()));
  return {
    async stop() {
      tracer.kill('SIGINT'); // strace writes its table when interrupted
      await exited;
      const counts = new Map<string, number>();
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch {
        throw new Error(`strace wrote no table for pid ${pid}: ${err.trim() || 'is strace installed, and may it attach (ptrace)?'}`);
      }
      // "% time  seconds  usecs/call  calls  errors  syscall": the calls and the name
      for (const m of text.matchAll(/^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$/gm)) if (m[2] !== 'total') counts.set(m[2]!, Number(m[1]));
      return counts;
    },
  };
}

/** PROFILE_SYSCALLS: the proxy and the floor in turns under the path's load, each traced; system calls per request. */
async function syscallsOf(lg: Child, up: Child, path: PathName, o: { env: Record<string, string>; pa: { args: string[]; listeners: string[] }; hostKey: string; gitPort: number; modelPort: number; token: string; caFile: string; seed: string }): Promise<string> {
  const proxy = await launchProxy({ env: o.env, ...o.pa, bundle });
  const floor = await launchFloor({ hostKey: o.hostKey, gitPort: o.gitPort, modelPort: o.modelPort, token: o.token, caFile: o.caFile });
  const git = path === 'refs' || path === 'push';
  const targets: Target[] = [
    { name: 'floor', scheme: 'http', port: git ? floor.ports.git : floor.ports.model, prefix: git ? `/${o.hostKey}` : '', headers: {} },
    { name: 'proxy', scheme: 'http', port: git ? proxy.ports.git! : proxy.ports.model!, prefix: git ? `/${o.hostKey}` : '', headers: {} },
  ];
  const dir = join(OUT, path);
  mkdirSync(dir, { recursive: true });
  try {
    await drive(lg, up, path, targets, o.seed); // warm: pools full, code compiled
    const traced = { proxy: countSyscalls(proxy.pid, join(dir, 'strace-proxy.txt')), floor: countSyscalls(floor.pid, join(dir, 'strace-floor.txt')) };
    await new Promise((res) => setTimeout(res, 500)); // attached
    const n = await drive(lg, up, path, targets, o.seed);
    const counts = { proxy: await traced.proxy.stop(), floor: await traced.floor.stop() };
    const names = [...new Set([...counts.proxy.keys(), ...counts.floor.keys()])];
    const per = (who: 'proxy' | 'floor', name: string) => (counts[who].get(name) ?? 0) / n[who]!;
    const rows = names
      .map((name) => ({ name, proxy: per('proxy', name), floor: per('floor', name) }))
      .filter((r) => r.proxy >= 0.01 || r.floor >= 0.01)
      .sort((a, b) => b.proxy - a.proxy);
    const total = (who: 'proxy' | 'floor') => names.reduce((sum, name) => sum + per(who, name), 0);
    const unit = path === 'push' ? `push of ${PUSH_MIB} MiB` : 'request';
    return [`${path}: system calls per ${unit} (strace -c; ${n.proxy} through the proxy, ${n.floor} through the floor)`, `  ${'call'.padEnd(16)} ${'proxy'.padStart(9)} ${'floor'.padStart(9)}`, ...rows.map((r) => `  ${r.name.padEnd(16)} ${r.proxy.toFixed(2).padStart(9)} ${r.floor.toFixed(2).padStart(9)}`), `  ${'all'.padEnd(16)} ${total('proxy').toFixed(2).padStart(9)} ${total('floor').toFixed(2).padStart(9)}`].join('\n');
  } finally {
    await Promise.all([proxy.stop(), floor.stop()]);
  }
}

const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

/**
 * PROFILE_LATENCY: where a model call's wall time goes, phase by phase (latency-probe.cjs), through
 * the floor, the held floor (the floor reading the body whole before it sends, as a proxy that
 * checks a call must; a floor process of its own, so that each probe times one path) and the
 * proxy, taking turns call by call in one load; no profiler.
 */
async function latencyOf(lg: Child, up: Child, path: PathName, o: { env: Record<string, string>; pa: { args: string[]; listeners: string[] }; hostKey: string; gitPort: number; modelPort: number; token: string; caFile: string; seed: string }): Promise<string> {
  if (path !== 'chat' && path !== 'stream' && path !== 'messages') return `${path}: PROFILE_LATENCY times model calls one at a time (chat, stream, messages), not ${path}`;
  const dir = join(OUT, path);
  mkdirSync(dir, { recursive: true });
  const file = (who: string) => join(dir, `latency-${who}.json`);
  const nodeArgs = ['--require', join(__dirname, 'bench', 'latency-probe.cjs')];
  const floorOf = (who: string) => launchFloor({ hostKey: o.hostKey, gitPort: o.gitPort, modelPort: o.modelPort, token: o.token, caFile: o.caFile, prefix, nodeArgs, env: { LATENCY_PROBE_FILE: file(who) } });
  const proxy = await launchProxy({ env: { ...o.env, LATENCY_PROBE_FILE: file('proxy') }, ...o.pa, bundle, prefix, nodeArgs });
  const floor = await floorOf('floor');
  const held = await floorOf('held');
  const targets: Target[] = [
    { name: 'floor', scheme: 'http', port: floor.ports.model, prefix: '', headers: {} },
    { name: 'held', scheme: 'http', port: held.ports.held, prefix: '', headers: {} },
    { name: 'proxy', scheme: 'http', port: proxy.ports.model!, prefix: '', headers: {} },
  ];
  let n: Record<string, number>;
  try {
    n = await drive(lg, up, path, targets, o.seed);
  } finally {
    await Promise.all([proxy.stop(), floor.stop(), held.stop()]); // each probe writes its file at exit
  }
  const runs = ['floor', 'held', 'proxy'].map((who) => JSON.parse(readFileSync(file(who), 'utf8')) as { calls: number; overlapped: number; medians: Record<string, number | null> });
  const cell = (v: number | null | undefined) => (v === null || v === undefined ? '-' : v.toFixed(1)).padStart(10);
  return [
    `${path}: wall time of each phase of a call, µs, medians (latency-probe.cjs; ${n.proxy} calls a path, the three taking turns call by call)`,
    `  ${'phase'.padEnd(44)} ${'floor'.padStart(10)} ${'held'.padStart(10)} ${'proxy'.padStart(10)}`,
    ...Object.keys(runs[2]!.medians).map((phase) => `  ${phase.padEnd(44)} ${runs.map((r) => cell(r.medians[phase])).join(' ')}`),
    `  calls timed: ${runs.map((r) => r.calls).join(', ')}; arriving before the last one ended (not timed): ${runs.map((r) => r.overlapped).join(', ')}`,
  ].join('\n');
}

/** PROFILE_AB: CPU per request of the bundle, the baseline bundle and the floor, in ROUNDS rounds taking turns. */
async function cpuAb(lg: Child, up: Child, path: PathName, o: { env: Record<string, string>; pa: { args: string[]; listeners: string[] }; hostKey: string; gitPort: number; modelPort: number; token: string; caFile: string; seed: string }): Promise<string> {
  const proxy = await launchProxy({ env: o.env, ...o.pa, bundle, prefix });
  const base = await launchProxy({ env: o.env, ...o.pa, bundle: AB!, prefix });
  const floor = await launchFloor({ hostKey: o.hostKey, gitPort: o.gitPort, modelPort: o.modelPort, token: o.token, caFile: o.caFile, prefix });
  const git = path === 'refs' || path === 'push';
  const port = (p: Record<string, number | undefined>) => (git ? p.git! : p.model!);
  const procs = { floor: { pid: floor.pid, port: port(floor.ports) }, base: { pid: base.pid, port: port(base.ports) }, proxy: { pid: proxy.pid, port: port(proxy.ports) } };
  const us: Record<string, number[]> = { floor: [], base: [], proxy: [] };
  const ratio: number[] = [];
  // The three take turns request by request (slice by slice for refs) within one load, each
  // one's CPU read over the whole of it: the machine's noise falls on all three alike.
  const targets: Target[] = (Object.keys(procs) as (keyof typeof procs)[]).map((name) => ({ name, scheme: 'http', port: procs[name].port, prefix: git ? `/${o.hostKey}` : '', headers: {} }));
  try {
    for (let r = 0; r < ROUNDS; r++) {
      const cpu0 = Object.fromEntries(Object.entries(procs).map(([k, v]) => [k, cpuSeconds(v.pid)]));
      const n = await drive(lg, up, path, r % 2 ? [...targets].reverse() : targets, o.seed);
      const round: Record<string, number> = {};
      for (const [k, v] of Object.entries(procs)) {
        round[k] = ((cpuSeconds(v.pid) - cpu0[k]!) / n[k]!) * 1e6;
        us[k]!.push(round[k]!);
      }
      ratio.push(round.proxy! / round.base!);
      process.stderr.write(`[profile] ${path} round ${r + 1}: floor ${round.floor!.toFixed(0)}, base ${round.base!.toFixed(0)}, proxy ${round.proxy!.toFixed(0)} µs CPU per request\n`);
    }
  } finally {
    await Promise.all([proxy.stop(), base.stop(), floor.stop()]);
  }
  const sorted = [...ratio].sort((a, b) => a - b);
  return `${path}: CPU per ${path === 'push' ? `push of ${PUSH_MIB} MiB` : 'request'}, medians of ${ROUNDS} rounds: floor ${med(us.floor!).toFixed(0)} µs, base ${med(us.base!).toFixed(0)} µs, proxy ${med(us.proxy!).toFixed(0)} µs; proxy/base ${med(ratio).toFixed(3)} (${sorted[0]!.toFixed(3)}-${sorted[sorted.length - 1]!.toFixed(3)}), proxy/floor ${(med(us.proxy!) / med(us.floor!)).toFixed(2)}`;
}

async function main(): Promise<void> {
  if (!AB && !SYSCALLS && !LATENCY) rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  const pki = makeTestPki();
  const token = `bench-${randomBytes(16).toString('hex')}`;
  const seed = randomBytes(8).toString('hex');
  const [up, lg] = await Promise.all([startChild(entry('upstream-proc.ts'), ROOT), startChild(entry('loadgen-proc.ts'), ROOT)]);
  const report: string[] = [`npm run profile, ${new Date().toISOString()}, node ${process.version}, bundle ${bundle}`];
  try {
    const { gitPort, modelPort } = await up.call<{ gitPort: number; modelPort: number }>('start', { keyPem: pki.keyPem, certPem: pki.certPem, token, seed });
    const hostKey = `127.0.0.1:${gitPort}`;
    const providersFile = join(pki.dir, 'providers.json');
    writeFileSync(providersFile, JSON.stringify({ providers: [{ name: 'anthropic', kind: 'anthropic', baseUrl: `https://127.0.0.1:${modelPort}`, keyEnv: 'ANTHROPIC_BENCH_KEY', models: [CLAUDE_MODEL] }] }));
    const env = { ...proxyEnvFor({ gitPort, modelPort, token, caFile: pki.caFile }), ANTHROPIC_BENCH_KEY: token };
    const pa = proxyArgs();
    pa.args.push('--providers', providersFile);
    for (const path of PATHS) {
      if (only.length && !only.includes(path)) continue;
      if (AB || SYSCALLS || LATENCY) {
        const how = { env, pa, hostKey, gitPort, modelPort, token, caFile: pki.caFile, seed };
        const text = AB ? await cpuAb(lg, up, path, how) : SYSCALLS ? await syscallsOf(lg, up, path, how) : await latencyOf(lg, up, path, how);
        report.push('', text);
        process.stderr.write(`${text}\n`);
        continue;
      }
      const dir = join(OUT, path);
      mkdirSync(join(dir, 'proxy'), { recursive: true });
      mkdirSync(join(dir, 'floor'), { recursive: true });
      const proxy = await launchProxy({ env: { ...env, ALLOC_PROFILE_FILE: join(dir, 'proxy', 'alloc.heapprofile') }, ...pa, bundle, prefix, nodeArgs: profArgs(join(dir, 'proxy')) });
      const floor = await launchFloor({ hostKey, gitPort, modelPort, token, caFile: pki.caFile, prefix, env: { ALLOC_PROFILE_FILE: join(dir, 'floor', 'alloc.heapprofile') }, nodeArgs: profArgs(join(dir, 'floor')) });
      const git = path === 'refs' || path === 'push';
      const headers = {};
      const targets: Target[] = [
        { name: 'floor', scheme: 'http', port: git ? floor.ports.git : floor.ports.model, prefix: git ? `/${hostKey}` : '', headers },
        { name: 'proxy', scheme: 'http', port: git ? proxy.ports.git! : proxy.ports.model!, prefix: git ? `/${hostKey}` : '', headers },
      ];
      process.stderr.write(`[profile] ${path}: driving the floor and the proxy in turns\n`);
      const cpu0 = { proxy: cpuSeconds(proxy.pid), floor: cpuSeconds(floor.pid) };
      const requests = await drive(lg, up, path, targets, seed);
      const cpu = { proxy: cpuSeconds(proxy.pid) - cpu0.proxy, floor: cpuSeconds(floor.pid) - cpu0.floor };
      await Promise.all([proxy.stop(), floor.stop()]);
      if (HEAP) {
        report.push('', `${path}: heap profiles in ${dir}/{proxy,floor}/ (${requests.proxy} and ${requests.floor} requests)`);
        continue;
      }
      const file = (who: string) => {
        const f = readdirSync(join(dir, who)).find((x) => x.endsWith('.cpuprofile'));
        if (!f) throw new Error(`no profile written by the ${who} for ${path}`);
        return join(dir, who, f);
      };
      const unit = path === 'push' ? `push of ${PUSH_MIB} MiB` : path === 'open' ? `stream opened (${OPEN_STREAMS} together)` : 'request';
      const text = summariseSteps({ path, unit, proxy: { file: file('proxy'), requests: requests.proxy!, cpuS: cpu.proxy }, floor: { file: file('floor'), requests: requests.floor!, cpuS: cpu.floor }, bundle });
      writeFileSync(join(dir, 'summary.txt'), `${text}\n`);
      report.push('', text);
      process.stderr.write(`[profile] ${path}: done\n`);
    }
  } finally {
    await Promise.all([up.stop(), lg.stop()]);
    pki.cleanup();
  }
  writeFileSync(join(OUT, AB ? 'ab.txt' : SYSCALLS ? 'syscalls.txt' : LATENCY ? 'latency.txt' : 'summary.txt'), `${report.join('\n')}\n`);
  console.log(report.join('\n'));
  console.log(`\nwritten: ${OUT}/<path>/{proxy,floor}/*.cpuprofile and summary.txt`);
}

main().catch((err: unknown) => {
  console.error(`profile failed: ${(err as Error)?.stack ?? String(err)}`);
  process.exitCode = 1;
});
