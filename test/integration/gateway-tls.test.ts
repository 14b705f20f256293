// The model gateway verifies its upstream's certificate: there is no opt-out for it, not even
// Node's NODE_TLS_REJECT_UNAUTHORIZED=0. Node reads that variable only when a process starts, so
// the test starts the bundle (a process test, test/support/process-tests.ts).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { assertNoSecrets, startProxy, type ProxyProcess } from '../support/proxy-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const KEY = `sk-tls-${randomBytes(16).toString('hex')}`;
let trusted: TestPki;
let untrusted: TestPki;
let upstream: ModelUpstream;
let gw: ProxyProcess;

before(async () => {
  trusted = makeTestPki();
  untrusted = makeTestPki('other');
  upstream = await startModelUpstream(untrusted);
  gw = await startProxy({
    // The gateway trusts another CA than the one that signed the upstream's certificate, and
    // Node's process-wide switch to skip verification is set: the agent's explicit setting wins.
    env: { NODE_TLS_REJECT_UNAUTHORIZED: '0', UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: KEY, UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: trusted.caFile },
    args: ['--model-gateway-listen', '127.0.0.1:0'],
    listeners: ['model'],
  });
});

after(async () => {
  await gw?.stop();
  await upstream?.close();
  trusted?.cleanup();
  untrusted?.cleanup();
});

test('an upstream certificate the gateway cannot verify gives 502 upstream_tls, even with NODE_TLS_REJECT_UNAUTHORIZED=0, and the key is never sent', async () => {
  const r = await send(gw.ports.model!, 'POST', '/v1/chat/completions', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(r.status, 502);
  assert.equal((JSON.parse(r.body.toString()) as { error: { code: string } }).error.code, 'upstream_tls');
  assert.equal(upstream.requests.length, 0);
  const rec = await gw.waitForRecord((l) => l.event === 'request' && l.status === 502);
  assert.equal(rec.retries, 0);
  assert.equal(rec.error, 'tls');
  assertNoSecrets(r.body.toString() + gw.output(), [KEY], 'the response or the log');
});
