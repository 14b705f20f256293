// 3b. Messages: a streamed Anthropic Messages call (2 KB up; message_start, 40 text deltas,
// message_delta, message_stop and the block events down, one write per event), one at a time,
// direct and through the gateway taking turns request by request: the time to its first byte
// and to its last, both from the same calls, the gateway reading its usage on the way. The
// direct path sends the key in x-api-key; the gateway gets no key from the load generator and
// injects its anthropic provider's.
import { allPaths, byPath, type Ctx, type ScenarioResult } from '../context.ts';
import { messagesEvents, summarize, type LatencySummary } from '../shared.ts';

export async function messages(ctx: Ctx): Promise<ScenarioResult> {
  const c = ctx.cfg;
  const targets = allPaths(ctx.messages);
  const events = messagesEvents().length;
  ctx.say(`messages: ${c.modelCalls} streams one at a time per path, to the first and to the last byte`);
  const got = await ctx.lg.call<Record<string, { latencies: Float64Array; firstByte?: Float64Array }>>('sequential', { targets, kind: 'messages', n: c.modelCalls, warmup: c.modelWarmup });
  const f: Record<string, LatencySummary> = {};
  const w: Record<string, LatencySummary> = {};
  for (const [k, v] of Object.entries(got)) {
    f[k] = summarize(v.firstByte!);
    w[k] = summarize(v.latencies);
  }
  const row = (id: string, label: string, s: Record<string, LatencySummary>, p: 'p50' | 'p99') => ({ id, label, unit: 'ms', ...byPath(s, (v) => v[p]), better: 'lower' as const, added: true, digits: 3 });
  return {
    rows: [
      row('messages.ttfb_p50', 'messages stream, time to first byte: p50', f, 'p50'),
      row('messages.ttfb_p99', 'messages stream, time to first byte: p99', f, 'p99'),
      row('messages.whole_p50', `messages stream, ${events} events to the end: p50`, w, 'p50'),
      row('messages.whole_p99', `messages stream, ${events} events to the end: p99`, w, 'p99'),
    ],
    data: { calls: c.modelCalls, events, first_byte_ms: f, whole_stream_ms: w },
  };
}
