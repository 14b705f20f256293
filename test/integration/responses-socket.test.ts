// The Responses API's WebSocket mode through the gateway (src/gateway/responses-socket.ts), in this
// process (the harness), against a fake upstream that speaks it as OpenAI does
// (test/support/responses-socket-upstream.ts). Codex's own messages are replayed from
// test/fixtures/recorded-socket/: what 0.169 sent, recorded from its side.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { ModelRequestRecord } from '../../src/gateway/record.ts';
import { LocalLimits } from '../../src/limits/admission.ts';
import { parsePrices } from '../../src/limits/prices.ts';
import { startGatewayInProcess, TEST_MODEL, UPSTREAM_KEY, type GatewayOptions, type InProcessListener } from '../support/harness.ts';
import { defaultResponses, startResponsesUpstream } from '../support/responses-upstream.ts';
import { serveResponsesSocket } from '../support/responses-socket-upstream.ts';
import { socketSuite } from '../support/socket-suite.ts';
import { eventually } from '../support/eventually.ts';
import { openSocket, type SocketClient } from '../support/ws-client.ts';
import { clientText as clientTextFrame, frame, OP } from '../support/ws-wire.ts';
import type { FakeSocketConnection } from '../support/responses-socket-upstream.ts';


interface Recorded {
  upgrades: { url: string; headers: Record<string, string> }[];
  messages: { n: number; turn: string; connection: number | null; body: Record<string, unknown> }[];
}
const RECORDED = JSON.parse(readFileSync('test/fixtures/recorded-socket/codex-0.169.0.json', 'utf8')) as Recorded;

const suite = socketSuite();

/** The gateway, its one provider speaking WebSocket mode. */
function gateway(extra: Partial<GatewayOptions> = {}): Promise<InProcessListener<ModelRequestRecord>> {
  return startGatewayInProcess({ baseUrl: suite.upstream.baseUrl, pki: suite.pki, signingKey: suite.signingKey, provider: (p) => ({ ...p, config: { ...p.config, websocket: true } }), ...extra });
}

const token = (instance: string, ttlSec = 600): string => suite.token(instance, { ttlSec });

/** Codex's recorded upgrade headers, but the key, host and credential: the bot token goes as CODEX_API_KEY sends it. */
function codexHeaders(bot: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(RECORDED.upgrades[1]!.headers)) {
    if (/^(host|connection|upgrade|sec-websocket-(key|version)|authorization)$/.test(k)) continue;
    out[k] = v;
  }
  return { ...out, authorization: `Bearer ${bot}` };
}

/** A recorded message of the tool session, its model the gateway's, continuing `previous` when it did. */
function recordedTurn(n: number, previous?: string): Record<string, unknown> {
  const body: Record<string, unknown> = { ...RECORDED.messages[n]!.body, model: TEST_MODEL };
  if ('previous_response_id' in body) body.previous_response_id = previous;
  const { type: _type, ...rest } = body;
  return rest;
}

async function turn(client: SocketClient, body: Record<string, unknown>): Promise<Record<string, unknown>[]> {
  client.sendTurn(body);
  return client.eventsUntil('response.completed', 'response.failed', 'response.incomplete', 'error');
}

const responseOf = (events: Record<string, unknown>[]) => (events.at(-1)!.response as { id: string }).id;

test("Codex's recorded tool session over one WebSocket: warm-up, tool call, final answer after previous_response_id; each turn recorded and charged from its usage", async () => {
  const limits = new LocalLimits({ concurrent: 1, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 10, workflowBudgetUsdPerDay: 0 });
  const prices = parsePrices(JSON.stringify({ [TEST_MODEL]: { input: 1, output: 2 } }), 'prices');
  const gw = await gateway({ limits, prices });
  try {
    const before = suite.fake.connections.length;
    const opened = await openSocket(gw.port, '/v1/responses', codexHeaders(token('codex-1')));
    assert.equal(opened.status, 101, opened.body);
    const client = opened.client!;
    const warm = await turn(client, recordedTurn(2));
    assert.deepEqual(warm.map((e) => e.type), ['response.created', 'response.completed']);
    const tool = await turn(client, recordedTurn(3, responseOf(warm)));
    assert.ok(tool.some((e) => e.type === 'response.function_call_arguments.done'), 'the fake asked for the shell tool');
    const call = (tool.at(-1)!.response as { output: { type: string; call_id?: string }[] }).output.find((o) => o.type === 'function_call')!;
    const final = recordedTurn(4, responseOf(tool));
    (final.input as { call_id?: string }[])[0]!.call_id = call.call_id;
    const done = await turn(client, final);
    assert.equal(done.at(-1)!.type, 'response.completed');
    assert.match(JSON.stringify(done), /E2E-TOOL-DONE/);
    // One upstream connection for the three turns, and the provider's key, never the bot's token.
    assert.equal(suite.fake.connections.length, before + 1);
    const conn = suite.fake.connections.at(-1)!;
    assert.equal(conn.headers.authorization, `Bearer ${UPSTREAM_KEY}`);
    assert.equal(conn.headers['openai-beta'], 'responses_websockets=2026-02-06');
    assert.equal(conn.headers['sec-websocket-extensions'], undefined, 'no extension offered upstream');
    assert.ok(conn.frames.filter((f) => f.opcode === 1).every((f) => f.masked), 'the gateway masks what it sends upstream');
    client.close();
    await client.gone();
    const records = [await gw.records.nth(1), await gw.records.nth(2), await gw.records.nth(3), await gw.records.nth(4)];
    assert.deepEqual(records.map((r) => [r.method, r.status]), [['GET', 101], ['WS', 200], ['WS', 200], ['WS', 200]]);
    for (const r of records.slice(1)) {
      assert.equal(r.usage_complete, true);
      assert.equal(r.charge_basis, 'usage');
      assert.equal(r.instance_id, 'codex-1');
      assert.match(r.request_id, /\.[123]$/);
    }
  } finally {
    await gw.close();
  }
});

// ---- the handshake: an HTTP call, refused over HTTP before any upgrade ----

/** A turn that asks for nothing the policy refuses. */
const PLAIN: Record<string, unknown> = { model: TEST_MODEL, input: 'hi', store: false };

/** Connected, its upstream leg open. */
async function connectAs(gw: InProcessListener<ModelRequestRecord>, instance: string, headers: Record<string, string> = {}): Promise<SocketClient> {
  return (await suite.connect(gw.port, { authorization: `Bearer ${token(instance)}`, ...headers })).client;
}

test('an upgrade through a gateway whose providers speak no WebSocket mode gets 404 upgrade_not_served in the Responses format (Codex falls back to POST), recorded; no upstream connection is opened', async () => {
  const gw = await startGatewayInProcess({ baseUrl: suite.upstream.baseUrl, pki: suite.pki, signingKey: suite.signingKey });
  try {
    const before = suite.fake.connections.length;
    const r = await openSocket(gw.port, '/v1/responses', codexHeaders(token('no-ws')));
    assert.equal(r.status, 404);
    assert.equal(r.headers.connection, 'close');
    assert.deepEqual((JSON.parse(r.body) as { error: { code: string; type: string } }).error.code, 'upgrade_not_served');
    const rec = await gw.records.nth(1);
    assert.deepEqual([rec.method, rec.status, rec.error, rec.api, rec.attempts], ['GET', 404, 'upgrade_not_served', 'responses', 0]);
    assert.equal(suite.fake.connections.length, before);
  } finally {
    await gw.close();
  }
});

test('a provider that does not switch (404 to the upgrade) gets the client the 404 that makes it fall back to HTTP, recorded as such', async () => {
  const own = await startResponsesUpstream(suite.pki, defaultResponses);
  serveResponsesSocket(own.server, own.requests).refuseUpgrades(404);
  const gw = await startGatewayInProcess({ baseUrl: own.baseUrl, pki: suite.pki, signingKey: suite.signingKey, provider: (p) => ({ ...p, config: { ...p.config, websocket: true } }) });
  try {
    const r = await openSocket(gw.port, '/v1/responses', codexHeaders(token('provider-404')));
    assert.equal(r.status, 404);
    assert.equal((JSON.parse(r.body) as { error: { code: string } }).error.code, 'upgrade_not_served');
    const rec = await gw.records.nth(1);
    assert.deepEqual([rec.status, rec.error, rec.attempts], [404, 'upstream_404', 1]);
  } finally {
    await gw.close();
    await own.close();
  }
});

test('the handshake authenticates as HTTP does: no token, a bad token or a revoked one is the HTTP 401 with its JSON body, before any upgrade, and no upstream connection is opened (authenticateBot at the upgrade)', async () => {
  let revoked = false;
  const gw = await gateway({ revoked: async () => (revoked ? { kind: 'revoked', reason: 'instance revoked' } : { kind: 'ok' }) });
  try {
    const before = suite.fake.connections.length;
    const none = await openSocket(gw.port, '/v1/responses', {});
    assert.equal(none.status, 401);
    assert.match(none.body, /"code":"invalid_bot_token"/);
    const bad = await openSocket(gw.port, '/v1/responses', { authorization: 'Bearer not-a-token' });
    assert.equal(bad.status, 401);
    revoked = true;
    const stopped = await openSocket(gw.port, '/v1/responses', { authorization: `Bearer ${token('revoked-at-upgrade')}` });
    assert.equal(stopped.status, 401);
    assert.match(stopped.body, /stopped it before it expired/);
    assert.equal(suite.fake.connections.length, before, 'nothing reached the upstream');
    const recs = [await gw.records.nth(1), await gw.records.nth(2), await gw.records.nth(3)];
    assert.deepEqual(recs.map((r) => [r.status, r.error]), [[401, 'invalid_bot_token'], [401, 'invalid_bot_token'], [401, 'invalid_bot_token']]);
  } finally {
    await gw.close();
  }
});

test('a malformed handshake is refused over HTTP: version 8 is 426 with Sec-WebSocket-Version: 13, a key that is not 16 bytes is 400, an upgrade on another path is 404 in its route\'s format', async () => {
  const gw = await gateway();
  try {
    const old = await openSocket(gw.port, '/v1/responses', { authorization: `Bearer ${token('v8')}`, 'Sec-WebSocket-Version': '8' });
    assert.equal(old.status, 426);
    assert.equal(old.headers['sec-websocket-version'], '13');
    assert.match(old.body, /websocket_version_not_supported/);
    const key = await openSocket(gw.port, '/v1/responses', { authorization: `Bearer ${token('badkey')}` }, 'c2hvcnQ=');
    assert.equal(key.status, 400);
    assert.match(key.body, /websocket_handshake_invalid/);
    const chat = await openSocket(gw.port, '/v1/chat/completions', { authorization: `Bearer ${token('chat')}` });
    assert.equal(chat.status, 404);
    assert.match(chat.body, /upgrade_not_served/);
    const messages = await openSocket(gw.port, '/v1/messages', { authorization: `Bearer ${token('msgs')}` });
    assert.equal(messages.status, 404);
    assert.equal((JSON.parse(messages.body) as { type: string }).type, 'error', 'Anthropic\'s error format on the Messages route');
  } finally {
    await gw.close();
  }
});

test("the upstream's WebSocket is the gateway's own: the provider's key, the allowed headers only, no Sec-WebSocket-* or extension offer of the client's, and the key never in the 101 (gatewayUpstreamHeaders at the upgrade)", async () => {
  const gw = await gateway();
  try {
    const before = suite.fake.connections.length;
    const opened = await openSocket(gw.port, '/v1/responses', {
      ...codexHeaders(token('headers')),
      'Sec-WebSocket-Protocol': 'chat',
      Cookie: 'session=1',
      'X-Forwarded-For': '10.0.0.1',
      'OpenAI-Organization': 'org-of-the-bot',
      'X-Api-Key': token('headers'),
    });
    assert.equal(opened.status, 101);
    assert.equal(opened.headers['sec-websocket-extensions'], undefined, 'no extension accepted');
    assert.equal(opened.headers['sec-websocket-protocol'], undefined);
    assert.ok(!JSON.stringify(opened.headers).includes(UPSTREAM_KEY));
    const conn = suite.fake.connections[before]!;
    const h = conn.headers;
    assert.equal(h.authorization, `Bearer ${UPSTREAM_KEY}`);
    assert.equal(h['sec-websocket-extensions'], undefined);
    assert.equal(h['sec-websocket-protocol'], undefined);
    assert.notEqual(h['sec-websocket-key'], undefined);
    for (const name of ['cookie', 'x-forwarded-for', 'openai-organization', 'x-api-key']) assert.equal(h[name], undefined, name);
    for (const name of ['originator', 'session-id', 'thread-id', 'x-codex-turn-metadata', 'openai-beta', 'user-agent']) assert.notEqual(h[name], undefined, name);
    opened.client!.close();
    await opened.client!.gone();
  } finally {
    await gw.close();
  }
});

// ---- turns: each checked as an HTTP call is ----

test('a turn the policy refuses gets the protocol\'s error event with the HTTP status and code, is never forwarded, and the connection stays usable (checkCall per turn)', async () => {
  const gw = await gateway();
  try {
    const client = await connectAs(gw, 'refusals');
    const conn = suite.fake.connections.at(-1)!;
    const refusals: [Record<string, unknown> | string, number, string][] = [
      [{ ...PLAIN, store: true }, 400, 'stored_state_not_allowed'],
      [{ ...PLAIN, previous_response_id: 'resp_of_another_connection' }, 400, 'stored_state_not_allowed'],
      [{ ...PLAIN, tools: [{ type: 'web_search' }] }, 400, 'tool_not_allowed'],
      [{ ...PLAIN, model: 'gpt-not-allowed' }, 400, 'model_not_allowed'],
      [`{"type":"response.create","model":"${TEST_MODEL}","input":"a","input":"b"}`, 400, 'duplicate_key'],
      [`{"type":"response.create","model":"${TEST_MODEL}","input":"a","Model":"x"}`, 400, 'case_variant_key'],
      ['{"type":"response.create", not json', 400, 'invalid_json'],
      [`{"type":"response.cancel","model":"${TEST_MODEL}","input":"a"}`, 400, 'unsupported_client_event'],
      [{ ...PLAIN, background: true }, 400, 'stored_state_not_allowed'],
    ];
    for (const [body, status, code] of refusals) {
      if (typeof body === 'string') client.send(clientTextFrame(body));
      else client.sendTurn(body);
      const e = await client.nextEvent();
      assert.deepEqual([e.type, e.status, (e.error as { code: string }).code], ['error', status, code], JSON.stringify(body));
      assert.equal(typeof (e.error as { message: string }).message, 'string');
    }
    const ok = await turn(client, PLAIN);
    assert.equal(ok.at(-1)!.type, 'response.completed', 'the connection is still usable');
    // Counted once a later turn completed, so that a forwarded refusal would have arrived by now.
    assert.equal(conn.frames.filter((f) => f.opcode === 1).length, 1, 'nothing was forwarded but the usable turn');
    client.close();
    await client.gone();
    const records = await Promise.all(Array.from({ length: refusals.length + 2 }, (_, i) => gw.records.nth(i + 1)));
    assert.deepEqual(records.slice(1, -1).map((r) => [r.method, r.status, r.error, r.attempts]), refusals.map(([, s, c]) => ['WS', s, c, 0]));
    assert.deepEqual([records.at(-1)!.status, records.at(-1)!.attempts], [200, 1]);
  } finally {
    await gw.close();
  }
});

test("previous_response_id may name only a response this connection's own turns produced, never another connection's (socket.responses in the stored-state check)", async () => {
  const gw = await gateway();
  try {
    const a = await connectAs(gw, 'chain-a');
    const b = await connectAs(gw, 'chain-b');
    const first = responseOf(await turn(a, PLAIN));
    const own = await turn(a, { ...PLAIN, previous_response_id: first, input: [{ role: 'user', content: 'more' }] });
    assert.equal(own.at(-1)!.type, 'response.completed');
    const upstreamB = suite.fake.connections.at(-1)!;
    const stolen = await turn(b, { ...PLAIN, previous_response_id: first });
    assert.deepEqual([stolen[0]!.type, stolen[0]!.status, (stolen[0]!.error as { code: string; param: string }).code, (stolen[0]!.error as { param: string }).param], ['error', 400, 'stored_state_not_allowed', 'previous_response_id']);
    assert.match((stolen[0]!.error as { message: string }).message, /names no response of this WebSocket connection/);
    // Counted once b's next turn completed, so that a forwarded refusal would have arrived by now.
    assert.equal((await turn(b, PLAIN)).at(-1)!.type, 'response.completed');
    assert.equal(upstreamB.frames.filter((f) => f.opcode === 1).length, 1, "b's refused turn never reached the upstream, only its next one");
    a.close();
    b.close();
    await Promise.all([a.gone(), b.gone()]);
  } finally {
    await gw.close();
  }
});

test('one response at a time per connection: a response.create while one is in progress gets response_in_flight and is not forwarded; the first completes', async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  suite.fake.script((t) => void held.then(() => t.answer()));
  const gw = await gateway();
  try {
    const client = await connectAs(gw, 'in-flight');
    const conn = suite.fake.connections.at(-1)!;
    client.sendTurn(PLAIN);
    await eventuallyFrames(conn, 1);
    client.sendTurn(PLAIN);
    const refused = await client.nextEvent();
    assert.deepEqual([refused.type, refused.status, (refused.error as { code: string }).code], ['error', 409, 'response_in_flight']);
    release();
    const events = await client.eventsUntil('response.completed');
    assert.equal(events.at(-1)!.type, 'response.completed');
    assert.equal(conn.frames.filter((f) => f.opcode === 1).length, 1);
    client.close();
    await client.gone();
  } finally {
    await gw.close();
  }
});

test('a response.create split over fragments, with a ping between them, is one turn; the ping is answered and relayed upstream', async () => {
  const gw = await gateway();
  try {
    const client = await connectAs(gw, 'fragments');
    const conn = suite.fake.connections.at(-1)!;
    const text = JSON.stringify({ type: 'response.create', ...PLAIN });
    const cut = Math.floor(text.length / 2);
    client.send(frame({ opcode: OP.text, payload: text.slice(0, cut), fin: false, mask: true }));
    client.send(frame({ opcode: OP.ping, payload: 'between', mask: true }));
    client.send(frame({ opcode: OP.cont, payload: text.slice(cut), mask: true }));
    const events = await client.eventsUntil('response.completed');
    assert.equal(events.at(-1)!.type, 'response.completed');
    const pong = await client.until(() => client.frames.find((f) => f.opcode === OP.pong), 'the pong');
    assert.equal(pong.payload.toString(), 'between');
    assert.ok(conn.frames.some((f) => f.opcode === OP.ping && f.payload.toString() === 'between'), 'the ping went upstream too');
    assert.ok(conn.frames.filter((f) => f.opcode !== OP.pong).every((f) => f.masked), 'masked, as a client must');
    client.close();
    await client.gone();
  } finally {
    await gw.close();
  }
});

test('the upstream key is never in anything sent to the client: echoed in an event, split across fragments of one message and across frames, in base64, every form is redacted (StreamRedactor per message)', async () => {
  const b64 = Buffer.from(UPSTREAM_KEY).toString('base64');
  suite.fake.script((t) => {
    const e1 = JSON.stringify({ type: 'response.created', response: { id: 'resp_echo1', status: 'in_progress', instructions: `key ${UPSTREAM_KEY} and ${b64}` } });
    // One message in three fragments, the key cut at two places.
    const at = e1.indexOf(UPSTREAM_KEY);
    t.conn.write(frame({ opcode: OP.text, payload: e1.slice(0, at + 5), fin: false }));
    t.conn.write(frame({ opcode: OP.cont, payload: e1.slice(at + 5, at + 12), fin: false }));
    t.conn.write(frame({ opcode: OP.cont, payload: e1.slice(at + 12) }));
    t.conn.sendEvent({ type: 'response.completed', response: { id: 'resp_echo1', status: 'completed', usage: { input_tokens: 1, output_tokens: 1 }, output: [{ type: 'message', content: [{ type: 'output_text', text: UPSTREAM_KEY }] }] } });
  });
  const gw = await gateway();
  try {
    const client = await connectAs(gw, 'redaction');
    const events = await turn(client, PLAIN);
    const seen = Buffer.concat(client.frames.map((f) => f.payload)).toString('latin1');
    assert.ok(!seen.includes(UPSTREAM_KEY), 'the key');
    assert.ok(!seen.includes(b64), 'its base64');
    assert.ok(!seen.includes(UPSTREAM_KEY.slice(3)), 'its tail');
    assert.match(JSON.stringify(events), /\[REDACTED\]/);
    assert.equal(events.at(-1)!.type, 'response.completed');
    client.close();
    await client.gone();
  } finally {
    await gw.close();
  }
});

/** Until the fake has `n` text frames on `conn`. */
function eventuallyFrames(conn: FakeSocketConnection, n: number): Promise<void> {
  return eventually(`${n} text frames upstream`, () => conn.frames.filter((f) => f.opcode === OP.text).length >= n, AbortSignal.timeout(60_000));
}
