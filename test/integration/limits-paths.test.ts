// Limits through the gateway, on every way a call can end: a call's concurrency slot comes
// back on each (success, an upstream error, a client that leaves, a stream the upstream cuts, the
// stream idle timeout), shown by the next call of the same instance being admitted under a
// concurrency limit of one; and the usage a workload could dodge is charged all the same, by an
// estimate from the bytes relayed, marked as such in the record (a chat stream without
// include_usage, a client that leaves just before the usage event, an answer too large for the
// usage reader). A complete error answer from the upstream costs nothing.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { eventually } from '../support/eventually.ts';
import { send } from '../support/http-client.ts';
import { parseExposition } from '../support/prometheus.ts';
import { chunk, sseEvent, startModelUpstream, USAGE, type ModelUpstream } from '../support/model-upstream.ts';
import { type LogRecord, type ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const SIGNING_KEY = randomBytes(32).toString('hex');
const MODEL = 'gpt-test';
let pki: TestPki;
let upstream: ModelUpstream;
let gw: ProxyProcess;
let dir: string;

before(async () => {
  pki = makeTestPki();
  upstream = await startModelUpstream(pki);
  dir = mkdtempSync(join(tmpdir(), 'limits-paths-'));
  writeFileSync(join(dir, 'providers.json'), JSON.stringify({ providers: [{ name: 'openai', kind: 'openai', baseUrl: upstream.baseUrl, keyEnv: 'K1', models: [MODEL], caFile: pki.caFile }] }));
  // $1 per million tokens each way: a charge in dollars is the tokens counted, over a million.
  writeFileSync(join(dir, 'prices.json'), JSON.stringify({ providers: { openai: { [MODEL]: { input: 1, output: 1 } } } }));
  writeFileSync(join(dir, 'limits.json'), JSON.stringify({ perInstance: { concurrent: 4 }, perRun: { budgetUsd: 100 } }));
  gw = await startServe({
    env: { K1: 'sk-1', MODEL_PROXY_SIGNING_KEY: SIGNING_KEY, MODEL_PRICES_FILE: join(dir, 'prices.json') },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--providers', join(dir, 'providers.json'), '--limits', join(dir, 'limits.json'), '--upstream-idle-timeout', '1s'],
    listeners: ['model'],
  });
});

after(async () => {
  await gw?.stop();
  await upstream?.close();
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A token for one instance whose run may have one call in progress at a time. */
async function oneAtATime(instance: string): Promise<string> {
  const r = await runCommandInProcess(['mint-token', '--instance-id', instance, '--workflow', 'w', '--run-id', `run-${instance}`, '--max-concurrent', '1'], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY });
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim();
}

const chatBody = (extra: Record<string, unknown> = {}) => JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], ...extra });

/**
 * A call made with node:http: resolves when the answer ended or broke. `leaveWhen` makes the
 * client leave (destroy its socket) as soon as the bytes received so far match it.
 */
function call(token: string, body: string, leaveWhen?: RegExp): Promise<{ status: number; text: string; broke: boolean }> {
  return new Promise((resolve) => {
    let text = '';
    let status = 0;
    const req = request({ host: '127.0.0.1', port: gw.ports.model!, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` } }, (res) => {
      status = res.statusCode ?? 0;
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
        if (leaveWhen?.test(text)) req.destroy();
      });
      res.on('end', () => resolve({ status, text, broke: false }));
      res.on('error', () => resolve({ status, text, broke: true }));
    });
    req.on('error', () => resolve({ status, text, broke: true }));
    req.on('close', () => resolve({ status, text, broke: true }));
    req.end(body);
  });
}

/** The call's record, then proof that its slot came back: the instance's next call is admitted. */
async function recordAndSlotBack(instance: string, token: string): Promise<LogRecord> {
  const record = await gw.waitForRecord((r) => r.event === 'request' && r.instance_id === instance, `${instance}'s record`);
  const next = await send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: chatBody() });
  assert.equal(next.status, 200, `${instance}: the next call is admitted (its slot came back): ${next.body.toString()}`);
  return record;
}

const events = (withUsage: boolean) => [
  sseEvent(chunk(MODEL, { role: 'assistant', content: '' })),
  sseEvent(chunk(MODEL, { content: 'Hello' })),
  sseEvent(chunk(MODEL, {}, 'stop')),
  ...(withUsage ? [sseEvent({ id: 'chatcmpl-test', object: 'chat.completion.chunk', created: 1, model: MODEL, choices: [], usage: USAGE })] : []),
];

test('limits: a call that ends well is charged its real usage, and its slot comes back', async () => {
  const token = await oneAtATime('path-success');
  assert.equal((await call(token, chatBody())).status, 200);
  const r = await recordAndSlotBack('path-success', token);
  assert.deepEqual([r.charge_estimated, r.charged_usd], [false, (USAGE.prompt_tokens + USAGE.completion_tokens) / 1e6]);
});

test('limits: an upstream error answered in full costs nothing (providers do not bill a refused call), and its slot comes back', async () => {
  const token = await oneAtATime('path-upstream-error');
  upstream.script((_req, res) => {
    const body = JSON.stringify({ error: { message: 'bad request', type: 'invalid_request_error', code: null, param: null } });
    res.writeHead(400, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  assert.equal((await call(token, chatBody())).status, 400);
  const r = await recordAndSlotBack('path-upstream-error', token);
  assert.deepEqual([r.status, r.charge_estimated, r.charged_usd], [400, false, 0]);
});

test('limits: a client that leaves just before the usage event is charged an estimate from the bytes relayed, marked, and its slot comes back', async () => {
  const token = await oneAtATime('path-client-left');
  upstream.script((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of events(false)) res.write(e);
    // The usage event would come now; the client leaves first, so it never does.
  });
  const seen = await call(token, chatBody({ stream: true, stream_options: { include_usage: true } }), /"finish_reason":"stop"/);
  assert.ok(seen.broke);
  const r = await recordAndSlotBack('path-client-left', token);
  assert.equal(r.interrupted, 'client');
  assert.equal(r.charge_estimated, true);
  assert.ok(Number(r.charged_usd) > 0 && Number(r.charged_usd) === (Math.ceil(Number(r.bytes_in) / 4) + Math.ceil(Number(r.bytes_out) / 4)) / 1e6, JSON.stringify(r));
});

test('limits: a stream the upstream cuts is charged an estimate, marked, and its slot comes back', async () => {
  const token = await oneAtATime('path-cut');
  upstream.script((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(events(false)[1]!, () => res.socket?.destroy());
  });
  const seen = await call(token, chatBody({ stream: true, stream_options: { include_usage: true } }));
  assert.equal(seen.status, 200);
  const r = await recordAndSlotBack('path-cut', token);
  assert.equal(r.interrupted, 'upstream');
  assert.equal(r.charge_estimated, true);
  assert.ok(Number(r.charged_usd) > 0, JSON.stringify(r));
});

test('limits: a stream cut by the idle timeout is charged an estimate, marked, and its slot comes back', async () => {
  const token = await oneAtATime('path-idle');
  upstream.script((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(events(false)[1]!); // then nothing: the gateway's --upstream-idle-timeout (1 s here) cuts it
  });
  await call(token, chatBody({ stream: true, stream_options: { include_usage: true } }));
  const r = await recordAndSlotBack('path-idle', token);
  assert.equal(r.interrupted, 'idle_timeout');
  assert.equal(r.charge_estimated, true);
  assert.ok(Number(r.charged_usd) > 0, JSON.stringify(r));
});

test('limits: under a money budget, a chat stream sent without stream_options.include_usage is refused (400 price_not_counted naming the field) and never forwarded: its usage, reasoning tokens included, could not be counted', async () => {
  const token = await oneAtATime('path-no-usage');
  const before = upstream.requests.length;
  const seen = await call(token, chatBody({ stream: true }));
  assert.equal(seen.status, 400);
  assert.match(seen.text, /price_not_counted/);
  assert.match(seen.text, /stream_options\.include_usage/);
  assert.equal(upstream.requests.length, before, 'never forwarded');
  const r = await recordAndSlotBack('path-no-usage', token);
  assert.equal(r.limit, 'unpriced_call');
});

test('limits: an answer too large for the usage reader (over 8 MiB) is charged an estimate from its size, marked', async () => {
  const token = await oneAtATime('path-large');
  const content = 'x'.repeat(9 * 1024 * 1024);
  upstream.script((_req, res) => {
    const body = JSON.stringify({ id: 'chatcmpl-big', object: 'chat.completion', created: 1, model: MODEL, choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  const seen = await call(token, chatBody());
  assert.equal(seen.status, 200);
  const r = await recordAndSlotBack('path-large', token);
  assert.equal(r.charge_estimated, true);
  assert.ok(Number(r.charged_usd) >= content.length / 4 / 1e6, `charged for the size, not the 2 tokens the body claims: ${JSON.stringify(r)}`);
});

test('limits: the money charged is counted by workflow, estimated charges apart (model_gateway_limit_charged_usd_total)', { timeout: 120_000 }, async (t) => {
  // Each test above made two calls; their records reach this process a little after their answers.
  const requests = () => gw.records().filter((r) => r.event === 'request');
  await eventually('the 14 request records of the tests above', () => requests().length >= 14, t.signal);
  const records = requests().filter((r) => Number(r.charged_usd) > 0);
  const sum = (estimated: boolean) => records.filter((r) => r.charge_estimated === estimated).reduce((n, r) => n + Number(r.charged_usd), 0);
  const metrics = parseExposition((await send(gw.ports.metrics!, 'GET', '/metrics')).body.toString());
  const series = (estimated: string) => metrics.find((m) => m.name === 'model_gateway_limit_charged_usd_total' && m.labels.workflow === 'w' && m.labels.estimated === estimated)?.value ?? 0;
  assert.ok(sum(true) > 0 && sum(false) > 0);
  assert.ok(Math.abs(series('true') - sum(true)) < 1e-9, `${series('true')} vs ${sum(true)}`);
  assert.ok(Math.abs(series('false') - sum(false)) < 1e-9, `${series('false')} vs ${sum(false)}`);
});
