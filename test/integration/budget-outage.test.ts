// An outage spends nothing: a model call none of whose bytes can have reached the provider (its
// port refused the connection, its host name did not resolve, its TLS handshake failed, the
// egress proxy refused or could not open the tunnel) is charged nothing against the budgets,
// however many attempts it made, and its record says so (`charge_basis: not_sent`). The control:
// a call whose provider read the request and then cut the connection may have been billed, and is
// charged its worst case (`worst_case`). Each case runs on the direct path and through an egress
// proxy (HTTPS_PROXY), as the operator's trial did: a closed port, an unresolvable name and an
// untrusted certificate, six calls each, leave a $5 run able to call a healthy model.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { after, before, test } from 'node:test';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { startConnectProxy, type ConnectProxy } from '../support/connect-proxy.ts';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import type { LogRecord, ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const SIGNING_KEY = randomBytes(32).toString('hex');
const KEY = `sk-outage-${randomBytes(12).toString('hex')}`;
// No max_tokens in the calls: each one's worst case is the assumed 128,000 output tokens at
// $10 per million, $1.28, as in the operator's trial; four such charges ended a $5 run.
const PRICE = { input: 1, output: 10 };
const ASSUMED_OUTPUT = 128_000;
const WORST_USD = 1.28;
const CONNECT_TIMEOUT_MS = 2000;

let pki: TestPki;
let otherPki: TestPki;
let healthy: ModelUpstream;
let untrusted: TlsServer;
let resetting: TlsServer;
let plain: HttpServer;
let egress: ConnectProxy;
let direct: ProxyProcess;
let tunnelled: ProxyProcess;
let dir: string;
const readByReset: string[] = [];

/** A TLS server that accepts and is done: a certificate the gateway does not trust, or a request read whole and then cut. */
async function tlsServer(which: TestPki, onSocket: (s: Socket) => void): Promise<TlsServer> {
  const server = createTlsServer({ key: which.keyPem, cert: which.certPem }, onSocket);
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

const portOf = (s: { address(): unknown }) => (s.address() as AddressInfo).port;

before(async () => {
  pki = makeTestPki();
  otherPki = makeTestPki('other');
  healthy = await startModelUpstream(pki);
  untrusted = await tlsServer(otherPki, (s) => s.on('error', () => {}));
  // The control's provider reads the request head and cuts the connection: it may have begun (and billed) the generation.
  resetting = await tlsServer(pki, (s) => {
    s.on('error', () => {});
    s.on('data', (c: Buffer) => {
      readByReset.push(c.toString('latin1'));
      if (readByReset.join('').includes('\r\n\r\n')) s.destroy();
    });
  });
  // An in-cluster model server over plain HTTP that takes longer to answer than the connect timeout.
  plain = createHttpServer((req, res) => {
    req.resume();
    setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'c', object: 'chat.completion', model: 'm-plain', choices: [], usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 } })), CONNECT_TIMEOUT_MS + 500);
  });
  await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
  // A port nothing listens on: bound, then closed.
  const closing = createNetServer();
  await new Promise<void>((resolve) => closing.listen(0, '127.0.0.1', resolve));
  const closedPort = portOf(closing);
  await new Promise<void>((resolve) => closing.close(() => resolve()));
  // The egress proxy tunnels everything but the host its operator's policy refuses.
  egress = await startConnectProxy({ kind: 'tunnel', allow: (target) => !target.startsWith('refused.example') });

  dir = mkdtempSync(join(tmpdir(), 'budget-outage-'));
  const provider = (name: string, baseUrl: string) => ({ name, kind: 'openai', baseUrl, keyEnv: 'OUTAGE_KEY', models: [`m-${name}`], caFile: pki.caFile });
  writeFileSync(
    join(dir, 'providers.json'),
    JSON.stringify({
      providers: [
        provider('closed', `https://127.0.0.1:${closedPort}/v1`),
        provider('dns', 'https://no-such-host.invalid/v1'),
        provider('tls', `https://127.0.0.1:${portOf(untrusted)}/v1`),
        provider('refused', 'https://refused.example/v1'),
        provider('reset', `https://127.0.0.1:${portOf(resetting)}/v1`),
        provider('ok', healthy.baseUrl),
        { name: 'plain', kind: 'openai', baseUrl: `http://127.0.0.1:${portOf(plain)}/v1`, allowPlainHttp: true, credential: { type: 'none' }, models: ['m-plain'] },
      ],
    }),
  );
  const models = ['closed', 'dns', 'tls', 'refused', 'reset', 'ok', 'plain'];
  writeFileSync(join(dir, 'prices.json'), JSON.stringify({ providers: Object.fromEntries(models.map((m) => [m, { [`m-${m}`]: PRICE }])) }));
  writeFileSync(join(dir, 'limits.json'), JSON.stringify({ perRun: { budgetUsd: 5 } }));
  const start = (env: Record<string, string>) =>
    startServe({
      env: { OUTAGE_KEY: KEY, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY, MODEL_PRICES_FILE: join(dir, 'prices.json'), ...env },
      args: ['--model-gateway-listen', '127.0.0.1:0', '--providers', join(dir, 'providers.json'), '--limits', join(dir, 'limits.json'), '--upstream-connect-timeout', `${CONNECT_TIMEOUT_MS}ms`],
      listeners: ['model'],
    });
  [direct, tunnelled] = await Promise.all([start({}), start({ HTTPS_PROXY: egress.url })]);
});

after(async () => {
  await Promise.all([direct?.stop(), tunnelled?.stop()]);
  await Promise.all([healthy?.close(), egress?.close(), ...[untrusted, resetting, plain].map((s) => s && new Promise((r) => s.close(r)))]);
  pki?.cleanup();
  otherPki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function tokenFor(run: string): Promise<string> {
  const r = await runCommandInProcess(['mint-token', '--instance-id', `bot-${run}`, '--workflow', 'outage', '--run-id', run], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY });
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim();
}

const chat = (gw: ProxyProcess, token: string, model: string) =>
  send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }) });

const recordOf = (gw: ProxyProcess, id: string): Promise<LogRecord> => gw.waitForRecord((r) => r.event === 'request' && r.request_id === id, `the record of ${id}`);

/** Six calls at once to each failing provider, each answered 502 or 504 and charged nothing, then a healthy call of the same run is served. */
async function outageSpendsNothing(gw: ProxyProcess, run: string, failing: readonly { model: string; error: string }[]): Promise<void> {
  const token = await tokenFor(run);
  for (const { model, error } of failing) {
    const answers = await Promise.all(Array.from({ length: 6 }, () => chat(gw, token, model)));
    for (const a of answers) {
      assert.ok(a.status === 502 || a.status === 504, `${model}: ${a.status} ${a.body.toString()}`);
      const rec = await recordOf(gw, String(a.headers['x-client-request-id']));
      assert.deepEqual([rec.model, rec.error, rec.charged_usd, rec.charge_basis, rec.charge_estimated], [model, error, 0, 'not_sent', false], JSON.stringify(rec));
    }
  }
  const ok = await chat(gw, token, 'm-ok');
  assert.equal(ok.status, 200, `the run's budget is whole after the outage: ${ok.body.toString()}`);
  const rec = await recordOf(gw, String(ok.headers['x-client-request-id']));
  assert.equal(rec.charge_basis, 'usage');
}

/** The control: a call the provider read, then cut, is charged its worst case (it may have been billed). */
async function cutAfterReadIsCharged(gw: ProxyProcess, run: string): Promise<void> {
  const token = await tokenFor(run);
  const seen = readByReset.length;
  const a = await chat(gw, token, 'm-reset');
  assert.equal(a.status, 502, a.body.toString());
  assert.ok(readByReset.slice(seen).join('').startsWith('POST /v1/chat/completions '), 'the provider read the request');
  const rec = await recordOf(gw, String(a.headers['x-client-request-id']));
  // The worst case: the input estimated from the body (bytes / 4) and the assumed output, at the price.
  const worst = (Math.ceil(Number(rec.bytes_in) / 4) * PRICE.input + ASSUMED_OUTPUT * PRICE.output) / 1e6;
  assert.deepEqual([rec.error, rec.charged_usd, rec.charge_basis, rec.attempts], ['reset', Math.round(worst * 1e6) / 1e6, 'worst_case', 1], JSON.stringify(rec));
  assert.ok(worst > WORST_USD);
}

test('budget: an outage spends nothing: calls to a closed port, an unresolvable name and an untrusted certificate (six each) are charged nothing, recorded not_sent, and a $5 run then calls a healthy model (chargeFor)', async () => {
  await outageSpendsNothing(direct, 'outage-direct', [
    { model: 'm-closed', error: 'connect_refused' },
    { model: 'm-dns', error: 'dns' },
    { model: 'm-tls', error: 'tls' },
  ]);
});

test('budget: an outage spends nothing through the egress proxy either: a tunnel refused by the egress proxy, or one it cannot open (closed port, unresolvable name), and an untrusted certificate inside the tunnel (chargeFor)', async () => {
  await outageSpendsNothing(tunnelled, 'outage-egress', [
    { model: 'm-refused', error: 'egress' },
    { model: 'm-closed', error: 'egress' },
    { model: 'm-dns', error: 'egress' },
    { model: 'm-tls', error: 'tls' },
  ]);
});

test('budget: control: a call whose provider read the request and then cut the connection is charged its worst case, direct and through the egress proxy (chargeFor)', async () => {
  await cutAfterReadIsCharged(direct, 'control-direct');
  await cutAfterReadIsCharged(tunnelled, 'control-egress');
});

test('plain http: a new connection to an in-cluster model server is up at its TCP connect: the connect timeout ends there, so an answer slower than it is served, and the call counts as reached (openUpstream)', async () => {
  const token = await tokenFor('plain-http');
  const a = await chat(direct, token, 'm-plain');
  assert.equal(a.status, 200, a.body.toString());
  const rec = await recordOf(direct, String(a.headers['x-client-request-id']));
  assert.deepEqual([rec.charge_basis, rec.charged_usd], ['usage', (3 * PRICE.input + 5 * PRICE.output) / 1e6]);
  assert.ok(Number(rec.duration_ms) > CONNECT_TIMEOUT_MS, `answered after the connect timeout (${rec.duration_ms} ms)`);
});
