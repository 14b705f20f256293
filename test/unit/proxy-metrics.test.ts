// The proxy's metric families, fed from request records.
//
// The golden-file test compares the FULL exposition after a fixed sequence of records with
// test/fixtures/metrics/golden.prom. After an intended change to the metrics, regenerate it:
//
//   UPDATE_GOLDEN=1 node --test --import tsx test/unit/proxy-metrics.test.ts
//
// and then read the diff line by line: every count, sum, cost and bucket in the golden file was
// checked by hand against the records (test/support/metrics-golden.ts), and must stay right, not
// merely match the code. promtool's check of the exposition: test/integration/proxy-metrics.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ModelRequestRecord } from '../../src/gateway/record.ts';
import { createProxyMetrics, turnOutcome } from '../../src/metrics/proxy-metrics.ts';
import { gitRecord, goldenExposition, PRICES } from '../support/metrics-golden.ts';
import { modelRecord } from '../support/records.ts';

const GOLDEN = join(__dirname, '..', 'fixtures', 'metrics', 'golden.prom');
const START_TIME_PLACEHOLDER = '<PROCESS_START_TIME>';

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
