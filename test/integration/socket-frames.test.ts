// Hostile frames on both legs of a Responses WebSocket through the gateway (in this process):
// a client's frames that break RFC 6455 get the close code the RFC gives, a refused frame is
// counted by reason, the upstream connection is closed with it, and nothing of the bad message
// is forwarded; an upstream that breaks the protocol, sends too much or never finishes a turn
// costs the client a close (1014) and the turn its ending, never a hang or a leak; and a peer
// that does not read grows nothing here (backpressure both ways).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ModelRequestRecord } from '../../src/gateway/record.ts';
import { LocalLimits } from '../../src/limits/admission.ts';
import { eventually } from '../support/eventually.ts';
import { startGatewayInProcess, TEST_MODEL, type GatewayOptions, type InProcessListener } from '../support/harness.ts';
import { defaultResponses, startResponsesUpstream } from '../support/responses-upstream.ts';
import { serveResponsesSocket, type FakeSocketConnection } from '../support/responses-socket-upstream.ts';
import { socketSuite } from '../support/socket-suite.ts';
import { openSocket } from '../support/ws-client.ts';
import { clientText, closeBody, frame, OP } from '../support/ws-wire.ts';

const PLAIN: Record<string, unknown> = { model: TEST_MODEL, input: 'hi', store: false };
const MAX_MESSAGE = 1024 * 1024; // the harness's --max-request-body

const suite = socketSuite();

interface Spy {
  refused: string[];
  open: number;
}

async function gateway(extra: Partial<GatewayOptions> = {}, timeouts: { idleMs?: number } = {}): Promise<InProcessListener<ModelRequestRecord> & { spy: Spy }> {
  const spy: Spy = { refused: [], open: 0 };
  const sockets = { opened: () => void spy.open++, closed: () => void spy.open--, refused: (side: string, reason: string) => void spy.refused.push(`${side}:${reason}`) };
  const gw = await startGatewayInProcess({
    baseUrl: suite.upstream.baseUrl,
    pki: suite.pki,
    signingKey: suite.signingKey,
    provider: (p) => ({ ...p, config: { ...p.config, websocket: true } }),
    ...extra,
    deps: { sockets, socketCloseMs: 2000, timeouts: { connectMs: 5000, responseMs: 10_000, idleMs: timeouts.idleMs ?? 10_000, bodyIdleMs: 5000 }, ...extra.deps },
  });
  return Object.assign(gw, { spy });
}

const token = (instance: string): string => suite.token(instance);
const connectAs = (gw: InProcessListener<ModelRequestRecord>, instance: string) => suite.connect(gw.port, { authorization: `Bearer ${token(instance)}` });

const textFrames = (conn: FakeSocketConnection) => conn.frames.filter((f) => f.opcode === OP.text || f.opcode === OP.cont);
const signal = () => AbortSignal.timeout(60_000);

const HOSTILE: { name: string; bytes: () => Buffer; code: number; reason: string }[] = [
  { name: 'an unmasked frame', bytes: () => frame({ opcode: OP.text, payload: '{}' }), code: 1002, reason: 'unmasked_frame' },
  { name: 'a message over the body-size limit (refused at its head, before its payload)', bytes: () => frame({ opcode: OP.text, announce: MAX_MESSAGE + 1, mask: true }), code: 1009, reason: 'too_large' },
  { name: 'fragments that pass the limit together', bytes: () => Buffer.concat([frame({ opcode: OP.text, payload: 'x'.repeat(MAX_MESSAGE / 2 + 10), fin: false, mask: true }), frame({ opcode: OP.cont, payload: 'y'.repeat(MAX_MESSAGE / 2 + 10), mask: true })]), code: 1009, reason: 'too_large' },
  { name: 'a control frame over 125 bytes', bytes: () => frame({ opcode: OP.ping, payload: 'p'.repeat(126), mask: true }), code: 1002, reason: 'control_too_long' },
  { name: 'a fragmented control frame', bytes: () => frame({ opcode: OP.ping, payload: 'p', fin: false, mask: true }), code: 1002, reason: 'fragmented_control' },
  { name: 'a continuation with no start', bytes: () => frame({ opcode: OP.cont, payload: '{}', mask: true }), code: 1002, reason: 'continuation_without_start' },
  { name: 'a text message that is not UTF-8', bytes: () => frame({ opcode: OP.text, payload: Buffer.from([0x7b, 0xff, 0x7d]), mask: true }), code: 1007, reason: 'invalid_utf8' },
  { name: 'a close with a code no endpoint may send', bytes: () => frame({ opcode: OP.close, payload: closeBody(1005), mask: true }), code: 1002, reason: 'bad_close_frame' },
  { name: 'reserved bits (a compressed frame: permessage-deflate was never accepted)', bytes: () => frame({ opcode: OP.text, payload: '{}', rsv: 4, mask: true }), code: 1002, reason: 'reserved_bits' },
];

for (const h of HOSTILE) {
  test(`a hostile client: ${h.name} gets close ${h.code}, is counted as refused (client:${h.reason}), forwards nothing, and closes the upstream leg`, async () => {
    const gw = await gateway();
    try {
      const { client, conn } = await connectAs(gw, `hostile-${h.reason}`);
      client.send(h.bytes());
      assert.equal(await client.closeFrame(), h.code);
      await client.gone();
      await eventually('the upstream leg closed', () => conn.gone, signal());
      assert.equal(textFrames(conn).length, 0, 'nothing forwarded');
      assert.equal(conn.closedByClient, 1001, 'the gateway closed its upstream leg going away');
      assert.deepEqual(gw.spy.refused, [`client:${h.reason}`]);
      await eventually('the connection line', () => gw.logs.some((l) => l.event === 'websocket_closed'), signal());
      const line = gw.logs.find((l) => l.event === 'websocket_closed')!;
      assert.equal(line.reason, `client_${h.reason}`);
      assert.equal(gw.spy.open, 0);
    } finally {
      await gw.close();
    }
  });
}

test('a hostile client: a message after its close frame is not forwarded, and the close is answered with the same code', async () => {
  const gw = await gateway();
  try {
    const { client, conn } = await connectAs(gw, 'after-close');
    client.send(Buffer.concat([frame({ opcode: OP.close, payload: closeBody(4000, 'bye'), mask: true }), clientText(JSON.stringify({ type: 'response.create', ...PLAIN }))]));
    assert.equal(await client.closeFrame(), 4000);
    await client.gone();
    await eventually('the upstream leg closed', () => conn.gone, signal());
    assert.equal(textFrames(conn).length, 0);
    assert.equal(conn.closedByClient, 4000, 'the client\'s code went upstream');
    assert.equal(gw.records.all.length, 1, 'the handshake alone: no turn');
  } finally {
    await gw.close();
  }
});

test('a hostile client: a binary message is refused with an error event and counted (client:binary_message), the connection kept', async () => {
  const gw = await gateway();
  try {
    const { client, conn } = await connectAs(gw, 'binary');
    client.send(frame({ opcode: OP.binary, payload: Buffer.from([1, 2, 3]), mask: true }));
    const e = await client.nextEvent();
    assert.deepEqual([e.type, (e.error as { code: string }).code], ['error', 'unsupported_client_event']);
    assert.deepEqual(gw.spy.refused, ['client:binary_message']);
    client.sendTurn(PLAIN);
    assert.equal((await client.eventsUntil('response.completed')).at(-1)!.type, 'response.completed');
    assert.equal(textFrames(conn).length, 1);
    client.close();
    await client.gone();
  } finally {
    await gw.close();
  }
});

test('a flood of pings: every one answered with its pong (and relayed upstream), the connection usable after it', async () => {
  const gw = await gateway();
  try {
    const { client, conn } = await connectAs(gw, 'ping-flood');
    const pings = 3000;
    client.send(Buffer.concat(Array.from({ length: pings }, (_, i) => frame({ opcode: OP.ping, payload: `p${i}`.padEnd(100, '.'), mask: true }))));
    await client.until(() => (client.frames.filter((f) => f.opcode === OP.pong).length >= pings ? true : undefined), 'every pong');
    client.sendTurn(PLAIN);
    assert.equal((await client.eventsUntil('response.completed')).at(-1)!.type, 'response.completed');
    assert.ok(conn.frames.filter((f) => f.opcode === OP.ping).length >= pings, 'relayed upstream');
    client.close();
    await client.gone();
  } finally {
    await gw.close();
  }
});

test('a client that never reads grows nothing here: the gateway stops reading the upstream (which keeps the bytes), and the turn completes once the client reads', async (t) => {
  const events = 2000;
  const payload = 'x'.repeat(32 * 1024);
  suite.fake.script((turn) => {
    turn.conn.sendEvent({ type: 'response.created', response: { id: 'resp_big', status: 'in_progress', model: TEST_MODEL } });
    for (let i = 0; i < events; i++) turn.conn.sendEvent({ type: 'response.output_text.delta', delta: payload, sequence_number: i });
    turn.conn.sendEvent({ type: 'response.completed', response: { id: 'resp_big', status: 'completed', model: TEST_MODEL, usage: { input_tokens: 1, output_tokens: 1 } } });
  });
  const gw = await gateway();
  try {
    const { client, conn } = await connectAs(gw, 'never-reads');
    client.socket.pause();
    client.sendTurn(PLAIN);
    const total = events * (payload.length + 80);
    // The fake wrote everything into its socket; most of it must still be waiting there.
    await eventually('the upstream held back', () => conn.socket.writableLength > total / 2, t.signal);
    const read = conn.socket.bytesWritten - conn.socket.writableLength;
    assert.ok(read < 24 * 1024 * 1024, `the gateway took ${read} bytes of ${total} from the upstream while its client read nothing`);
    client.socket.resume();
    const got = await client.eventsUntil('response.completed');
    assert.equal(got.length, events + 2);
    client.close();
    await client.gone();
  } finally {
    await gw.close();
  }
});

// ---- a hostile upstream ----

const UPSTREAM_HOSTILE: { name: string; send: (conn: FakeSocketConnection) => void; reason: string; code: number }[] = [
  { name: 'a masked frame', send: (c) => c.write(frame({ opcode: OP.text, payload: '{"type":"response.created"}', mask: true })), reason: 'masked_frame', code: 1002 },
  { name: 'a message over the limit', send: (c) => c.write(frame({ opcode: OP.text, payload: `{"type":"response.output_text.delta","delta":"${'z'.repeat(MAX_MESSAGE)}"}` })), reason: 'too_large', code: 1009 },
  { name: 'text that is not UTF-8', send: (c) => c.write(frame({ opcode: OP.text, payload: Buffer.from([0x7b, 0xc0, 0x80, 0x7d]) })), reason: 'invalid_utf8', code: 1007 },
];

for (const h of UPSTREAM_HOSTILE) {
  test(`a hostile upstream: ${h.name} mid-turn is refused with ${h.code}, the client gets close 1014, and the turn is recorded cut (upstream) with its charge and its slot back`, async () => {
    suite.fake.script((turn) => h.send(turn.conn));
    const limits = new LocalLimits({ concurrent: 1, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 0, workflowBudgetUsdPerDay: 0 });
    const gw = await gateway({ limits });
    try {
      const { client, conn } = await connectAs(gw, `bad-upstream-${h.reason}`);
      client.sendTurn(PLAIN);
      assert.equal(await client.closeFrame(), 1014);
      await client.gone();
      await eventually('the upstream leg closed', () => conn.gone, signal());
      assert.ok(conn.frames.some((f) => f.opcode === OP.close && f.payload.readUInt16BE(0) === h.code), `the upstream was sent ${h.code}`);
      const rec = await gw.records.nth(2);
      assert.deepEqual([rec.method, rec.attempts, rec.error], ['WS', 1, 'protocol']);
      assert.deepEqual(gw.spy.refused, [`upstream:${h.reason}`]);
      assert.equal(limits.admit({ instanceId: `bad-upstream-${h.reason}`, workflow: 'w', runId: `run-bad-upstream-${h.reason}` }, 1, Date.now()).ok, true, 'the slot came back');
    } finally {
      await gw.close();
    }
  });
}

test('a hostile upstream that never completes a turn: cut at --upstream-idle-timeout as a stalled HTTP stream is (interrupted idle_timeout), charged, its slot back, the client closed with 1014', async () => {
  suite.fake.script((turn) => turn.conn.sendEvent({ type: 'response.created', response: { id: 'resp_stall', status: 'in_progress', model: TEST_MODEL } }));
  const limits = new LocalLimits({ concurrent: 1, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 0, workflowBudgetUsdPerDay: 0 });
  const gw = await gateway({ limits }, { idleMs: 1000 });
  try {
    const { client, conn } = await connectAs(gw, 'stall');
    client.sendTurn(PLAIN);
    assert.equal(await client.closeFrame(), 1014);
    await client.gone();
    await eventually('the upstream leg closed', () => conn.gone, signal());
    const rec = await gw.records.nth(2);
    assert.equal(rec.error, 'idle_timeout');
    // Cut after its first event reached the client (the usual case): a stream cut mid-answer;
    // before it (a machine slower than the timeout): an upstream that did not answer in time.
    const sawCreated = client.frames.some((f) => f.opcode === OP.text && f.payload.toString('utf8').includes('response.created'));
    assert.deepEqual([rec.status, rec.interrupted], sawCreated ? [200, 'idle_timeout'] : [502, null]);
    assert.ok(rec.charge_basis === 'estimate' || rec.charge_basis === 'worst_case', String(rec.charge_basis));
    assert.equal(limits.admit({ instanceId: 'stall', workflow: 'w', runId: 'run-stall' }, 1, Date.now()).ok, true, 'the slot came back');
    await eventually('the connection line', () => gw.logs.some((l) => l.event === 'websocket_closed'), signal());
    assert.equal(gw.logs.find((l) => l.event === 'websocket_closed')!.reason, 'upstream_idle');
  } finally {
    await gw.close();
  }
});

test('idle between turns: a connection with no response.create for --upstream-idle-timeout is closed with 1001 on both legs, its one line saying why', async () => {
  const gw = await gateway({}, { idleMs: 200 });
  try {
    const { client, conn } = await connectAs(gw, 'idle-between');
    assert.equal(await client.closeFrame(), 1001);
    await client.gone();
    await eventually('the upstream leg closed', () => conn.gone, signal());
    assert.equal(conn.closedByClient, 1001);
    await eventually('the connection line', () => gw.logs.some((l) => l.event === 'websocket_closed'), signal());
    const line = gw.logs.find((l) => l.event === 'websocket_closed')!;
    assert.deepEqual([line.reason, line.turns], ['idle', 0]);
    assert.equal(gw.records.all.length, 1, 'the handshake alone');
  } finally {
    await gw.close();
  }
});

test('an upstream that never answers the upgrade: the handshake is cut at --upstream-response-timeout and the client answered 504 upstream_timeout over HTTP, before any upgrade', async () => {
  const own = await startResponsesUpstream(suite.pki, defaultResponses);
  serveResponsesSocket(own.server, own.requests).hangUpgrades();
  const gw = await startGatewayInProcess({ baseUrl: own.baseUrl, pki: suite.pki, signingKey: suite.signingKey, provider: (p) => ({ ...p, config: { ...p.config, websocket: true } }), deps: { timeouts: { connectMs: 5000, responseMs: 300, idleMs: 10_000, bodyIdleMs: 5000 } } });
  try {
    const r = await openSocket(gw.port, '/v1/responses', { authorization: `Bearer ${token('hang')}` });
    assert.equal(r.status, 504);
    assert.match(r.body, /upstream_timeout/);
    const rec = await gw.records.nth(1);
    assert.deepEqual([rec.status, rec.error, rec.attempts], [504, 'response_timeout', 1]);
  } finally {
    await gw.close();
    await own.close();
  }
});
