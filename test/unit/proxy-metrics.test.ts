// The proxy's metric families, fed from request records.
//
// The golden-file test compares the FULL exposition after a fixed sequence of records with
// test/fixtures/metrics/golden.prom. After an intended change to the metrics, regenerate it:
//
//   UPDATE_GOLDEN=1 node --test --import tsx test/unit/proxy-metrics.test.ts
//
// and then read the diff line by line: every count, sum, cost and bucket in the golden file was
// checked by hand against the records below, and must stay right, not merely match the code.
//
// The promtool test needs promtool (Debian/Ubuntu: apt-get install prometheus; CI installs it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ModelRequestRecord } from '../../src/gateway/record.ts';
import type { GitRequestRecord } from '../../src/git/record.ts';
import { parsePrices, type PriceTable } from '../../src/limits/prices.ts';
import { createProxyMetrics, turnOutcome } from '../../src/metrics/proxy-metrics.ts';
import { modelRecord } from '../support/records.ts';

const GOLDEN = join(__dirname, '..', 'fixtures', 'metrics', 'golden.prom');
const START_TIME_PLACEHOLDER = '<PROCESS_START_TIME>';

const PRICES: PriceTable = parsePrices(JSON.stringify({ 'gpt-4o': { input: 2.5, cached: 1.25, output: 10 } }), 'prices.json');

function gitRecord(over: Partial<GitRequestRecord>): GitRequestRecord {
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
const MODEL_RECORDS: readonly ModelRequestRecord[] = [
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

function goldenExposition(): string {
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

function withStartTimePlaceholder(text: string): string {
  const re = /^process_start_time_seconds (\S+)$/m;
  const m = re.exec(text);
  assert.ok(m, 'process_start_time_seconds is exposed');
  const v = Number(m[1]);
  const now = Date.now() / 1000;
  assert.ok(Number.isInteger(v) && v <= now + 1 && v > now - process.uptime() - 60, `process_start_time_seconds ${m[1]} is this process's start`);
  return text.replace(re, `process_start_time_seconds ${START_TIME_PLACEHOLDER}`);
}

// ---- a small exposition parser ----

interface Sample {
  readonly family: string;
  readonly name: string;
  readonly labels: ReadonlyMap<string, string>;
  readonly value: number;
}

function unescapeLabel(v: string): string {
  return v.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
}

function parseExposition(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  let family = '';
  for (const line of text.slice(0, -1).split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) {
      family = type[1]!;
      types.set(family, type[2]!);
      continue;
    }
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `unparseable sample line: ${line}`);
    assert.ok(m[1]!.startsWith(family), `${m[1]} outside its family ${family}`);
    const labels = new Map<string, string>();
    const body = m[2] ?? '';
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/gy;
    let l: RegExpExecArray | null;
    let consumed = 0;
    while ((l = re.exec(body)) !== null && l[0].length > 0) {
      labels.set(l[1]!, unescapeLabel(l[2]!));
      consumed = re.lastIndex;
      if (consumed === body.length) break;
    }
    assert.equal(consumed, body.length, `unparseable labels: ${line}`);
    samples.push({ family, name: m[1]!, labels, value: Number(m[3]) });
  }
  return { types, samples };
}

/** Distinct label sets per family; a histogram's `le` does not make a series. */
function seriesPerFamily(text: string): Map<string, number> {
  const { types, samples } = parseExposition(text);
  const sets = new Map<string, Set<string>>([...types.keys()].map((f) => [f, new Set<string>()]));
  for (const s of samples) {
    const key = JSON.stringify([...s.labels].filter(([k]) => !(types.get(s.family) === 'histogram' && k === 'le')).sort());
    sets.get(s.family)!.add(key);
  }
  return new Map([...sets].map(([f, s]) => [f, s.size]));
}

function promtoolCheck(text: string): void {
  const result = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (result.error) {
    assert.fail(`could not run promtool (${result.error.message}): install it (Debian/Ubuntu: apt-get install prometheus) — this test requires it`);
  }
  assert.equal(result.status, 0, `promtool check metrics failed (status ${result.status}):\n${result.stdout}${result.stderr}\n--- exposition ---\n${text}`);
}

// ---- tests ----

test('the full exposition after a fixed sequence of records matches test/fixtures/metrics/golden.prom', () => {
  const text = withStartTimePlaceholder(goldenExposition());
  if (process.env.UPDATE_GOLDEN === '1') {
    mkdirSync(dirname(GOLDEN), { recursive: true });
    writeFileSync(GOLDEN, text);
    return;
  }
  let golden: string;
  try {
    golden = readFileSync(GOLDEN, 'utf8');
  } catch (err) {
    return assert.fail(`${GOLDEN} is unreadable (${(err as Error).message}): run with UPDATE_GOLDEN=1 to create it`);
  }
  assert.equal(text, golden);
});

test('promtool check metrics accepts the exposition', () => {
  promtoolCheck(goldenExposition());
  // And one with overflow series and identity labels in every model family. (At most 14
  // families overflow here, fewer than the cap of 20 series of the overflow counter itself.)
  const metrics = createProxyMetrics({ maxSeriesPerFamily: 20, seriesTtlMs: 0, runIdLabel: true, prices: PRICES });
  for (let i = 0; i < 25; i++) {
    metrics.model(MODEL_RECORDS[0]!);
    metrics.model(modelRecord({ ...MODEL_RECORDS[4]!, instance_id: `bot-${i}`, run_id: `run-${i}` }));
    metrics.git(gitRecord({ host: `h${i}.example`, error: 'dns', status: 502 }));
  }
  const text = metrics.registry.expose();
  assert.ok(text.includes('__overflow__'), 'the cap was reached');
  promtoolCheck(text);
});

test('run_id becomes a label only when enabled', () => {
  const record = modelRecord({ run_id: 'run-42', stream: true, duration_ms: 10, ttft_ms: 5, input_tokens: 1, output_tokens: 1, usage_complete: true, retries: 1, rate_limited: 1, interrupted: 'client' });
  const off = createProxyMetrics({ maxSeriesPerFamily: 50, seriesTtlMs: 0, runIdLabel: false, prices: PRICES });
  off.model(record);
  const offText = off.registry.expose();
  assert.ok(!offText.includes('run_id'), offText);
  assert.ok(!offText.includes('run-42'), offText);

  const on = createProxyMetrics({ maxSeriesPerFamily: 50, seriesTtlMs: 0, runIdLabel: true, prices: PRICES });
  on.model(record);
  on.model(modelRecord({ run_id: 'run-42', duration_ms: 10 })); // 200 without usage
  on.model(modelRecord({ run_id: null, duration_ms: 10 }));
  const { types, samples } = parseExposition(on.registry.expose());
  // The counters; the latency histograms and the in-flight gauge never carry an identity.
  // The counters of requests (a provider's credential refreshes or refused credential, the limits' and the gateway's refusals, the bodies refused for the cap, charges, store errors and state losses carry no instance).
  const modelFamilies = [...types.keys()].filter((f) => f.startsWith('model_gateway_') && types.get(f) === 'counter' && !['model_gateway_credential_refreshes_total', 'model_gateway_limit_refusals_total', 'model_gateway_limits_store_errors_total', 'model_gateway_limits_store_state_lost_total', 'model_gateway_limit_charged_usd_total', 'model_gateway_refusals_total', 'model_gateway_upstream_credential_rejected_total', 'model_gateway_request_bodies_refused_total', 'model_gateway_websocket_turns_total', 'model_gateway_websocket_frames_refused_total'].includes(f));
  assert.equal(modelFamilies.length, 7);
  for (const family of modelFamilies) {
    const own = samples.filter((s) => s.family === family);
    assert.ok(own.length > 0, `${family} has samples`);
    for (const s of own) assert.ok(s.labels.has('run_id'), `${s.name} carries run_id`);
    assert.ok(own.some((s) => s.labels.get('run_id') === 'run-42'), `${family}: run_id="run-42"`);
  }
  // A record without a run_id gets run_id="none", as every unknown label value does.
  assert.ok(samples.some((s) => s.name === 'model_gateway_requests_total' && s.labels.get('run_id') === 'none'));
  // Never on the histograms, the gauges, the git or the process families.
  for (const s of samples) if (!modelFamilies.includes(s.family)) assert.ok(!s.labels.has('run_id'), s.name);
});

test('model gateway upstream credential rejected: an upstream 401 or 403 (the provider refused the gateway\'s own credential) counts model_gateway_upstream_credential_rejected_total{provider}; other upstream errors do not', () => {
  const metrics = createProxyMetrics({ maxSeriesPerFamily: 50, seriesTtlMs: 0, runIdLabel: false, prices: PRICES });
  metrics.model(modelRecord({ status: 502, duration_ms: 1, error: 'upstream_401' }));
  metrics.model(modelRecord({ provider: 'anthropic', status: 502, duration_ms: 1, error: 'upstream_403' }));
  metrics.model(modelRecord({ provider: 'anthropic', status: 502, duration_ms: 1, error: 'upstream_403' }));
  // Not the credential: the bot's own token refused, another upstream 4xx or 5xx, a failed connect.
  metrics.model(modelRecord({ status: 401, duration_ms: 1, error: 'invalid_bot_token' }));
  metrics.model(modelRecord({ status: 404, duration_ms: 1, error: 'upstream_4xx' }));
  metrics.model(modelRecord({ status: 502, duration_ms: 1, error: 'connect_refused' }));
  const { samples } = parseExposition(metrics.registry.expose());
  const rejected = samples.filter((s) => s.family === 'model_gateway_upstream_credential_rejected_total').map((s) => [s.labels.get('provider'), s.value]);
  assert.deepEqual(rejected.sort(), [['anthropic', 2], ['openai', 1]]);
});

test('an unknown identity is labelled "none" in every family, like an unknown provider, model or host', () => {
  const metrics = createProxyMetrics({ maxSeriesPerFamily: 50, seriesTtlMs: 0, runIdLabel: true, prices: PRICES });
  metrics.model(modelRecord({ instance_id: null, workflow: null, run_id: null, provider: null, model: null, status: 401, duration_ms: 1 }));
  const { samples } = parseExposition(metrics.registry.expose());
  const values = new Set(samples.filter((s) => s.family.startsWith('model_gateway_')).flatMap((s) => ['provider', 'model', 'instance_id', 'workflow', 'run_id'].filter((l) => s.labels.has(l)).map((l) => s.labels.get(l))));
  assert.deepEqual([...values], ['none']);
});

test('model, host and status labels take only values from the records (no raw request data)', () => {
  const RAW = 'RAWDATA';
  const metrics = createProxyMetrics({ maxSeriesPerFamily: 50, seriesTtlMs: 0, runIdLabel: false, prices: PRICES });
  const models = [
    modelRecord({ request_id: `${RAW}-req`, upstream_request_id: `${RAW}-up`, response_model: `${RAW}-gpt-4o-2024-08-06`, path: '/v1/chat/completions', finish_reason: `${RAW}-stop`, error: `${RAW}-error`, input_tokens: 5, output_tokens: 5, usage_complete: true }),
    modelRecord({ model: null, api: null, status: 404, path: `/v1/${RAW}`, method: `${RAW}-METHOD`, request_id: `${RAW}-req2`, error: 'not_found', bytes_in: 123456 }),
    modelRecord({ model: 'mistral-large', status: 503, response_model: `${RAW}-mistral`, error: 'upstream_key_missing' }),
  ];
  const gits = [
    gitRecord({ request_id: `${RAW}-git`, path: `/github.com/${RAW}/repo.git/info/refs`, method: `${RAW}-M`, error: `${RAW}-error` }),
    gitRecord({ host: undefined, route: undefined, status: 400, path: `/${RAW}.example/x.git/info/refs`, error: 'bare_path' }),
    gitRecord({ host: 'git.example.com:8443', route: 'receive-pack', status: 502, error: 'tls' }),
  ];
  for (const r of models) metrics.model(r);
  for (const r of gits) metrics.git(r);
  const text = metrics.registry.expose();
  assert.ok(!text.includes(RAW), `raw request data reached the exposition:\n${text}`);

  const { samples } = parseExposition(text);
  const allowed: Record<string, Set<string>> = {
    model: new Set(['gpt-4o', 'mistral-large', 'none']),
    host: new Set(['github.com', 'git.example.com:8443', 'none']),
    status: new Set(['200', '404', '503', '400', '502']),
    route: new Set(['info-refs', 'receive-pack', 'none']),
    kind: new Set(['tls']),
    provider: new Set(['openai']),
  };
  let checked = 0;
  for (const s of samples) {
    for (const [label, values] of Object.entries(allowed)) {
      const v = s.labels.get(label);
      if (v === undefined) continue;
      assert.ok(values.has(v), `${s.name}: ${label}="${v}" is not a value from the records`);
      checked++;
    }
  }
  assert.ok(checked > 50, 'labels were found and checked');
  // Each record's status appears as given.
  const modelStatuses = samples.filter((s) => s.name === 'model_gateway_requests_total').map((s) => s.labels.get('status'));
  assert.deepEqual(modelStatuses.sort(), ['200', '404', '503']);
  const gitStatuses = samples.filter((s) => s.name === 'git_proxy_requests_total').map((s) => s.labels.get('status'));
  assert.deepEqual(gitStatuses.sort(), ['200', '400', '502']);
});

test('with maxSeriesPerFamily=20, 1,000 distinct instance_id values stay within 21 series per family and keep the totals', () => {
  const metrics = createProxyMetrics({ maxSeriesPerFamily: 20, seriesTtlMs: 0, runIdLabel: false, prices: PRICES });
  for (let i = 0; i < 1000; i++) {
    metrics.model(
      modelRecord({
        instance_id: `bot-${i}`,
        stream: true,
        duration_ms: 500,
        ttft_ms: 50,
        input_tokens: 100,
        output_tokens: 10,
        reasoning_tokens: 4,
        cached_tokens: 20,
        usage_complete: true,
        retries: 1,
        rate_limited: 1,
      }),
    );
  }
  const text = metrics.registry.expose();
  for (const [family, n] of seriesPerFamily(text)) assert.ok(n <= 21, `${family}: ${n} series`);

  const { samples } = parseExposition(text);
  const value = (name: string, labels: Record<string, string>): number => {
    const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels.get(k) === v));
    assert.equal(found.length, 1, `${name} ${JSON.stringify(labels)}`);
    return found[0]!.value;
  };
  const sum = (name: string, labels: Record<string, string> = {}): number =>
    samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels.get(k) === v)).reduce((a, s) => a + s.value, 0);

  // Every record has the same status: each is a new label set. The first 20 create series;
  // the other 980 each find the family full and fold, counting one overflow each.
  assert.equal(seriesPerFamily(text).get('model_gateway_requests_total'), 21);
  assert.equal(value('proxy_metric_series_overflow_total', { metric: 'model_gateway_requests_total' }), 1000 - 20);
  assert.equal(value('model_gateway_requests_total', { instance_id: '__overflow__', status: '__overflow__', model: '__overflow__' }), 980);
  assert.equal(sum('model_gateway_requests_total'), 1000);
  // Four token types per record: 4,000 increments, 20 series, 3,980 folded.
  assert.equal(value('proxy_metric_series_overflow_total', { metric: 'model_gateway_tokens_total' }), 4000 - 20);
  assert.equal(sum('model_gateway_tokens_total'), 1000 * (100 + 10 + 4 + 20));
  assert.equal(sum('model_gateway_tokens_total', { type: 'input' }), 5 * 100, 'the first five records hold the 20 series');
  // The histograms keep their counts too.
  assert.equal(sum('model_gateway_request_duration_seconds_count'), 1000);
  assert.equal(sum('model_gateway_time_to_first_token_seconds_count'), 1000);
  assert.equal(sum('model_gateway_retries_total'), 1000);
  assert.equal(sum('model_gateway_upstream_rate_limited_total'), 1000);
});

test('latency histograms carry only labels bounded by configuration (provider, model, workflow, api); identity stays on the counters', () => {
  const metrics = createProxyMetrics({ maxSeriesPerFamily: 2000, seriesTtlMs: 0, runIdLabel: true, prices: PRICES });
  for (let i = 0; i < 500; i++) {
    metrics.model(modelRecord({ instance_id: `bot-${i}`, run_id: `run-${i}`, workflow: i % 2 ? 'triage' : 'review', stream: true, duration_ms: 500, ttft_ms: 50, input_tokens: 10, output_tokens: 5, usage_complete: true }));
  }
  const text = metrics.registry.expose();
  const { types, samples } = parseExposition(text);
  const series = seriesPerFamily(text);
  for (const family of ['model_gateway_request_duration_seconds', 'model_gateway_time_to_first_token_seconds']) {
    assert.equal(types.get(family), 'histogram');
    const own = samples.filter((s) => s.family === family);
    for (const s of own) assert.deepEqual([...s.labels.keys()].filter((k) => k !== 'le'), ['provider', 'model', 'workflow', 'api'], s.name);
    assert.equal(series.get(family), 2, `${family}: one series per workflow, whatever the number of bots`);
    assert.equal(own.filter((s) => s.name === `${family}_count`).reduce((a, s) => a + s.value, 0), 500);
  }
  // 500 bots are 500 series in each identity-labelled counter.
  assert.equal(series.get('model_gateway_requests_total'), 500);
  assert.equal(series.get('model_gateway_tokens_total'), 1000);
  assert.ok(samples.some((s) => s.family === 'model_gateway_requests_total' && s.labels.get('instance_id') === 'bot-7' && s.labels.get('run_id') === 'run-7'));
});

test('metrics: every histogram\'s buckets are the ones docs/operations.md states (Histogram buckets)', () => {
  const metrics = createProxyMetrics({ maxSeriesPerFamily: 10, seriesTtlMs: 0, runIdLabel: false, prices: { get: () => undefined } });
  metrics.model(modelRecord({ ttft_ms: 5 }));
  metrics.git(gitRecord({}));
  metrics.limitsStoreRoundTrip('admit', 0.001);
  const buckets = new Map<string, string[]>();
  for (const m of metrics.registry.expose().matchAll(/^(\w+)_bucket\{.*le="([^"]+)"\} /gm)) {
    const les = buckets.get(m[1]!) ?? [];
    if (m[2] !== '+Inf' && !les.includes(m[2]!)) les.push(m[2]!);
    buckets.set(m[1]!, les);
  }
  const doc = readFileSync(join(__dirname, '..', '..', 'docs', 'operations.md'), 'utf8');
  const table = doc.slice(doc.indexOf('### Histogram buckets'), doc.indexOf('**OpenTelemetry GenAI names.**'));
  const stated = new Map([...table.matchAll(/^\| `(\w+)` \| ([0-9., ]+)/gm)].map((m) => [m[1]!, m[2]!.trim().split(', ')]));
  assert.equal(buckets.size, 4);
  assert.deepEqual(stated, buckets);
});

test('turnOutcome: a WebSocket turn\'s outcome from its record: refused (never sent), interrupted, upstream_error, failed, completed, incomplete', () => {
  const turn = (over: Partial<ModelRequestRecord>) => turnOutcome(modelRecord({ method: 'WS', api: 'responses', ...over }));
  assert.equal(turn({ attempts: 0, status: 429, error: 'rate_limit_exceeded' }), 'refused');
  assert.equal(turn({ interrupted: 'client', error: 'client_aborted' }), 'interrupted');
  assert.equal(turn({ status: 400, error: 'upstream_4xx' }), 'upstream_error');
  assert.equal(turn({ error: 'server_error', finish_reason: 'failed' }), 'failed');
  assert.equal(turn({ finish_reason: 'completed' }), 'completed');
  assert.equal(turn({ finish_reason: 'max_output_tokens' }), 'incomplete');
});
