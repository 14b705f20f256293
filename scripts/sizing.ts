// `npm run sizing`: what one proxy process needs, to size a pod (docs/operations.md, "Sizing").
// The bench's processes (scripts/bench/): local HTTPS fakes of a git host and a model API in one
// process, the load generator in another, and `node dist/proxy.js` as production runs it. Read
// from /proc: the proxy's resident memory and its CPU time (user + system, every thread).
//   idle     the proxy started, nothing asked: RSS, CPU.
//   streams  N concurrent SSE streams held open through the gateway, a chunk every 50 ms each
//            (an agent's token stream), for each N in SIZING_STREAMS (default 100,200,300):
//            RSS with them open, peak RSS while opening them, CPU over the window and the chunks
//            relayed in it (on a busy machine the fakes send fewer than asked: CPU is then given
//            per chunk and scaled to 20 chunks a second per stream).
//   git      ref discovery (GET info/refs, ~600-byte answer) through the git proxy as fast as it
//            answers, over SIZING_GIT_CONNS keep-alive connections (default 4,16,64; a closed loop:
//            on a busy machine a load generator asked for a fixed rate falls behind and opens
//            ever more connections): the rate reached, CPU and RSS, and CPU per request.
// Every phase runs SIZING_RUNS times (default 3) on a fresh proxy; the report gives the median
// and the range, the machine's load average before and after (it is shared: figures from a busy
// machine are high), and per 100 streams / per 1,000 git requests a second. Writes
// bench-results/sizing.json. Nothing here asserts a speed.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { BUNDLE, ROOT } from '../test/support/proxy-process.ts';
import { makeTestPki } from '../test/support/tls.ts';
import { entry, startChild, type Child } from './bench/ipc.ts';
import type { Target } from './bench/loadgen-proc.ts';
import { cpuSeconds, launchProxy, peakRssBytes, proxyArgs, proxyEnvFor, resetPeakRss, rssBytes, type ProxyRun } from './bench/procs.ts';

const list = (name: string, fallback: number[]): number[] => {
  const raw = process.env[name];
  if (!raw) return fallback;
  const v = raw.split(',').map(Number);
  if (v.some((n) => !Number.isInteger(n) || n <= 0)) throw new Error(`${name}: positive integers, comma-separated, not ${raw}`);
  return v;
};
const RUNS = list('SIZING_RUNS', [3])[0]!;
const STREAMS = list('SIZING_STREAMS', [100, 200, 300]);
const GIT_CONNS = list('SIZING_GIT_CONNS', [4, 16, 64]);
const WINDOW_MS = list('SIZING_WINDOW_MS', [5000])[0]!;
const STREAM_INTERVAL_MS = 50;

const MiB = 2 ** 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

interface Sample {
  rssMiB: number;
  peakMiB: number;
  /** CPU time per wall second: 1 = one core busy. */
  cores: number;
}

/** CPU per wall second and RSS over `ms`, the peak mark reset first. */
async function measure(pid: number, ms: number): Promise<Sample> {
  resetPeakRss(pid);
  const c0 = cpuSeconds(pid);
  const t0 = performance.now();
  await sleep(ms);
  const cores = (cpuSeconds(pid) - c0) / ((performance.now() - t0) / 1000);
  return { rssMiB: rssBytes(pid) / MiB, peakMiB: peakRssBytes(pid) / MiB, cores };
}

async function main(): Promise<void> {
  if (!existsSync(BUNDLE)) throw new Error(`${BUNDLE} is missing: npm run sizing builds it first`);
  const say = (m: string) => process.stderr.write(`[sizing] ${m}\n`);
  const pki = makeTestPki();
  let stopping = false;
  const stopAll = async () => {
    if (stopping) return;
    stopping = true;
    await proxy?.stop();
    for (const c of children) await c.stop();
    pki.cleanup();
  };
  process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
  process.once('SIGTERM', () => void stopAll().then(() => process.exit(143)));
  const token = `sizing-${randomBytes(16).toString('hex')}`;
  const children: Child[] = [];
  let proxy: ProxyRun | undefined;
  const load0 = loadavg();
  const began = new Date().toISOString();
  const idle: Sample[] = [];
  const streams: Record<number, (Sample & { opened: number; openMs: number; chunksPerSec: number })[]> = {};
  const git: Record<number, (Sample & { reached: number; p99ms: number })[]> = {};
  const failures: Record<number, string[]> = {};
  const gitFailures: Record<number, string[]> = {};
  try {
    const [up, lg] = await Promise.all([startChild(entry('upstream-proc.ts'), ROOT), startChild(entry('loadgen-proc.ts'), ROOT)]);
    children.push(up, lg);
    const { gitPort, modelPort } = await up.call<{ gitPort: number; modelPort: number }>('start', { keyPem: pki.keyPem, certPem: pki.certPem, token, seed: randomBytes(8).toString('hex') });
    const hostKey = `127.0.0.1:${gitPort}`;
    const env = proxyEnvFor({ gitPort, modelPort, token, caFile: pki.caFile });
    const pa = proxyArgs();
    // On a busy machine the load generator may take longer than the default 60 s to send a body
    // it began: the proxy would answer 408, and the phase measure the machine, not the proxy.
    // Likewise a TLS handshake to the fake upstream may take longer than 10 s (a 504).
    pa.args.push('--body-timeout', '0', '--header-timeout', '120s', '--upstream-connect-timeout', '60s');
    for (let run = 1; run <= RUNS; run++) {
      proxy = await launchProxy({ env, ...pa });
      const p = proxy;
      const model: Target = { name: 'proxy', scheme: 'http', port: p.ports.model!, prefix: '', headers: {} };
      const gitTarget: Target = { name: 'proxy', scheme: 'http', port: p.ports.git!, prefix: `/${hostKey}`, headers: {} };
      await sleep(1000);
      idle.push(await measure(p.pid, WINDOW_MS));
      say(`run ${run}/${RUNS}: idle ${idle.at(-1)!.rssMiB.toFixed(0)} MiB`);
      for (const n of STREAMS) {
        resetPeakRss(p.pid);
        const st = await lg
          .call<{ openMs: number; opened: number; abandoned: number }>('openStreams', { target: model, count: n, intervalMs: STREAM_INTERVAL_MS, concurrency: 128, rampLimitMs: 120_000 })
          .catch((err: unknown) => {
            // A stream the machine could not open in time: this phase of this run is reported as failed, the rest goes on.
            (failures[n] ??= []).push(`run ${run}: ${(err as Error).message.split('\n')[0]}`);
            say(`run ${run}/${RUNS}: ${n} streams: FAILED: ${(err as Error).message.split('\n')[0]}`);
            return undefined;
          });
        if (st === undefined) {
          await up.call('endStreams');
          await sleep(2000);
          continue;
        }
        const peakOpening = peakRssBytes(p.pid) / MiB;
        await sleep(1000);
        const before = await lg.call<{ chunks: number }>('streamsStatus');
        const w0 = performance.now();
        const s = await measure(p.pid, WINDOW_MS);
        const status = await lg.call<{ open: number; failures: number; chunks: number }>('streamsStatus');
        const chunksPerSec = (status.chunks - before.chunks) / ((performance.now() - w0) / 1000);
        await lg.call('closeStreams');
        if (status.failures > 0 || status.open < st.opened) throw new Error(`streams ${n}: ${status.failures} failed, ${status.open} of ${st.opened} still open at the end of the window`);
        (streams[n] ??= []).push({ ...s, peakMiB: Math.max(s.peakMiB, peakOpening), opened: st.opened, openMs: st.openMs, chunksPerSec });
        say(`run ${run}/${RUNS}: ${st.opened} streams (${Math.round(st.openMs)} ms to open), ${chunksPerSec.toFixed(0)} chunks/s: RSS ${s.rssMiB.toFixed(0)} MiB, CPU ${(s.cores * 1000).toFixed(0)} millicores`);
        // The upstream ends what the clients left; the proxy settles before the next phase.
        await up.call('endStreams');
        await sleep(2000);
      }
      for (const conns of GIT_CONNS) {
        resetPeakRss(p.pid);
        const c0 = cpuSeconds(p.pid);
        const t0 = performance.now();
        const r = await lg
          .call<Record<string, { latencies: Float64Array; counts: number[]; elapsedMs: number[] }>>('closedLoop', { targets: [gitTarget], kind: 'refs', conns, sliceMs: WINDOW_MS, rounds: 1, warmupMs: 1000 })
          .catch((err: unknown) => {
            (gitFailures[conns] ??= []).push(`run ${run}: ${(err as Error).message.split('\n')[0]}`);
            say(`run ${run}/${RUNS}: git over ${conns} connections: FAILED: ${(err as Error).message.split('\n')[0]}`);
            return undefined;
          });
        if (r === undefined) continue;
        const wall = (performance.now() - t0) / 1000;
        const cores = (cpuSeconds(p.pid) - c0) / wall;
        const got = r.proxy!;
        const lat = [...got.latencies].sort((x, y) => x - y);
        const reached = (got.counts.reduce((x, y) => x + y, 0) / got.elapsedMs.reduce((x, y) => x + y, 0)) * 1000;
        (git[conns] ??= []).push({ rssMiB: rssBytes(p.pid) / MiB, peakMiB: peakRssBytes(p.pid) / MiB, cores, reached, p99ms: lat[Math.floor(lat.length * 0.99)] ?? NaN });
        say(`run ${run}/${RUNS}: git over ${conns} connections: ${reached.toFixed(0)} req/s, CPU ${(cores * 1000).toFixed(0)} millicores, RSS ${(rssBytes(p.pid) / MiB).toFixed(0)} MiB`);
        await sleep(1000);
      }
      await p.stop();
      proxy = undefined;
    }
  } finally {
    await stopAll();
  }

  const load1 = loadavg();
  const idleRss = median(idle.map((s) => s.rssMiB));
  const idleCores = median(idle.map((s) => s.cores));
  const range = (xs: number[], digits = 0) => `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}-${Math.max(...xs).toFixed(digits)})`;
  const lines = [
    `credential-proxy sizing, ${began}, ${RUNS} run(s) of each phase on a fresh proxy; median (min-max)`,
    `machine: ${cpus()[0]?.model ?? '?'} x ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}; load average before ${load0.map((l) => l.toFixed(2)).join(' ')}, after ${load1.map((l) => l.toFixed(2)).join(' ')}`,
    `idle: RSS ${range(idle.map((s) => s.rssMiB))} MiB, CPU ${range(idle.map((s) => s.cores * 1000), 1)} millicores`,
    '',
    `streams asked (opened)  chunks/s relayed  RSS MiB        peak MiB       CPU millicores   per 100 streams at ${1000 / STREAM_INTERVAL_MS} chunks/s each: RSS MiB, CPU millicores`,
  ];
  for (const n of STREAMS) {
    const s = streams[n];
    if (!s) {
      lines.push(`  ${String(n).padStart(5)}  failed in every run`);
      continue;
    }
    const perRss = s.map((x) => ((x.rssMiB - idleRss) / x.opened) * 100);
    // CPU per chunk relayed, times the chunks 100 streams send at the asked interval.
    const perCpu = s.map((x) => ((x.cores - idleCores) / x.chunksPerSec) * 100 * (1000 / STREAM_INTERVAL_MS) * 1000);
    lines.push(`  ${String(n).padStart(5)} (${range(s.map((x) => x.opened)).padEnd(14)}) ${range(s.map((x) => x.chunksPerSec)).padEnd(16)} ${range(s.map((x) => x.rssMiB)).padEnd(14)} ${range(s.map((x) => x.peakMiB)).padEnd(14)} ${range(s.map((x) => x.cores * 1000)).padEnd(16)} ${range(perRss, 1)}, ${range(perCpu, 0)}`);
  }
  for (const [n, why] of Object.entries(failures)) lines.push(`  ${n} streams failed (not in the figures): ${why.join('; ')}`);
  lines.push('', 'git ref discovery, connections  req/s reached        RSS MiB        CPU millicores   p99 ms          per 1,000 req/s: CPU millicores');
  for (const conns of GIT_CONNS) {
    const g = git[conns];
    if (!g) {
      lines.push(`  ${String(conns).padStart(5)}  failed in every run`);
      continue;
    }
    const perCpu = g.map((x) => ((x.cores - idleCores) / x.reached) * 1000 * 1000);
    lines.push(`  ${String(conns).padStart(5)}                       ${range(g.map((x) => x.reached)).padEnd(20)} ${range(g.map((x) => x.rssMiB)).padEnd(14)} ${range(g.map((x) => x.cores * 1000)).padEnd(16)} ${range(g.map((x) => x.p99ms), 1).padEnd(15)} ${range(perCpu, 0)}`);
  }
  for (const [conns, why] of Object.entries(gitFailures)) lines.push(`  ${conns} connections failed (not in the figures): ${why.join('; ')}`);
  const text = lines.join('\n');
  console.log(text);
  mkdirSync(join(ROOT, 'bench-results'), { recursive: true });
  writeFileSync(join(ROOT, 'bench-results', 'sizing.json'), `${JSON.stringify({ began, runs: RUNS, machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version, loadavgBefore: load0, loadavgAfter: load1 }, idle, streams, git, failures: { streams: failures, git: gitFailures }, report: text }, null, 2)}\n`);
}

main().catch((err: unknown) => {
  console.error(`sizing failed: ${(err as Error)?.stack ?? String(err)}`);
  process.exitCode = 1;
});
