// 3c. Responses: one Codex turn (its recorded response.create, about 17 KB up; response.created,
// in_progress, the message's events with 40 text deltas and response.completed down), one at a
// time, over HTTP (`POST /v1/responses`, streamed: an SSE event per write) and over the WebSocket
// mode (one socket per path for the whole run, as Codex keeps one for a session: a frame per
// event), direct and through the gateway taking turns turn by turn. The time to the first byte
// (HTTP) or the first event (WebSocket), and to the end, from the same turns; the gateway checks
// and charges each turn as a call (issue 40). The direct paths send the key themselves.
import type { Ctx, ScenarioResult } from '../context.ts';
import { responsesEvents, summarize, type LatencySummary } from '../shared.ts';

type FirstLast = Record<string, { latencies: Float64Array; firstByte?: Float64Array }>;

export async function responses(ctx: Ctx): Promise<ScenarioResult> {
  const c = ctx.cfg;
  const targets = [ctx.model.direct, ctx.model.proxy];
  const events = responsesEvents().length;
  ctx.say(`responses: ${c.modelCalls} turns one at a time per path over HTTP, then over one WebSocket per path`);
  const http = await ctx.lg.call<FirstLast>('sequential', { targets, kind: 'responses', n: c.modelCalls, warmup: c.modelWarmup });
  let socket: FirstLast;
  try {
    socket = await ctx.lg.call<FirstLast>('sequential', { targets, kind: 'socket', n: c.modelCalls, warmup: c.modelWarmup });
  } finally {
    await ctx.lg.call('closeBenchSockets');
  }
  const of = (got: FirstLast) => {
    const first: Record<string, LatencySummary> = {};
    const whole: Record<string, LatencySummary> = {};
    for (const [k, v] of Object.entries(got)) {
      first[k] = summarize(v.firstByte!);
      whole[k] = summarize(v.latencies);
    }
    return { first, whole };
  };
  const h = of(http);
  const w = of(socket);
  const row = (id: string, label: string, s: Record<string, LatencySummary>, p: 'p50' | 'p99') => ({ id, label, unit: 'ms', direct: s.direct![p], proxy: s.proxy![p], better: 'lower' as const, added: true, digits: 3 });
  return {
    rows: [
      row('responses.http_first_p50', 'responses over HTTP, time to first byte: p50', h.first, 'p50'),
      row('responses.http_first_p99', 'responses over HTTP, time to first byte: p99', h.first, 'p99'),
      row('responses.ws_first_p50', 'responses over WebSocket, time to first event: p50', w.first, 'p50'),
      row('responses.ws_first_p99', 'responses over WebSocket, time to first event: p99', w.first, 'p99'),
      row('responses.http_whole_p50', `responses over HTTP, ${events} events to the end: p50`, h.whole, 'p50'),
      row('responses.ws_whole_p50', `responses over WebSocket, ${events} events to the end: p50`, w.whole, 'p50'),
    ],
    data: { turns: c.modelCalls, events, http: h, websocket: w },
  };
}
