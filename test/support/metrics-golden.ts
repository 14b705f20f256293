// The fixed sequence of request records behind test/fixtures/metrics/golden.prom, and the
// exposition the proxy's metrics give after it: for the golden-file test
// (test/unit/proxy-metrics.test.ts) and promtool's check of the same exposition
// (test/integration/proxy-metrics.test.ts). Every count, sum, cost and bucket in the golden file
// was checked by hand against these records.
import type { ModelRequestRecord } from '../../src/gateway/record.ts';
import type { GitRequestRecord } from '../../src/git/record.ts';
import { parsePrices, type PriceTable } from '../../src/limits/prices.ts';
import { createProxyMetrics } from '../../src/metrics/proxy-metrics.ts';
import { modelRecord } from './records.ts';

export const PRICES: PriceTable = parsePrices(JSON.stringify({ 'gpt-4o': { input: 2.5, cached: 1.25, output: 10 } }), 'prices.json');

export function gitRecord(over: Partial<GitRequestRecord>): GitRequestRecord {
  return {
    event: 'request',
    listener: 'git',
    request_id: 'git-0001',
    span_id: null,
    trace_id: null,
    parent_id: null,
    method: 'GET',
    host: 'github.com',
    route: 'info-refs',
    path: '/github.com/org/repo.git/info/refs',
    status: 200,
    duration_ms: 0,
    bytes_in: 0,
    bytes_out: 0,
    error: undefined,
    instance_id: null,
    workflow: null,
    run_id: null,
    token_error: undefined,
    challenge: undefined,
    ...over,
  };
}

// The fixed sequence behind the golden file. Seconds and buckets in the comments are what the
// golden file must show (GENAI_DURATION_BUCKETS, GENAI_TTFT_BUCKETS, GIT_DURATION_BUCKETS).
// Two sums show binary floating point at work, as any Prometheus client's would: the gpt-4o
// cost 0.00725 + 0.00175 + 0.000325 + 0.002475 = 0.0118 prints as 0.011800000000000001, and the
// github.com info-refs duration 0.04 + 0.012 + 0.03 + 4 * 0.001 = 0.086 as 0.08600000000000001;
// the two WebSocket turns' durations 1.2 + 0.001 = 1.201 print as 1.2009999999999998.
export const MODEL_RECORDS: readonly ModelRequestRecord[] = [
  // 1. Streamed with full usage. duration 1.5 s (le 2.56), ttft 0.12 s (le 0.25).
  //    cost: (1000-200)*2.5 + 200*1.25 + (500-100)*10 + 100*10 = 2000+250+4000+1000 = 7250 µUSD
  modelRecord({ stream: true, duration_ms: 1500, ttft_ms: 120, input_tokens: 1000, output_tokens: 500, reasoning_tokens: 100, cached_tokens: 200, usage_complete: true, finish_reason: 'stop' }),
  // 2. Not streamed. duration 0.64 s exactly on a boundary (le 0.64), no ttft; zero reasoning and
  //    cached counts add no token samples. cost: 300*2.5 + 100*10 = 1750 µUSD
  modelRecord({ duration_ms: 640, input_tokens: 300, output_tokens: 100, reasoning_tokens: 0, cached_tokens: 0, usage_complete: true, finish_reason: 'stop' }),
  // 3. Two 429s retried, then 200 streamed. duration 3.2 s (le 5.12), ttft 2.1 s (le 2.5).
  //    cost: 50*2.5 + 20*10 = 325 µUSD
  modelRecord({ stream: true, duration_ms: 3200, ttft_ms: 2100, input_tokens: 50, output_tokens: 20, usage_complete: true, retries: 2, rate_limited: 2 }),
  // 4. Stream interrupted by the client, no usage. duration 0.8 s (le 1.28), ttft 0.09 s (le 0.1).
  modelRecord({ stream: true, duration_ms: 800, ttft_ms: 90, interrupted: 'client', error: 'client_aborted' }),
  // 5. Stream interrupted upstream (bot-2). duration 5 s (le 5.12), ttft 0.3 s (le 0.5).
  modelRecord({ instance_id: 'bot-2', stream: true, duration_ms: 5000, ttft_ms: 300, interrupted: 'upstream', error: 'reset' }),
  // 6. Stream cut by the idle timeout (bot-2). duration 30 s (le 40.96), ttft 1 s exactly (le 1).
  modelRecord({ instance_id: 'bot-2', stream: true, duration_ms: 30000, ttft_ms: 1000, interrupted: 'idle_timeout', error: 'idle_timeout' }),
  // 7. 400 model_not_allowed: model null → model="none". duration 0.002 s (le 0.01). Not "usage incomplete".
  modelRecord({ model: null, status: 400, duration_ms: 2, error: 'model_not_allowed' }),
  // 8. An unpriced model: tokens counted, no cost. duration 0.25 s (le 0.32).
  modelRecord({ model: 'mistral-large', duration_ms: 250, input_tokens: 400, output_tokens: 200, usage_complete: true }),
  // 9. 200 without usage, no identity → instance_id="" workflow="". duration 0.1 s (le 0.16).
  modelRecord({ instance_id: null, workflow: null, run_id: null, duration_ms: 100 }),
  // 10. GET /v1/models: not a chat completion, so not "usage incomplete". duration 0.001 s (le 0.01).
  modelRecord({ model: null, api: null, method: 'GET', path: '/v1/models', duration_ms: 1, usage_complete: null }),
  // 11. 429 after two retries, given up: 3 rate-limited answers. duration 2 s (le 2.56).
  modelRecord({ status: 429, duration_ms: 2000, retries: 2, rate_limited: 3, error: 'rate_limited' }),
  // 12. A Responses call (api="responses"), streamed. duration 2.4 s (le 2.56), ttft 0.6 s (le 0.75).
  //    cost: (800-100)*2.5 + 100*1.25 + 60*10 = 1750+125+600 = 2475 µUSD
  modelRecord({ api: 'responses', path: '/v1/responses', stream: true, duration_ms: 2400, ttft_ms: 600, input_tokens: 800, output_tokens: 60, cached_tokens: 100, usage_complete: true, finish_reason: 'completed' }),
  // 13. A Messages call to an Anthropic provider, with cache reads and writes as their own types.
  //    duration 4 s (le 5.12), ttft 0.2 s (le 0.25). Unpriced: tokens, no cost.
  modelRecord({ provider: 'anthropic', model: 'claude-sonnet-4-5', api: 'messages', path: '/v1/messages', stream: true, duration_ms: 4000, ttft_ms: 200, input_tokens: 16396, output_tokens: 15, cached_tokens: 14336, cache_write_tokens: 2048, usage_complete: true, finish_reason: 'end_turn' }),
  // 14. The provider refused the gateway's own key (an upstream 401): 502 upstream_auth_failed,
  //    recorded as upstream_401. duration 0.03 s (le 0.04).
  modelRecord({ status: 502, duration_ms: 30, error: 'upstream_401' }),
  // 15. Refused 503 before its body was read: the request bodies held at once were at
  //    --max-held-request-bytes. model none (the body was never read). duration 0.003 s (le 0.01).
  //    Counted in model_gateway_request_bodies_refused_total, not in model_gateway_refusals_total.
  modelRecord({ model: null, status: 503, duration_ms: 3, error: 'request_bodies_full' }),
  // 16. A turn on a Responses WebSocket (method WS, api responses), completed, of an unpriced
  //    model: a request like any other, and model_gateway_websocket_turns_total{outcome="completed"}.
  //    duration 1.2 s (le 1.28), ttft 0.05 s (le 0.06).
  modelRecord({ model: 'mistral-large', api: 'responses', method: 'WS', path: '/v1/responses', stream: true, duration_ms: 1200, ttft_ms: 50, input_tokens: 100, output_tokens: 10, usage_complete: true, finish_reason: 'completed' }),
  // 17. A turn the gateway refused (never sent: attempts 0): outcome="refused", and its reason in
  //    model_gateway_refusals_total. duration 0.001 s (le 0.01).
  modelRecord({ model: 'mistral-large', api: 'responses', method: 'WS', path: '/v1/responses', status: 400, attempts: 0, duration_ms: 1, error: 'tool_not_allowed' }),
];

const GIT_RECORDS: readonly GitRequestRecord[] = [
  // 0.04 s (le 0.05)
  gitRecord({ duration_ms: 40, bytes_out: 1200 }),
  // 1.8 s (le 2.5)
  gitRecord({ method: 'POST', route: 'upload-pack', path: '/github.com/org/repo.git/git-upload-pack', duration_ms: 1800, bytes_in: 350, bytes_out: 48000 }),
  // 10 s exactly (le 10)
  gitRecord({ method: 'POST', host: 'git.example.com:8443', route: 'receive-pack', path: '/git.example.com:8443/org/repo.git/git-receive-pack', duration_ms: 10000, bytes_in: 250000, bytes_out: 600 }),
  // refused before routing: host and route none. 0.0005 s (le 0.005)
  gitRecord({ host: undefined, route: undefined, path: '/unknown.example/x.git/info/refs', status: 403, duration_ms: 0.5, error: 'host_not_registered' }),
  // 0.012 s (le 0.025); an upstream failure kind
  gitRecord({ status: 502, duration_ms: 12, error: 'connect_refused' }),
  // client left: status 0; client_aborted is not an upstream failure. 0.7 s (le 1)
  gitRecord({ method: 'POST', route: 'upload-pack', status: 0, duration_ms: 700, bytes_in: 100, bytes_out: 2048, error: 'client_aborted' }),
  // the upstream refused our credential (answered 502); not an upstream transport failure. 0.03 s (le 0.05)
  gitRecord({ status: 502, duration_ms: 30, error: 'upstream_rejected_credential' }),
  // git's first request of a command, answered with the 401 challenge: not a refusal, not in
  // git_proxy_requests_total, counted in git_proxy_auth_challenges_total only.
  gitRecord({ status: 401, duration_ms: 1, challenge: true }),
  gitRecord({ status: 401, duration_ms: 1, challenge: true }),
  // refusals, counted by host and reason. 0.001 s each (le 0.005)
  gitRecord({ status: 401, duration_ms: 1, error: 'workload_token_invalid', token_error: 'expired' }),
  gitRecord({ status: 403, duration_ms: 1, error: 'repo_not_in_scope', instance_id: 'bot-1', workflow: 'triage', run_id: 'run-1' }),
  gitRecord({ status: 403, duration_ms: 1, error: 'repo_not_in_scope', instance_id: 'bot-2', workflow: 'triage', run_id: 'run-2' }),
  gitRecord({ method: 'GET', host: 'git.example.com:8443', status: 403, duration_ms: 1, error: 'host_read_only' }),
];

export function goldenExposition(): string {
  const metrics = createProxyMetrics({ maxSeriesPerFamily: 50, seriesTtlMs: 0, runIdLabel: false, prices: PRICES });
  metrics.streams.opened('openai', 'gpt-4o');
  metrics.streams.opened('openai', 'gpt-4o');
  metrics.streams.opened('openai', 'mistral-large');
  for (const r of MODEL_RECORDS) metrics.model(r);
  metrics.streams.closed('openai', 'gpt-4o');
  metrics.streams.opened('openai', 'gpt-4o');
  metrics.streams.closed('openai', 'mistral-large');
  for (const r of GIT_RECORDS) metrics.git(r);
  // connections closed on arrival by a cap: 3 on git for one client, 1 on model for the total
  for (let i = 0; i < 3; i++) metrics.connectionRefused('git', 'per_client');
  metrics.connectionRefused('model', 'total');
  // a provider's minted credential: two refreshes, one failed
  metrics.credentialRefresh('vertex', true);
  metrics.credentialRefresh('vertex', false);
  // WebSocket connections: two opened, one closed (1 open); one client frame refused
  metrics.sockets.opened('openai');
  metrics.sockets.opened('openai');
  metrics.sockets.closed('openai');
  metrics.sockets.refused('client', 'unmasked_frame');
  return metrics.registry.expose();
}
