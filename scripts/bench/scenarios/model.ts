// 3. Model call: a non-streamed chat completion, 30 KB up, 1 KB down. First one at a time
// (direct and proxy taking turns request by request), then open-loop at a fixed rate with
// latency counted from each request's due time, the two paths taking turns in slices. Also
// the time to the first byte of a stream, one at a time.
import { allPaths, byPath, type Ctx, type ScenarioResult } from '../context.ts';
import { summarize, type LatencySummary } from '../shared.ts';

export async function model(ctx: Ctx): Promise<ScenarioResult> {
  const c = ctx.cfg;
  const targets = allPaths(ctx.model);
  ctx.say(`model call: ${c.modelCalls} sequential calls per path`);
  const seq = await ctx.lg.call<Record<string, { latencies: Float64Array }>>('sequential', { targets, kind: 'chat', n: c.modelCalls, warmup: c.modelWarmup });
  ctx.say(`model call: ${c.modelRate}/s open loop, ${c.modelRounds} slices of ${c.modelSliceMs} ms per path`);
  const rate = await ctx.lg.call<Record<string, { latencies: Float64Array; sendLag: Float64Array; requests: number; wallMs: number }>>('openLoop', {
    targets,
    kind: 'chat',
    rate: c.modelRate,
    sliceMs: c.modelSliceMs,
    rounds: c.modelRounds,
    warmupMs: Math.min(1000, c.modelSliceMs),
  });
  ctx.say(`model call: ${c.modelCalls} streams one at a time per path, time to first byte`);
  const first = await ctx.lg.call<Record<string, { latencies: Float64Array }>>('sequential', { targets, kind: 'ttfb', n: c.modelCalls, warmup: c.modelWarmup });
  const f: Record<string, LatencySummary> = {};
  for (const [k, v] of Object.entries(first)) f[k] = summarize(v.latencies);
  const s: Record<string, LatencySummary> = {};
  const r: Record<string, LatencySummary> = {};
  const lag: Record<string, LatencySummary> = {};
  for (const [k, v] of Object.entries(seq)) s[k] = summarize(v.latencies);
  for (const [k, v] of Object.entries(rate)) {
    r[k] = summarize(v.latencies);
    lag[k] = summarize(v.sendLag);
  }
  const R = c.modelRate.toLocaleString('en-US');
  return {
    rows: [
      {
        id: 'model.seq_p50',
        label: 'model call, sequential: p50',
        unit: 'ms',
        ...byPath(s, (v) => v.p50),
        better: 'lower',
        added: true,
        digits: 3,
        target: { text: 'added < 0.25 ms', value: s.proxy!.p50 - s.direct!.p50, limit: 0.25, op: '<' },
      },
      { id: 'model.seq_p99', label: 'model call, sequential: p99', unit: 'ms', ...byPath(s, (v) => v.p99), better: 'lower', added: true, digits: 3, target: { text: 'added <= 1 ms', value: s.proxy!.p99 - s.direct!.p99, limit: 1, op: '<' } },
      {
        id: 'model.rate_p50',
        label: `model call, ${R}/s: p50`,
        unit: 'ms',
        ...byPath(r, (v) => v.p50),
        better: 'lower',
        added: true,
        digits: 3,
        target: { text: 'added < 0.25 ms', value: r.proxy!.p50 - r.direct!.p50, limit: 0.25, op: '<' },
      },
      {
        id: 'model.rate_p99',
        label: `model call, ${R}/s: p99`,
        unit: 'ms',
        ...byPath(r, (v) => v.p99),
        better: 'lower',
        added: true,
        digits: 3,
        target: { text: 'added < 2 ms', value: r.proxy!.p99 - r.direct!.p99, limit: 2, op: '<' },
      },
      { id: 'model.ttfb_p50', label: 'stream, time to first byte: p50', unit: 'ms', ...byPath(f, (v) => v.p50), better: 'lower', added: true, digits: 3 },
      { id: 'model.ttfb_p99', label: 'stream, time to first byte: p99', unit: 'ms', ...byPath(f, (v) => v.p99), better: 'lower', added: true, digits: 3 },
    ],
    data: {
      calls: c.modelCalls,
      sequential_ms: s,
      stream_first_byte_ms: f,
      rate: c.modelRate,
      rate_ms: r,
      rate_requests: Object.fromEntries(Object.entries(rate).map(([k, v]) => [k, v.requests])),
      achieved_rate: Object.fromEntries(Object.entries(rate).map(([k, v]) => [k, Math.round((v.requests / v.wallMs) * 1000)])),
      generator_send_lag_ms: lag,
    },
  };
}
