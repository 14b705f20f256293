// Every way a model call can end, through the gateway's handler in this process (the harness),
// each checked for its record, its charge and its slot: after any of these endings the same
// instance's next call is admitted and no slot is left held, in process or in Redis.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Agent } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createTlsServer } from 'node:tls';
import { after, before, test } from 'node:test';
import { LocalLimits, type LimitsStore } from '../../src/limits/admission.ts';
import { RedisLimits } from '../../src/limits/redis-store.ts';
import { RespClient } from '../../src/store/resp.ts';
import { signBotToken } from '../../src/auth/jwt.ts';
import type { CredentialSource } from '../../src/gateway/credentials/source.ts';
import { PROTOCOLS } from '../../src/gateway/protocols/table.ts';
import type { WireProtocol } from '../../src/gateway/protocols/protocol.ts';
import type { Provider } from '../../src/gateway/providers.ts';
import { send } from '../support/http-client.ts';
import { startGatewayInProcess, TEST_MODEL, type GatewayOptions } from '../support/harness.ts';
import { completionJson, startModelUpstream, streamEvents, type ModelUpstream } from '../support/model-upstream.ts';
import { textTranscript as messagesTranscript } from '../support/anthropic-upstream.ts';
import { encodeSse as encodeResponses, textTranscript as responsesTranscript } from '../support/responses-upstream.ts';
import { startRedis, type RedisServer } from '../support/redis-server.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { eventually } from '../support/eventually.ts';
import { Secret } from '../../src/http/secret-value.ts';

let pki: TestPki;
let upstream: ModelUpstream;
let redis: RedisServer;

before(async () => {
  pki = makeTestPki();
  upstream = await startModelUpstream(pki);
  redis = await startRedis();
});
after(async () => {
  await upstream.close();
  await redis?.close();
  pki.cleanup();
});

/** One call at a time per instance: a slot not given back refuses the next call with 429. */
const ONE_AT_A_TIME = { concurrent: 1, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 0, workflowBudgetUsdPerDay: 0 };

const chatBody = (extra: Record<string, unknown> = {}) => JSON.stringify({ model: TEST_MODEL, messages: [{ role: 'user', content: 'hi' }], ...extra });
const callAs = (port: number, instance: string, body = chatBody()) =>
  send(port, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', 'x-instance-id': instance, 'x-run-id': `run-${instance}` }, body });

/** The whole request and its FIN in one write: the client is gone before anything is answered. */
function sendAndClose(port: number, instance: string): Promise<void> {
  const body = chatBody();
  const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Instance-Id: ${instance}\r\nX-Run-Id: run-${instance}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(head + body));
    socket.on('error', () => {});
    socket.on('close', () => resolve());
    socket.resume();
  });
}

/** A gate a test opens when it wants a step to go on. */
function gate(): { readonly wait: Promise<void>; open(): void; readonly reached: Promise<void>; arrive(): void } {
  let open!: () => void;
  let arrive!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  const reached = new Promise<void>((r) => (arrive = r));
  return { wait, open, reached, arrive };
}

/** A TCP relay to Redis that holds Redis's answers while `hold` is on. */
async function startHoldingRelay(port: number): Promise<{ port: number; hold(on: boolean): void; held(): number; close(): Promise<void> }> {
  let holding = false;
  const queued: (() => void)[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const store = connect(port, '127.0.0.1');
    sockets.add(client).add(store);
    client.pipe(store);
    store.on('data', (chunk: Buffer) => (holding ? queued.push(() => client.write(chunk)) : client.write(chunk)));
    const end = () => (client.destroy(), store.destroy());
    client.on('close', end).on('error', end);
    store.on('close', end).on('error', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    hold(on) {
      holding = on;
      if (!on) for (const flush of queued.splice(0)) flush();
    },
    held: () => queued.length,
    close: () => new Promise((r) => (sockets.forEach((s) => s.destroy()), server.close(() => r()))),
  };
}

async function gateway(opts: Partial<GatewayOptions> & { limits: LimitsStore }) {
  return startGatewayInProcess({ baseUrl: upstream.baseUrl, pki, ...opts });
}

test('call endings: the request and its FIN in one write while admission waits on Redis is never forwarded, is recorded, and leaves no slot in Redis (GatewayCall, admitCall)', { timeout: 60_000 }, async (t) => {
  const relay = await startHoldingRelay(redis.port);
  let up = false;
  const client = new RespClient({ address: { host: '127.0.0.1', port: relay.port }, tls: false, password: undefined, onState: (isUp) => void (up = isUp) });
  const direct = new RespClient({ address: { host: '127.0.0.1', port: redis.port }, tls: false, password: undefined, onState: () => {} });
  const gw = await gateway({ limits: new RedisLimits(ONE_AT_A_TIME, client, 'closed') });
  const instance = `fin-redis-${randomBytes(4).toString('hex')}`;
  try {
    while (!up || !direct.up) await new Promise((r) => setImmediate(r));
    const before = upstream.requests.length;
    relay.hold(true);
    await sendAndClose(gw.port, instance);
    await gw.clientsGone();
    while (relay.held() === 0) await new Promise((r) => setImmediate(r)); // Redis has answered the admission: held back
    relay.hold(false);
    const rec = await gw.records.nth(1);
    assert.deepEqual([rec.status, rec.error, rec.attempts, rec.instance_id], [0, 'client_aborted', 0, instance]);
    assert.equal(upstream.requests.length, before, 'nothing was forwarded');
    // The release is on its way to Redis when the record is written: it lands a round trip later.
    await eventually('no slot left in Redis for the instance', async () => (await direct.command(['ZCARD', `lim:i:${instance}:f`])) === 0, t.signal);
    assert.equal((await callAs(gw.port, instance)).status, 200, "the same instance's next call is admitted");
  } finally {
    await gw.close();
    client.close();
    direct.close();
    await relay.close();
  }
});

test('call endings: the request and its FIN in one write while a cloud token is being minted is never forwarded, is recorded, and gives its slot back (prepareUpstream)', async () => {
  const minting = gate();
  const slow: CredentialSource = {
    type: 'google-service-account',
    present: () => true,
    authenticate: async () => {
      minting.arrive();
      await minting.wait;
      return { ok: true, headers: { authorization: new Secret('Bearer ya29.minted') }, secrets: [new Secret('ya29.minted')] };
    },
  };
  const gw = await gateway({ limits: new LocalLimits(ONE_AT_A_TIME), credential: slow });
  try {
    const before = upstream.requests.length;
    await sendAndClose(gw.port, 'fin-mint');
    await minting.reached;
    await gw.clientsGone();
    minting.open();
    const rec = await gw.records.nth(1);
    assert.deepEqual([rec.status, rec.error, rec.attempts, rec.cloud], [0, 'client_aborted', 0, 'google']);
    assert.equal(upstream.requests.length, before, 'nothing was forwarded');
    assert.equal((await callAs(gw.port, 'fin-mint')).status, 200, "the same instance's next call is admitted");
  } finally {
    await gw.close();
  }
});

for (const [name, token] of [['CR/LF', 'ya29.a\r\nx-injected: 1'], ['DEL', 'ya29.a\x7fb'], ['a character above U+00FF', 'ya29.a\u0100b'], ['a Latin-1 character', 'ya29.a\u00e9b']] as const) {
  test(`call endings: a minted token with ${name} is refused as 502 upstream_credential_failed, never 500, recorded, and the slot comes back (credentialHeaderProblem)`, async () => {
    const broken: CredentialSource = { type: 'google-metadata', present: () => true, authenticate: async () => ({ ok: true, headers: { authorization: new Secret(`Bearer ${token}`) }, secrets: [new Secret(token)] }) };
    const gw = await gateway({ limits: new LocalLimits(ONE_AT_A_TIME), credential: broken });
    try {
      const before = upstream.requests.length;
      const r = await callAs(gw.port, 'bad-mint');
      assert.equal(r.status, 502);
      assert.equal(JSON.parse(String(r.body)).error.code, 'upstream_credential_failed');
      assert.ok(!String(r.body).includes(token), 'the token is not echoed');
      const rec = await gw.records.nth(1);
      assert.deepEqual([rec.status, rec.error, rec.attempts], [502, 'upstream_credential_failed', 0]);
      assert.equal(upstream.requests.length, before);
      assert.ok(gw.logs.some((l) => l.event === 'credential_error' && !JSON.stringify(l).includes(token)), 'the cause is logged, not the token');
      assert.equal((await callAs(gw.port, 'bad-mint')).status, 502, 'the next call is admitted (and refused for the same reason), not 429');
    } finally {
      await gw.close();
    }
  });
}

/** An HTTPS upstream that answers every request with a raw status line Node's client accepts but cannot relay. */
async function rawStatusUpstream(statusLine: string): Promise<{ port: number; close(): Promise<void> }> {
  const server = createTlsServer({ key: pki.keyPem, cert: pki.certPem }, (socket) => {
    socket.on('error', () => {});
    socket.once('data', () => socket.end(`${statusLine}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as { port: number }).port, close: () => new Promise((r) => server.close(() => r())) };
}

for (const status of ['000', '099']) {
  test(`call endings: an upstream status of ${status} is answered 502 upstream_protocol, recorded, and the slot comes back (answerKind)`, async () => {
    const raw = await rawStatusUpstream(`HTTP/1.1 ${status} Odd`);
    const gw = await startGatewayInProcess({ baseUrl: `https://127.0.0.1:${raw.port}/v1`, pki, limits: new LocalLimits(ONE_AT_A_TIME) });
    try {
      const r = await callAs(gw.port, 'odd-status');
      assert.equal(r.status, 502);
      assert.equal(JSON.parse(String(r.body)).error.code, 'upstream_protocol');
      const rec = await gw.records.nth(1);
      assert.deepEqual([rec.status, rec.error, rec.attempts], [502, 'upstream_bad_status', 1]);
      assert.equal((await callAs(gw.port, 'odd-status')).status, 502, 'the next call is admitted, not 429');
      assert.ok(!gw.logs.some((l) => l.event === 'handler_error'));
    } finally {
      await gw.close();
      await raw.close();
    }
  });
}

/** Each step, made to throw: the call answers 500 (or breaks, once the answer began), is recorded as `internal`, and gives its slot back. */
const THROWS: { step: string; opts: () => Partial<GatewayOptions>; stream?: boolean }[] = [
  { step: 'authenticate (the deny list)', opts: () => ({ signingKey: undefined, revoked: () => { throw new Error('boom in revoked'); } }) },
  { step: 'check (the protocol rules)', opts: () => ({ protocols: PROTOCOLS.map((p): WireProtocol => ({ ...p, checkRequest: () => { throw new Error('boom in check'); } })) }) },
  { step: 'prepare upstream (the credential source)', opts: () => ({ credential: { type: 'key', present: () => true, authenticate: async () => { throw new Error('boom in credential'); } } }) },
  { step: 'send (the connection pool)', opts: () => ({ provider: (p: Provider) => ({ ...p, agent: Object.assign(Object.create(p.agent), { addRequest: () => { throw new Error('boom in send'); } }) }) }) },
  { step: 'relay (the stream reader)', stream: true, opts: () => ({ protocols: PROTOCOLS.map((p): WireProtocol => ({ ...p, newStreamReader: () => { throw new Error('boom in relay'); } })) }) },
];

for (const t of THROWS) {
  test(`call endings: a throw in ${t.step} answers 500, is recorded once as internal, and gives the slot back (GatewayCall.endFailed, finish)`, async () => {
    const opts = t.opts();
    // The deny list is asked only of a verified token: that case runs with a signing key.
    const key = 'revoked' in opts ? randomBytes(32) : undefined;
    const limits = new LocalLimits(ONE_AT_A_TIME);
    const gw = await gateway({ limits, ...opts, ...(key ? { signingKey: key } : {}) });
    try {
      const headers: Record<string, string> = { 'content-type': 'application/json', 'x-instance-id': 'thrower' };
      if (key) headers.authorization = `Bearer ${await mintFor(key, 'thrower')}`;
      const r = await send(gw.port, 'POST', '/v1/chat/completions', { headers, body: chatBody(t.stream ? { stream: true } : {}) }).catch(() => ({ status: 0, body: '' }));
      assert.equal(r.status, 500);
      const rec = await gw.records.nth(1);
      assert.equal(rec.error, 'internal');
      assert.equal(rec.status, 500);
      assert.equal(gw.logs.filter((l) => l.event === 'handler_error').length, 1);
      assert.equal(limits.admit({ instanceId: 'thrower', workflow: null, runId: null }, 4, Date.now()).ok, true, 'the slot came back');
      await new Promise((r) => setImmediate(r));
      assert.equal(gw.records.all.length, 1, 'recorded exactly once');
    } finally {
      await gw.close();
    }
  });
}

async function mintFor(key: Buffer, instance: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return signBotToken({ sub: instance, workflow: 'w', run_id: `run-${instance}`, iat: now, exp: now + 600 }, key);
}

/** A stream whose every event has been written, its connection left open: only the client can close first. */
const END_EVENTS: { api: string; path: string; kind: 'openai' | 'anthropic'; end: string; events: () => string; body: Record<string, unknown> }[] = [
  { api: 'chat completions', path: '/v1/chat/completions', kind: 'openai', end: 'data: [DONE]', events: () => streamEvents(TEST_MODEL, true).join(''), body: { messages: [{ role: 'user', content: 'hi' }], stream_options: { include_usage: true } } },
  { api: 'Responses', path: '/v1/responses', kind: 'openai', end: 'event: response.completed', events: () => encodeResponses(responsesTranscript('Hello.', { model: TEST_MODEL })), body: { input: 'hi' } },
  { api: 'Messages', path: '/v1/messages', kind: 'anthropic', end: 'event: message_stop', events: () => encodeResponses(messagesTranscript('Hello.', { model: TEST_MODEL })), body: { max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] } },
];

for (const t of END_EVENTS) {
  test(`call endings: a client that hangs up after the ${t.api} end event left a complete call: recorded with no interruption and no error (callFailure)`, async () => {
    upstream.script((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(t.events());
    });
    const gw = await gateway({ limits: new LocalLimits(ONE_AT_A_TIME), kind: t.kind });
    try {
      await new Promise<void>((resolve, reject) => {
        const body = JSON.stringify({ model: TEST_MODEL, stream: true, ...t.body });
        const socket = connect(gw.port, '127.0.0.1', () => {
          socket.write(`POST ${t.path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Instance-Id: done\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
        });
        let seen = '';
        socket.on('data', (c: Buffer) => {
          seen += c.toString();
          if (seen.includes(t.end)) socket.destroy();
        });
        socket.on('close', () => resolve());
        socket.on('error', reject);
      });
      const rec = await gw.records.nth(1);
      assert.deepEqual([rec.status, rec.interrupted, rec.error, rec.usage_complete], [200, null, null, true], JSON.stringify(rec));
      assert.ok(gw.logs.every((l) => l.event !== 'handler_error'));
    } finally {
      await gw.close();
    }
  });
}

test('call endings: a non-streamed call whose client leaves while the upstream works is recorded interrupted: client, as a stream is, and gives its slot back (interruption)', async () => {
  let arrived!: () => void;
  const working = new Promise<void>((r) => (arrived = r));
  upstream.script(() => arrived()); // never answers
  const gw = await gateway({ limits: new LocalLimits(ONE_AT_A_TIME) });
  try {
    const socket = connect(gw.port, '127.0.0.1', () => {
      const body = chatBody();
      socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Instance-Id: plain-cut\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    socket.on('error', () => {});
    await working;
    socket.destroy();
    const rec = await gw.records.nth(1);
    assert.deepEqual([rec.status, rec.stream, rec.interrupted, rec.error, rec.attempts], [0, false, 'client', 'client_aborted', 1]);
    assert.equal((await callAs(gw.port, 'plain-cut')).status, 200);
  } finally {
    await gw.close();
  }
});

test('call endings: a request the listener refuses (HTTP/1.0 without Host) gets a record like every other refusal (refuseAtGateway)', async () => {
  const gw = await gateway({ limits: new LocalLimits(ONE_AT_A_TIME) });
  try {
    const answer = await new Promise<string>((resolve) => {
      let text = '';
      const socket = connect(gw.port, '127.0.0.1', () => socket.write('GET /v1/models HTTP/1.0\r\n\r\n'));
      socket.on('data', (c: Buffer) => (text += c.toString()));
      socket.on('close', () => resolve(text));
    });
    assert.match(answer, /^HTTP\/1\.1 400 /);
    const rec = await gw.records.nth(1);
    assert.deepEqual([rec.status, rec.error, rec.path, rec.method], [400, 'host_header_missing', '/v1/models', 'GET']);
  } finally {
    await gw.close();
  }
});

for (const retried of [false, true]) {
  const how = retried ? 'a call retried after a 429 its upstream sent before reading the body has each attempt\'s connection closed' : 'a call its upstream answered before reading the body has the upstream connection closed when the call ends';
  test(`request end lets go of its upstream: ${how}, not held by the body still being written, and the slot comes back (RequestLifecycle.finish)`, { timeout: 30_000 }, async (t) => {
    // An upstream (a broken or hostile one) that answers after the first bytes of the body, never
    // reads the rest, and never closes a connection itself: once the kernel's buffers are full,
    // the proxy's write of the body waits for ever.
    let answered = 0;
    const early = createHttpsServer({ key: pki.keyPem, cert: pki.certPem, keepAlive: true }, (req, res) => {
      req.once('data', () => {
        req.pause();
        const slowDown = retried && answered++ === 0;
        const text = slowDown ? '{"error":{"message":"slow down"}}' : completionJson(TEST_MODEL);
        res.writeHead(slowDown ? 429 : 200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      });
    });
    early.keepAliveTimeout = 0;
    await new Promise<void>((r) => early.listen(0, '127.0.0.1', r));
    // More than the kernel's socket buffers hold here (tcp_wmem's 4 MiB and the receive side's).
    const big = 16 * 1024 * 1024;
    let pool!: Agent;
    // The upstream's idle limit is off, and a pooled connection is never closed by the pool: only
    // the call's end may let a connection go. Were the body to fit in the buffers after all, its
    // connection would be pooled and held, and this test would fail rather than pass unchecked.
    const gw = await gateway({
      baseUrl: `https://127.0.0.1:${(early.address() as { port: number }).port}/v1`,
      limits: new LocalLimits(ONE_AT_A_TIME),
      provider: (p) => ((pool = p.agent), ((p.agent as unknown as { idleMs: number }).idleMs = 3_600_000), p),
      deps: { maxBodyBytes: big + 1024, timeouts: { connectMs: 5000, responseMs: 10_000, idleMs: 0, bodyIdleMs: 5000 }, retry: { maxRetries: retried ? 1 : 0, budgetMs: 10_000, baseDelayMs: 1 } },
    });
    try {
      const r = await callAs(gw.port, 'early', chatBody({ messages: [{ role: 'user', content: 'x'.repeat(big) }] }));
      assert.equal(r.status, 200);
      const rec = await gw.records.nth(1);
      assert.deepEqual([rec.status, rec.attempts], [200, retried ? 2 : 1]);
      const held = () => Object.values(pool.sockets).flat().length + Object.values(pool.freeSockets).flat().length;
      await eventually('the proxy to hold no connection to the upstream that answered early (one pooled: the body fit in the socket buffers)', () => held() === 0, t.signal);
      assert.equal((await callAs(gw.port, 'early')).status, 200, 'the slot came back: not 429');
    } finally {
      await gw.close();
      early.closeAllConnections();
      await new Promise((r) => early.close(r));
    }
  });
}
