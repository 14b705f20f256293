// Request bodies an upstream could read another way, and bodies that would hold the event loop,
// against the gateway: each reproduced case-folded request is refused with 400 and never
// reaches the upstream; a body of millions of objects is refused by the scan before it is parsed,
// while /healthz keeps answering and the event loop stays free.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { parseExposition } from '../support/prometheus.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

let pki: TestPki;
let upstream: ModelUpstream;
let proxy: ProxyProcess;

before(async () => {
  pki = makeTestPki();
  upstream = await startModelUpstream(pki);
  proxy = await startServe({
    env: {
      UPSTREAM_BASE_URL: upstream.baseUrl,
      UPSTREAM_API_KEY: `sk-${randomBytes(8).toString('hex')}`,
      UPSTREAM_ALLOWED_MODELS: 'gpt-ok',
      UPSTREAM_CA_FILE: pki.caFile,
    },
    args: ['--model-gateway-listen', '127.0.0.1:0'],
    listeners: ['model'],
  });
});

after(async () => {
  await proxy?.stop();
  await upstream?.close();
  pki?.cleanup();
});

const post = (path: string, body: string | Buffer) => send(proxy.ports.model!, 'POST', path, { headers: { 'content-type': 'application/json' }, body });

for (const [path, body] of [
  ['/v1/chat/completions', '{"model":"gpt-ok","MODEL":"gpt-secret","messages":[]}'],
  ['/v1/responses', '{"model":"gpt-ok","input":"x","Tools":[{"type":"web_search"}]}'],
  ['/v1/responses', '{"model":"gpt-ok","input":"x","Previous_Response_Id":"resp_1"}'],
] as const) {
  test(`case-folded keys: ${body} on ${path} is refused with 400 case_variant_key and never forwarded`, async () => {
    const before = upstream.requests.length;
    const res = await post(path, body);
    assert.equal(res.status, 400);
    const error = (JSON.parse(res.body.toString()) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, 'case_variant_key');
    assert.match(error.message, /"(MODEL|Tools|Previous_Response_Id)"/);
    assert.equal(upstream.requests.length, before);
  });
}

async function lagMaxSeconds(): Promise<number> {
  const text = (await send(proxy.ports.metrics!, 'GET', '/metrics')).body.toString();
  return parseExposition(text).find((s) => s.name === 'nodejs_eventloop_lag_max_seconds')!.value;
}

test('bounded parse cost: 10 million empty objects (31 MB) are refused as body_too_complex before they are parsed; /healthz answers meanwhile and the event loop is not held (unbounded: 10-16 s)', async () => {
  await lagMaxSeconds(); // starts a new measuring window
  const giant = Buffer.from(`{"model":"gpt-ok","messages":[],"x":[${'{},'.repeat(10_000_000)}{}]}`);
  const before = upstream.requests.length;
  const [refused, health] = await Promise.all([post('/v1/chat/completions', giant), send(proxy.ports.model!, 'GET', '/healthz')]);
  assert.equal(refused.status, 400);
  assert.equal((JSON.parse(refused.body.toString()) as { error: { code: string } }).error.code, 'body_too_complex');
  assert.equal(health.status, 200);
  assert.equal((await send(proxy.ports.model!, 'GET', '/healthz')).status, 200);
  assert.equal(upstream.requests.length, before);
  // The gateway's own event-loop delay while it received and refused the body. Parsing it took
  // 10-16 s before the scan; the bound leaves room for a loaded test machine.
  const lag = await lagMaxSeconds();
  assert.ok(lag < 2, `event loop held for ${lag} s`);
});
