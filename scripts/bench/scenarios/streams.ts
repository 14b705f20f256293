// 4a. Streams: N concurrent SSE streams, each a chunk every intervalMs for durationMs. Every
// chunk carries the upstream's write time on the shared monotonic clock, so the load generator
// knows each chunk's delay; direct and proxy take turns (D P P D ...). The proxy's CPU time is
// read from /proc over its runs.
import type { Ctx, ScenarioResult } from '../context.ts';
import type { Target } from '../loadgen-proc.ts';
import { cpuSeconds, cpuTotals } from '../procs.ts';
import { Samples, summarize, type LatencySummary } from '../shared.ts';

export async function streams(ctx: Ctx): Promise<ScenarioResult> {
  const c = ctx.cfg;
  const d = ctx.model.direct;
  const p = ctx.model.proxy;
  const order: Target[] = [];
  for (let r = 0; r < c.streamRounds; r++) order.push(...(r % 2 === 0 ? [d, p] : [p, d]));
  const delays: Record<string, Samples> = { direct: new Samples(), proxy: new Samples() };
  const runs: Record<string, unknown>[] = [];
  let proxyCpu = 0;
  let proxyWall = 0;
  let proxyChunks = 0;
  for (const [i, t] of order.entries()) {
    ctx.say(`streams: ${c.streams} x ${c.streamDurationMs / 1000} s, a chunk every ${c.streamIntervalMs} ms, run ${i + 1}/${order.length}: ${t.name}`);
    const cpu0 = cpuSeconds(ctx.proxy.pid);
    const m0 = cpuTotals();
    const w0 = performance.now();
    const r = await ctx.lg.call<{ delays: Float64Array; chunks: number; openMs: number; totalMs: number }>('streams', {
      target: t,
      count: c.streams,
      intervalMs: c.streamIntervalMs,
      durationMs: c.streamDurationMs,
      concurrency: 128,
    });
    const wall = (performance.now() - w0) / 1000;
    const cpu = cpuSeconds(ctx.proxy.pid) - cpu0;
    const m1 = cpuTotals();
    delays[t.name]!.append(r.delays);
    if (t.name === 'proxy') {
      proxyCpu += cpu;
      proxyWall += wall;
      proxyChunks += r.chunks;
    }
    runs.push({
      path: t.name,
      chunks: r.chunks,
      chunks_per_s: Math.round(r.chunks / (c.streamDurationMs / 1000)),
      open_all_ms: Math.round(r.openMs),
      wall_s: +wall.toFixed(2),
      proxy_cpu_s: +cpu.toFixed(2),
      machine_busy_cores: +(((m1.busy - m0.busy) / (m1.total - m0.total)) * 2).toFixed(2),
    });
    await new Promise((res) => setTimeout(res, 500));
  }
  const s: Record<string, LatencySummary> = { direct: summarize(delays.direct!.values()), proxy: summarize(delays.proxy!.values()) };
  const N = c.streams.toLocaleString('en-US');
  return {
    rows: [
      { id: 'streams.p50', label: `${N} streams: delay per chunk p50`, unit: 'ms', direct: s.direct!.p50, proxy: s.proxy!.p50, better: 'lower', added: true, digits: 3 },
      {
        id: 'streams.p99',
        label: `${N} streams: delay per chunk p99`,
        unit: 'ms',
        direct: s.direct!.p99,
        proxy: s.proxy!.p99,
        better: 'lower',
        added: true,
        digits: 3,
        target: { text: 'added < 1 ms', value: s.proxy!.p99 - s.direct!.p99, limit: 1, op: '<' },
      },
      { id: 'streams.cpu', label: `${N} streams: proxy CPU (user+sys)`, unit: 'cores', proxy: proxyCpu / proxyWall, better: 'lower', digits: 2 },
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
      runs,
    },
  };
}
