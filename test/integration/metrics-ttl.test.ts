// Metric series expiry in the proxy as `serve` starts it: with a short --metrics-series-ttl, a flood of
// identities that filled the series cap ages out, and a newcomer gets its own series again. (A
// series recorded before the clock's first tick is not as old as the process: test/unit/metrics.test.ts.)
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request, type ServerResponse } from 'node:http';
import { after, before, test } from 'node:test';
import { eventually } from '../support/eventually.ts';
import { send } from '../support/http-client.ts';
import { sseEvent, chunk, startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { parseExposition, sumOf } from '../support/prometheus.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const MODEL = 'gpt-test';
const CAP = 10;

let pki: TestPki;
let upstream: ModelUpstream;
let proxy: ProxyProcess;

before(async () => {
  pki = makeTestPki();
  upstream = await startModelUpstream(pki);
  proxy = await startServe({
    env: { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: `sk-${randomBytes(8).toString('hex')}`, UPSTREAM_ALLOWED_MODELS: MODEL, UPSTREAM_CA_FILE: pki.caFile },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--metrics-max-series', String(CAP), '--metrics-series-ttl', '2000ms'],
    listeners: ['model'],
  });
});

after(async () => {
  await proxy?.stop();
  await upstream?.close();
  pki?.cleanup();
});

const chat = (instance: string, extra: object = {}) =>
  send(proxy.ports.model!, 'POST', '/v1/chat/completions', {
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }], ...extra }),
    headers: { 'content-type': 'application/json', 'x-instance-id': instance, 'x-workflow': 'ttl' },
  });

async function scrape(): Promise<string> {
  const r = await send(proxy.ports.metrics!, 'GET', '/metrics');
  assert.equal(r.status, 200);
  return r.body.toString();
}

test('series TTL: a flood past the cap ages out and a new identity gets its own series; a stream open across the TTL keeps its in-flight gauge', { timeout: 30_000 }, async (t) => {
  // A stream that stays open for the whole test: its gauge must not expire with the flood.
  let hold!: ServerResponse;
  const opened = new Promise<void>((resolve) => {
    upstream.script((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sseEvent(chunk(MODEL, { role: 'assistant', content: '' })));
      hold = res;
      resolve();
    });
  });
  const streamDone = new Promise<void>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: proxy.ports.model!, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json', 'x-instance-id': 'streamer' }, agent: false }, (res) => {
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', reject);
    req.end(JSON.stringify({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'x' }] }));
  });
  await opened;

  // All at once, and well within the TTL: a series that aged out while the flood went on would
  // make room for the next identity instead of sending it to the overflow series.
  const flood = await Promise.all(Array.from({ length: 2 * CAP }, (_, i) => chat(`flood-${i}`)));
  assert.deepEqual(flood.map((r) => r.status), Array(2 * CAP).fill(200));
  const flooded = await scrape();
  assert.match(flooded, /model_gateway_requests_total\{[^}]*instance_id="__overflow__"/, 'the flood filled the cap');

  // Until the flood has aged out of the exposition.
  let text = flooded;
  await eventually('the flood aged out of the exposition', async () => !/instance_id="(?:flood-\d+|__overflow__)"/.test((text = await scrape())), t.signal, 50);
  assert.equal(sumOf(parseExposition(text), 'model_gateway_streams_in_flight', { model: MODEL }), 1, 'the open stream is still counted');

  assert.equal((await chat('newcomer')).status, 200);
  const samples = parseExposition(await scrape());
  assert.equal(sumOf(samples, 'model_gateway_requests_total', { instance_id: 'newcomer', status: '200' }), 1, 'the newcomer has its own series');
  assert.equal(sumOf(samples, 'model_gateway_requests_total', { instance_id: '__overflow__' }), 0);

  hold.end(sseEvent('[DONE]'));
  await streamDone;
  await proxy.waitForRecord((r) => r.event === 'request' && r.instance_id === 'streamer', 'the stream record');
  assert.equal(sumOf(parseExposition(await scrape()), 'model_gateway_streams_in_flight', { model: MODEL }), 0, 'its close counted down from 1');
});
