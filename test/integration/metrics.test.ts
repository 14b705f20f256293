// The metrics listener of the built bundle, checked by promtool and by a real Prometheus
// server, against the per-request log lines of the same traffic.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startBothListeners, type BothListeners } from '../support/both-listeners.ts';
import { send } from '../support/http-client.ts';
import { parseExposition, promtoolCheck, startPrometheus, sumOf, type PrometheusServer, type Sample } from '../support/prometheus.ts';
import { ROOT, type LogRecord, type ProxyProcess } from '../support/proxy-process.ts';
import type { TestUpstream } from '../support/upstream.ts';

const MODEL = 'gpt-test';
const PRICES = { [MODEL]: { input: 2.5, cached: 1.25, output: 10 } };
const CAP = 30;

let dir: string;
let proxy: ProxyProcess;
let both: BothListeners<TestUpstream> | undefined;
/**
 * Started as soon as the metrics listener is up: its first scrape comes about 5 s later
 * (test/support/prometheus.ts), while the other tests run. Awaited by the test that uses it, so
 * that a Prometheus that cannot start fails that test alone.
 */
let prometheusStarted: Promise<PrometheusServer> | undefined;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'metrics-test-'));
  writeFileSync(join(dir, 'prices.json'), JSON.stringify(PRICES));
  both = await startBothListeners({
    env: { UPSTREAM_ALLOWED_MODELS: `${MODEL},gpt-unpriced`, UPSTREAM_CA_FILE: undefined, MODEL_PRICES_FILE: join(dir, 'prices.json') },
    args: ['--metrics-listen', '127.0.0.1:0', '--metrics-max-series', String(CAP)],
  });
  const { modelUpstream: modelUp, gitUpstream: gitUp } = both;
  proxy = both.proxy;
  prometheusStarted = startPrometheus([`127.0.0.1:${proxy.ports.metrics}`]);
  prometheusStarted.catch(() => {}); // awaited by the test that uses it

  // Known traffic on both listeners.
  const chat = (body: object, headers: Record<string, string> = {}) =>
    send(proxy.ports.model!, 'POST', '/v1/chat/completions', { body: JSON.stringify({ messages: [{ role: 'user', content: 'x' }], ...body }), headers: { 'content-type': 'application/json', ...headers } });
  const bot = { 'x-instance-id': 'bot-1', 'x-workflow': 'triage' };
  for (let i = 0; i < 3; i++) await chat({ model: MODEL }, bot);
  for (let i = 0; i < 2; i++) await chat({ model: MODEL, stream: true, stream_options: { include_usage: true } }, bot);
  await chat({ model: MODEL, stream: true }, bot); // no usage chunk
  await chat({ model: 'gpt-unpriced' }, bot);
  await chat({ model: 'not-allowed' }, bot);
  modelUp.script((_req, res) => {
    res.writeHead(429, { 'content-type': 'application/json', 'retry-after-ms': '5' });
    res.end('{"error":{"message":"slow down","type":"rate_limit_error","code":null,"param":null}}');
  });
  await chat({ model: MODEL }, bot);
  const git = proxy.ports.git!;
  for (let i = 0; i < 3; i++) await send(git, 'GET', `/${gitUp.hostKey}/org/repo.git/info/refs?service=git-upload-pack`);
  await send(git, 'POST', `/${gitUp.hostKey}/org/repo.git/git-receive-pack`, { body: randomBytes(4096) });
  await send(git, 'GET', `/unknown.example/org/repo.git/info/refs?service=git-upload-pack`);
});

after(async () => {
  await (await prometheusStarted?.catch(() => undefined))?.close();
  await both?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function scrape(): Promise<{ text: string; samples: Sample[]; contentType: string }> {
  const r = await send(proxy.ports.metrics!, 'GET', '/metrics');
  assert.equal(r.status, 200);
  const text = r.body.toString();
  return { text, samples: parseExposition(text), contentType: String(r.headers['content-type']) };
}

/** All request records, once the proxy has logged the expected number of each listener. */
async function requestRecords(model: number, git: number): Promise<{ model: LogRecord[]; git: LogRecord[] }> {
  await proxy.waitForRecord(() => proxy.records().filter((r) => r.event === 'request' && r.listener === 'model').length >= model);
  await proxy.waitForRecord(() => proxy.records().filter((r) => r.event === 'request' && r.listener === 'git').length >= git);
  const req = proxy.records().filter((r) => r.event === 'request');
  return { model: req.filter((r) => r.listener === 'model'), git: req.filter((r) => r.listener === 'git') };
}

const total = (recs: LogRecord[], field: string) => recs.reduce((a, r) => a + (typeof r[field] === 'number' ? (r[field] as number) : 0), 0);

test('GET /metrics answers the Prometheus text format that promtool accepts', async () => {
  const { text, contentType } = await scrape();
  assert.equal(contentType, 'text/plain; version=0.0.4; charset=utf-8');
  const check = promtoolCheck(text);
  assert.equal(check.status, 0, check.output);
  assert.ok(text.endsWith('\n'));
  for (const name of ['process_resident_memory_bytes', 'process_open_fds', 'process_start_time_seconds', 'nodejs_eventloop_lag_p99_seconds', 'proxy_request_body_bytes_held']) {
    assert.ok(text.includes(`\n${name} `), name);
  }
  assert.match(text, /proxy_active_connections\{listener="git"\} \d+/);
  assert.match(text, /proxy_active_connections\{listener="model"\} \d+/);
});

test('logs and metrics agree: the totals of the request log lines equal the counters', async () => {
  const recs = await requestRecords(9, 5);
  const { samples } = await scrape();
  assert.equal(sumOf(samples, 'model_gateway_requests_total'), recs.model.length);
  for (const [type, field] of [['input', 'input_tokens'], ['output', 'output_tokens'], ['reasoning', 'reasoning_tokens'], ['cached', 'cached_tokens']] as const) {
    assert.equal(sumOf(samples, 'model_gateway_tokens_total', { type }), total(recs.model, field), type);
  }
  assert.ok(sumOf(samples, 'model_gateway_tokens_total', { type: 'input' }) > 0);
  assert.equal(sumOf(samples, 'model_gateway_upstream_rate_limited_total'), total(recs.model, 'rate_limited'));
  assert.equal(sumOf(samples, 'model_gateway_retries_total'), total(recs.model, 'retries'));
  assert.equal(sumOf(samples, 'model_gateway_requests_total', { status: '400' }), recs.model.filter((r) => r.status === 400).length);
  assert.equal(sumOf(samples, 'git_proxy_requests_total'), recs.git.length);
  assert.equal(sumOf(samples, 'git_proxy_request_bytes_total'), total(recs.git, 'bytes_in'));
  assert.equal(sumOf(samples, 'git_proxy_response_bytes_total'), total(recs.git, 'bytes_out'));
  assert.equal(sumOf(samples, 'git_proxy_requests_total', { host: 'none', status: '403' }), 1, 'an unregistered host never becomes a label value');
  assert.equal(sumOf(samples, 'model_gateway_usage_incomplete_total'), recs.model.filter((r) => r.status === 200 && r.usage_complete === false).length);
  assert.equal(sumOf(samples, 'model_gateway_request_duration_seconds_count'), recs.model.length);
});

test('estimated cost comes from the price table, and unpriced models cost nothing', async () => {
  const recs = await requestRecords(9, 5);
  const { samples } = await scrape();
  const priced = recs.model.filter((r) => r.model === MODEL && typeof r.input_tokens === 'number');
  const expected = priced.reduce((a, r) => {
    const input = r.input_tokens as number;
    const cached = (r.cached_tokens as number) ?? 0;
    return a + ((input - cached) * 2.5 + cached * 1.25 + (r.output_tokens as number) * 10) / 1e6;
  }, 0);
  assert.ok(expected > 0);
  assert.ok(Math.abs(sumOf(samples, 'model_gateway_cost_usd_total', { model: MODEL }) - expected) < 1e-12);
  assert.equal(sumOf(samples, 'model_gateway_cost_usd_total', { model: 'gpt-unpriced' }), 0);
});

test('a real Prometheus scraping the metrics listener returns the token totals and request counts', async (t) => {
  const recs = await requestRecords(9, 5);
  const prom = await prometheusStarted!;
  const input = total(recs.model, 'input_tokens');
  assert.equal(await prom.waitForValue('sum(model_gateway_tokens_total{type="input"})', (v) => v === input, t.signal), input);
  assert.equal(await prom.waitForValue('sum(model_gateway_requests_total)', (v) => v === recs.model.length, t.signal), recs.model.length);
  assert.equal(await prom.waitForValue('sum(git_proxy_requests_total)', (v) => v === recs.git.length, t.signal), recs.git.length);

  // Every query of the shipped Grafana dashboard runs without error.
  const dashboard = JSON.parse(readFileSync(join(ROOT, 'grafana', 'dashboard.json'), 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] };
  const failures: string[] = [];
  let queries = 0;
  for (const panel of dashboard.panels) {
    for (const { expr } of panel.targets) {
      const concrete = expr.replaceAll('$__rate_interval', '1m').replaceAll('$provider', '.*').replaceAll('$model', '.*').replaceAll('$workflow', '.*').replaceAll('$namespace', '.*').replaceAll('$replica', '.*');
      const r = await prom.query(concrete);
      queries++;
      if (r.status !== 'success') failures.push(`${panel.title}: ${r.error}`);
    }
  }
  assert.deepEqual(failures, []);
  assert.ok(queries >= 20);
});

test('flooding distinct instance ids grows no family beyond its cap, and the overflow counter says so', async () => {
  for (let i = 0; i < 60; i++) {
    await send(proxy.ports.model!, 'POST', '/v1/chat/completions', {
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }] }),
      headers: { 'content-type': 'application/json', 'x-instance-id': `flood-${i}` },
    });
  }
  const recs = await requestRecords(9 + 60, 5);
  const { samples, text } = await scrape();
  const seriesPerFamily = new Map<string, Set<string>>();
  for (const s of samples) {
    const family = s.name.replace(/_(bucket|sum|count)$/, '');
    const { le: _le, ...labels } = s.labels;
    if (!seriesPerFamily.has(family)) seriesPerFamily.set(family, new Set());
    seriesPerFamily.get(family)!.add(JSON.stringify(labels));
  }
  for (const [family, series] of seriesPerFamily) assert.ok(series.size <= CAP + 1, `${family} holds ${series.size} series`);
  assert.ok(sumOf(samples, 'proxy_metric_series_overflow_total', { metric: 'model_gateway_requests_total' }) > 0);
  assert.match(text, /instance_id="__overflow__"/);
  assert.equal(sumOf(samples, 'model_gateway_requests_total'), recs.model.length, 'folding keeps the totals');
});
