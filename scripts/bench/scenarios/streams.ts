// 4a. Streams: N concurrent SSE streams, each a chunk every intervalMs, measured for durationMs
// from the moment all N are open (opening them through the proxy takes longer than direct, and
// streams of a fixed length would then never all run at once; past the ramp limit, from a second
// after the streams that did not open were given up). Every chunk carries the
// upstream's write time on the shared monotonic clock, so the load generator knows each chunk's
// delay; direct and proxy take turns (D P P D ...). The proxy's CPU time is read from /proc
// over the same windows.
import { cpus } from 'node:os';
import { allPaths, byPath, type Ctx, type ScenarioResult } from '../context.ts';
import type { Target } from '../loadgen-proc.ts';
import { cpuSeconds, cpuTotals } from '../procs.ts';
import { median, Samples, summarize, type LatencySummary } from '../shared.ts';

export async function streams(ctx: Ctx): Promise<ScenarioResult> {
  const c = ctx.cfg;
  const paths = allPaths(ctx.model);
  const order: Target[] = [];
  for (let r = 0; r < c.streamRounds; r++) order.push(...(r % 2 === 0 ? paths : [...paths].reverse()));
  const delays: Record<string, Samples> = Object.fromEntries(paths.map((t) => [t.name, new Samples()]));
  const runs: Record<string, unknown>[] = [];
  let proxyCpu = 0;
  let proxyWall = 0;
  let proxyChunks = 0;
  const openAll: Record<string, number[]> = {};
  const openCpu: Record<string, number[]> = {};
  const opened: Record<string, number[]> = {};
  const delivered: Record<string, number[]> = {};
  let abandonedTotal = 0;
  for (const [i, t] of order.entries()) {
    ctx.say(`streams: ${c.streams} x ${c.streamDurationMs / 1000} s, a chunk every ${c.streamIntervalMs} ms, run ${i + 1}/${order.length}: ${t.name}`);
    try {
      // CPU the path's own process spends opening the streams (none for direct): one event loop
      // takes each stream's request in turn, so the last first byte waits for all of them.
      const pidOf: Record<string, number | undefined> = { proxy: ctx.proxy.pid, floor: ctx.floor.pid, base: ctx.base?.pid };
      const openCpu0 = pidOf[t.name] === undefined ? 0 : cpuSeconds(pidOf[t.name]!);
      const st = await ctx.lg.call<{ openMs: number; opened: number; abandoned: number }>('streamsStart', {
        target: t,
        count: c.streams,
        intervalMs: c.streamIntervalMs,
        concurrency: 128,
        rampLimitMs: c.streamRampLimitMs,
      });
      if (st.abandoned) ctx.say(`streams: ${t.name}: only ${st.opened} of ${c.streams} open after ${c.streamRampLimitMs} ms; measuring those`);
      // The window: every stream that opened, for durationMs; then the upstream ends them all.
      if (pidOf[t.name] !== undefined) (openCpu[t.name] ??= []).push(((cpuSeconds(pidOf[t.name]!) - openCpu0) * 1e6) / st.opened);
      const got0 = await ctx.lg.call<number>('streamsProgress');
      const cpu0 = cpuSeconds(ctx.proxy.pid);
      const m0 = cpuTotals();
      const w0 = performance.now();
      await new Promise((res) => setTimeout(res, c.streamDurationMs));
      const wall = (performance.now() - w0) / 1000;
      const cpu = cpuSeconds(ctx.proxy.pid) - cpu0;
      const m1 = cpuTotals();
      const got = (await ctx.lg.call<number>('streamsProgress')) - got0;
      const ended = await ctx.up.call<number>('endStreams');
      const r = await ctx.lg.call<{ delays: Float64Array; chunks: number }>('streamsFinish', { timeoutMs: 30_000 });
      if (ended < st.opened) throw new Error(`streams: the upstream had ${ended} streams running, the client ${st.opened}`);
      // Nothing may stay behind: every upstream stream ended, and the proxy idle again.
      let left = (await ctx.up.call<{ streamsOpen: number }>('stats')).streamsOpen;
      for (let k = 0; k < 50 && left > 0; k++) {
        await new Promise((res) => setTimeout(res, 100));
        left = (await ctx.up.call<{ streamsOpen: number }>('stats')).streamsOpen;
      }
      if (left > 0) throw new Error(`streams: ${left} upstream streams still running 5 s after every client stream ended`);
      const idle0 = cpuSeconds(ctx.proxy.pid);
      await new Promise((res) => setTimeout(res, 1000));
      const idleCpu = cpuSeconds(ctx.proxy.pid) - idle0;
      delays[t.name]!.append(r.delays);
      (openAll[t.name] ??= []).push(st.openMs);
      (opened[t.name] ??= []).push(st.opened);
      (delivered[t.name] ??= []).push(got / wall);
      abandonedTotal += st.abandoned;
      if (t.name === 'proxy') {
        proxyCpu += cpu;
        proxyWall += wall;
        proxyChunks += got;
      }
      runs.push({
        path: t.name,
        opened: st.opened,
        abandoned_at_ramp_limit: st.abandoned,
        open_ms: Math.round(st.openMs),
        window_s: +wall.toFixed(2),
        offered_chunks_per_s: Math.round((st.opened * 1000) / c.streamIntervalMs),
        delivered_chunks_per_s: Math.round(got / wall),
        delay_samples: r.delays.length,
        chunks_total: r.chunks,
        proxy_cpu_s: +cpu.toFixed(2),
        upstream_streams_left_after_end: left,
        proxy_cpu_in_the_second_after: +idleCpu.toFixed(2),
        machine_busy_cores: +(((m1.busy - m0.busy) / (m1.total - m0.total)) * cpus().length).toFixed(2),
      });
    } catch (e) {
      // Leave nothing running behind: the next scenarios need the machine.
      await ctx.lg.call('streamsAbort').catch(() => {});
      await ctx.up.call('endStreams').catch(() => {});
      throw e;
    }
  }
  const s: Record<string, LatencySummary> = Object.fromEntries(Object.entries(delays).map(([k, v]) => [k, summarize(v.values())]));
  const N = c.streams.toLocaleString('en-US');
  const minOpen = (k: string) => Math.min(...opened[k]!);
  // Past the ramp limit a path may measure fewer streams than the other: its delays, deliveries
  // and CPU are then of a lighter load, and the rows comparing them say so instead of judging.
  const openText = (k: string) => {
    const lo = minOpen(k);
    const hi = Math.max(...opened[k]!);
    return lo === hi ? lo.toLocaleString('en-US') : `${lo.toLocaleString('en-US')}-${hi.toLocaleString('en-US')}`;
  };
  const all = Object.values(opened).flat();
  const loadsDiffer = Math.min(...all) !== Math.max(...all);
  const differ = loadsDiffer ? ` (loads differ: proxy ${openText('proxy')} vs direct ${openText('direct')} open)` : '';
  const addedTarget = { text: 'added < 1 ms', value: s.proxy!.p99 - s.direct!.p99, limit: 1, op: '<' as const };
  return {
    rows: [
      { id: 'streams.open', label: `${N} streams: open in the window (fewest of the runs)`, unit: 'streams', ...byPath(opened, (v) => Math.min(...v)), better: 'higher', digits: 0 },
      { id: 'streams.delivered', label: `${N} streams: chunks delivered per second${differ}`, unit: 'chunks/s', ...byPath(delivered, median), better: 'higher', digits: 0 },
      { id: 'streams.p50', label: `${N} streams: delay per chunk p50${differ}`, unit: 'ms', ...byPath(s, (v) => v.p50), better: 'lower', added: true, digits: 3 },
      {
        id: 'streams.p99',
        label: `${N} streams: delay per chunk p99${differ}`,
        unit: 'ms',
        ...byPath(s, (v) => v.p99),
        better: 'lower',
        added: true,
        digits: 3,
        ...(loadsDiffer ? { targetNote: `${addedTarget.text}: not judged, loads differ` } : { target: addedTarget }),
      },
      { id: 'streams.open_all', label: `${N} streams opened together: until each has its first byte${differ}`, unit: 'ms', ...byPath(openAll, median), better: 'lower', digits: 0 },
      { id: 'streams.open_cpu', label: `${N} streams opened together: CPU of the path's process per stream opened`, unit: 'us', ...byPath(openCpu, median), better: 'lower', digits: 0 },
      { id: 'streams.cpu', label: `${N} streams: proxy CPU (user+sys)${loadsDiffer ? ` (${openText('proxy')} open)` : ''}`, unit: 'cores', proxy: proxyCpu / proxyWall, better: 'lower', digits: 2 },
      { id: 'streams.cpu_per_chunk', label: `${N} streams: proxy CPU per chunk`, unit: 'us', proxy: (proxyCpu / proxyChunks) * 1e6, better: 'lower', digits: 1 },
    ],
    data: {
      streams: c.streams,
      interval_ms: c.streamIntervalMs,
      duration_ms: c.streamDurationMs,
      delay_ms: s,
      proxy_cpu_s: proxyCpu,
      proxy_wall_s: proxyWall,
      proxy_chunks: proxyChunks,
      ramp_limit_ms: c.streamRampLimitMs,
      abandoned_at_ramp_limit: abandonedTotal,
      loads_differ: loadsDiffer,
      what: 'delays and CPU over a window of duration_ms that starts once every stream is open (or, past ramp_limit_ms, a second after the streams still waiting for their first chunk are given up and counted: the window then measures those that opened, and when the paths opened different numbers the comparison rows are marked and the target is not judged); the upstream then ends all streams cleanly and the client checks each one (chunk order, announced count, [DONE]); delays count chunks written from the window start until the streams end',
      runs,
    },
  };
}
