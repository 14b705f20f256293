// 2. Ref discovery: GET info/refs?service=git-upload-pack (a ~600-byte advertisement), closed
// loop over 64 keep-alive connections, direct / proxy / nginx taking turns in slices. Also,
// for reference, one connection at a time: the latency the proxy adds to a lone request.
import { allPaths, byPath, type Ctx, type ScenarioResult } from '../context.ts';
import { summarize, type LatencySummary } from '../shared.ts';

export async function refs(ctx: Ctx): Promise<ScenarioResult> {
  const c = ctx.cfg;
  const targets = allPaths(ctx.git);
  ctx.say(`ref discovery: ${c.refsConns} connections, ${c.refsRounds} rounds of ${c.refsSliceMs} ms per path`);
  const loop = await ctx.lg.call<Record<string, { latencies: Float64Array; counts: number[]; elapsedMs: number[] }>>('closedLoop', {
    targets,
    kind: 'refs',
    conns: c.refsConns,
    sliceMs: c.refsSliceMs,
    rounds: c.refsRounds,
    warmupMs: c.refsWarmupMs,
  });
  ctx.say(`ref discovery: ${c.refsSequential} sequential requests per path`);
  const seq = await ctx.lg.call<Record<string, { latencies: Float64Array }>>('sequential', { targets, kind: 'refs', n: c.refsSequential, warmup: 100 });

  const rps: Record<string, number> = {};
  const lat: Record<string, LatencySummary> = {};
  const seqLat: Record<string, LatencySummary> = {};
  for (const [name, r] of Object.entries(loop)) {
    rps[name] = (r.counts.reduce((a, b) => a + b, 0) / r.elapsedMs.reduce((a, b) => a + b, 0)) * 1000;
    lat[name] = summarize(r.latencies);
  }
  for (const [name, r] of Object.entries(seq)) seqLat[name] = summarize(r.latencies);
  return {
    rows: [
      {
        id: 'refs.rps',
        label: `ref discovery, ${c.refsConns} conns: throughput`,
        unit: 'req/s',
        ...byPath(rps, (v) => v),
        better: 'higher',
        digits: 0,
        target: { text: '>= 1.0x the floor', value: rps.proxy! / rps.floor!, limit: 1, op: '>=' as const },
      },
      {
        id: 'refs.p50',
        label: `ref discovery, ${c.refsConns} conns: p50`,
        unit: 'ms',
        ...byPath(lat, (v) => v.p50),
        better: 'lower',
        added: true,
        digits: 3,
        target: { text: 'added < 0.2 ms', value: lat.proxy!.p50 - lat.direct!.p50, limit: 0.2, op: '<' },
      },
      { id: 'refs.p99', label: `ref discovery, ${c.refsConns} conns: p99`, unit: 'ms', ...byPath(lat, (v) => v.p99), better: 'lower', added: true, digits: 3 },
      { id: 'refs.seq_p50', label: 'ref discovery, 1 conn (info): p50', unit: 'ms', ...byPath(seqLat, (v) => v.p50), better: 'lower', added: true, digits: 3 },
      { id: 'refs.seq_p99', label: 'ref discovery, 1 conn (info): p99', unit: 'ms', ...byPath(seqLat, (v) => v.p99), better: 'lower', added: true, digits: 3 },
    ],
    data: {
      conns: c.refsConns,
      slice_ms: c.refsSliceMs,
      rounds: c.refsRounds,
      rps,
      requests: Object.fromEntries(Object.entries(loop).map(([k, v]) => [k, v.counts.reduce((a, b) => a + b, 0)])),
      rps_per_slice: Object.fromEntries(Object.entries(loop).map(([k, v]) => [k, v.counts.map((cnt, i) => Math.round((cnt / v.elapsedMs[i]!) * 1000))])),
      latency_ms: lat,
      sequential_latency_ms: seqLat,
    },
  };
}
