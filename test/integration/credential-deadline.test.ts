// Credential fetches have a total deadline (src/gateway/credentials/fetch.ts), and a call waits
// on a refresh for a bounded time (src/gateway/credentials/minted.ts). An endpoint that drips its
// answer one byte at a time never goes idle: each one here (token endpoint, metadata server, STS)
// would need 10 s to finish its answer. With a small injected deadline the fetch is cut there,
// and a model call waiting on the refresh is answered 502 upstream_credential_failed within the
// wait bound, through the gateway's handler in this process.
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, globalAgent } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { fetchBody } from '../../src/gateway/credentials/fetch.ts';
import { exchangeAtTokenEndpoint, fetchMetadataJson, googleServiceAccountSource } from '../../src/gateway/credentials/google.ts';
import { send } from '../support/http-client.ts';
import { startGatewayInProcess, TEST_MODEL } from '../support/harness.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { rsaKeyPair } from '../support/test-keys.ts';

/**
 * One byte every DRIP_MS of an answer of ANSWER_BYTES: the endpoint needs 10 s to finish it, so a
 * cut is seen in the bytes it sent (fewer than ANSWER_BYTES), not by reading a clock.
 */
const DRIP_MS = 50;
const ANSWER_BYTES = 200;
/** The injected bounds, far below the endpoint's 10 s. */
const DEADLINE_MS = 500;
const WAIT_MS = 200;

let pki: TestPki;
let upstream: ModelUpstream;

/** An endpoint that answers 200 and then drips its body; `cut` resolves when its client closes the connection first. */
interface DripEndpoint {
  readonly url: string;
  requests: number;
  /** Bytes of the answer sent before the connection was closed, once it was. */
  readonly cut: Promise<number>;
  close(): void;
}

async function startDripEndpoint(scheme: 'http' | 'https', path: string, answer: string): Promise<DripEndpoint> {
  const body = Buffer.from(answer.padEnd(ANSWER_BYTES, ' '));
  let cutAt!: (sent: number) => void;
  const endpoint: DripEndpoint = { url: '', requests: 0, cut: new Promise((r) => (cutAt = r)), close: () => server.close() };
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    endpoint.requests++;
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    let sent = 0;
    const drip = setInterval(() => {
      if (sent < body.length) res.write(body.subarray(sent, ++sent));
      else res.end();
    }, DRIP_MS);
    res.once('close', () => {
      clearInterval(drip);
      if (sent < body.length) cutAt(sent);
    });
  };
  const server: Server = scheme === 'https' ? createHttpsServer({ key: pki.keyPem, cert: pki.certPem }, handler) : createHttpServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  (endpoint as { url: string }).url = `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
  return endpoint;
}

before(async () => {
  pki = makeTestPki();
  // The credential fetches use Node's global agent, as they do in production (public roots);
  // here it trusts the test CA, as NODE_EXTRA_CA_CERTS makes the bundle do in other tests.
  globalAgent.options.ca = pki.caPem; // put back in after(): files share a process (scripts/test.mjs)
  upstream = await startModelUpstream(pki);
});
after(async () => {
  delete globalAgent.options.ca;
  await upstream.close();
  pki.cleanup();
});

test('credential fetch deadline: a token endpoint that drips its answer is cut at the deadline, and a call waiting on the refresh is answered 502 upstream_credential_failed within the wait bound (exchangeAtTokenEndpoint, mintedSource)', async () => {
  const endpoint = await startDripEndpoint('https', '/token', '{"access_token":"ya29.dripped","expires_in":3600}');
  const { privateKey } = rsaKeyPair(2048);
  const keyFile = JSON.stringify({ type: 'service_account', private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), client_email: 'gw@proj.iam.gserviceaccount.com', token_uri: endpoint.url });
  let refreshed!: (outcome: { ok: true } | { ok: false; reason: string }) => void;
  const outcome = new Promise<{ ok: true } | { ok: false; reason: string }>((r) => (refreshed = r));
  const credential = googleServiceAccountSource({ readKeyFile: () => keyFile, scope: 's', exchange: (uri, assertion) => exchangeAtTokenEndpoint(uri, assertion, DEADLINE_MS), onRefresh: refreshed, waitMs: WAIT_MS });
  const gw = await startGatewayInProcess({ baseUrl: upstream.baseUrl, pki, credential });
  try {
    const forwarded = upstream.requests.length;
    const r = await send(gw.port, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', 'x-instance-id': 'drip', 'x-run-id': 'run-drip' }, body: JSON.stringify({ model: TEST_MODEL, messages: [{ role: 'user', content: 'hi' }] }) });
    assert.equal(r.status, 502);
    const error = (JSON.parse(String(r.body)) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, 'upstream_credential_failed');
    assert.match(error.message, /did not finish within 0\.2 s/);
    // The refresh itself is cut at its deadline: failed (logged and counted by its caller), the connection closed by the gateway.
    assert.deepEqual(await outcome, { ok: false, reason: `127.0.0.1:${new URL(endpoint.url).port} did not answer within 0.5 s` });
    const sent = await endpoint.cut;
    assert.ok(sent < ANSWER_BYTES, `the gateway closed the connection after ${sent} of ${ANSWER_BYTES} bytes`);
    assert.equal(endpoint.requests, 1, 'one refresh in flight');
    const rec = await gw.records.nth(1);
    assert.deepEqual([rec.status, rec.error, rec.attempts], [502, 'upstream_credential_failed', 0]);
    assert.equal(upstream.requests.length, forwarded, 'nothing was forwarded');
  } finally {
    await gw.close();
    endpoint.close();
  }
});

for (const [name, scheme, fetch] of [
  ['the metadata server', 'http', (url: string) => fetchMetadataJson(url, { 'metadata-flavor': 'Google' }, DEADLINE_MS)],
  ['STS', 'https', (url: string) => fetchBody(url, { form: { Action: 'AssumeRoleWithWebIdentity' }, deadlineMs: DEADLINE_MS })],
] as const) {
  test(`credential fetch deadline: ${name} dripping its answer is cut at the deadline, the connection closed (fetchBody)`, async () => {
    const endpoint = await startDripEndpoint(scheme, '/credentials', '{"access_token":"x","expires_in":3600}');
    try {
      await assert.rejects(fetch(endpoint.url), (err: Error) => err.message === `127.0.0.1:${new URL(endpoint.url).port} did not answer within 0.5 s`);
      // Cut before the endpoint finished: counted in bytes it sent, not timed.
      assert.ok((await endpoint.cut) < ANSWER_BYTES);
    } finally {
      endpoint.close();
    }
  });
}
