// Every ending of a turn and of a Responses WebSocket connection, through the gateway in this
// process with its limits in Redis (the store replicas share): each checked for its record, its
// charge and its slot, as call-endings.test.ts checks an HTTP call's. And the policies that
// apply per turn over one connection's life: a budget that runs out between two turns, a
// concurrency limit across connections, a token revoked or expired mid-connection, the drain.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { composeVerifier, type TokenVerifier } from '../../src/auth/verifier.ts';
import type { ModelRequestRecord } from '../../src/gateway/record.ts';
import type { LimitsStore } from '../../src/limits/admission.ts';
import { parsePrices } from '../../src/limits/prices.ts';
import { RedisLimits } from '../../src/limits/redis-store.ts';
import { RespClient } from '../../src/store/resp.ts';
import { eventually } from '../support/eventually.ts';
import { startGatewayInProcess, TEST_MODEL, type GatewayOptions, type InProcessListener } from '../support/harness.ts';
import { startRedis, type RedisServer } from '../support/redis-server.ts';
import type { FakeSocketConnection, SocketTurn } from '../support/responses-socket-upstream.ts';
import { secretVerifier } from '../support/tokens.ts';
import { socketSuite } from '../support/socket-suite.ts';
import type { SocketClient } from '../support/ws-client.ts';

const PLAIN: Record<string, unknown> = { model: TEST_MODEL, input: 'hi', store: false };
const PRICES = parsePrices(JSON.stringify({ [TEST_MODEL]: { input: 1, output: 1 } }), 'prices');
const ONE_AT_A_TIME = { concurrent: 1, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 0, workflowBudgetUsdPerDay: 0 };

const suite = socketSuite();
let redis: RedisServer;
let store: RespClient;

before(async () => {
  redis = await startRedis();
  store = new RespClient({ address: { host: '127.0.0.1', port: redis.port }, tls: false, password: undefined, onState: () => {} });
  await eventually('Redis up', () => store.up, AbortSignal.timeout(60_000));
});
after(async () => {
  store.close();
  await redis.close();
});

const signal = () => AbortSignal.timeout(60_000);

function gateway(extra: Partial<GatewayOptions> = {}): Promise<InProcessListener<ModelRequestRecord>> {
  return startGatewayInProcess({ baseUrl: suite.upstream.baseUrl, pki: suite.pki, signingKey: suite.signingKey, prices: PRICES, provider: (p) => ({ ...p, config: { ...p.config, websocket: true } }), ...extra, deps: { socketCloseMs: 2000, ...extra.deps } });
}

const redisLimits = (policy: typeof ONE_AT_A_TIME) => new RedisLimits(policy, store, 'closed');

const token = (instance: string, run = `run-${instance}`, extra: Record<string, unknown> = {}): string => suite.token(instance, { run, extra });
const connect = (gw: InProcessListener<ModelRequestRecord>, bot: string) => suite.connect(gw.port, { authorization: `Bearer ${bot}` });

/** Whether the identity can be admitted now (its slot is free): admitted and at once given back. */
async function slotFree(limits: LimitsStore, instance: string): Promise<boolean> {
  const a = await limits.admit({ instanceId: instance, workflow: 'w', runId: `run-${instance}` }, 1, Date.now());
  if (a.ok) a.reservation.release({ tokens: 0, costUsd: 0 });
  return a.ok;
}

/** A turn the fake holds until `release` (after its response.created): the client's events stop mid-turn. */
function heldTurn(): { release: () => void; started: Promise<SocketTurn> } {
  let release!: () => void;
  let started!: (t: SocketTurn) => void;
  const gate = new Promise<void>((r) => (release = r));
  const startedP = new Promise<SocketTurn>((r) => (started = r));
  suite.fake.script((t) => {
    t.conn.sendEvent({ type: 'response.created', response: { id: `resp_held_${randomBytes(3).toString('hex')}`, status: 'in_progress', model: TEST_MODEL, usage: null } });
    t.conn.sendEvent({ type: 'response.output_text.delta', delta: 'partial answer' });
    started(t);
    void gate.then(() => t.answer());
  });
  return { release, started: startedP };
}

test('a budget that runs out between two turns of one connection (Redis): a price field it cannot count is refused, the first turn is charged from its usage, the second refused with the final 429 insufficient_quota error event Codex stops on, never forwarded', async () => {
  const limits = redisLimits({ ...ONE_AT_A_TIME, concurrent: 0, runBudgetUsd: 0.0005 });
  const gw = await gateway({ limits });
  const instance = `budget-${randomBytes(3).toString('hex')}`;
  try {
    const { client, conn } = await connect(gw, token(instance));
    // A price field the budget cannot count is refused before anything is spent.
    client.sendTurn({ ...PLAIN, service_tier: 'priority' });
    const unpriced = await client.nextEvent();
    assert.deepEqual([unpriced.type, unpriced.status, (unpriced.error as { code: string }).code], ['error', 400, 'price_not_counted']);
    client.sendTurn(PLAIN);
    assert.equal((await client.eventsUntil('response.completed')).at(-1)!.type, 'response.completed');
    const first = await gw.records.nth(3);
    assert.deepEqual([first.charge_basis, first.usage_complete], ['usage', true]);
    assert.ok(first.charged_usd! >= 0.0005, `charged ${first.charged_usd}`);
    // The charge lands in Redis just after the turn's end: a turn sent before it would be admitted
    // on what was spent before (a budget is passed by at most the calls in flight, rule 75).
    await eventually('the charge in Redis', async () => Number((await store.command(['GET', `lim:r:run-${instance}`])) ?? 0) > 0, signal());
    client.sendTurn(PLAIN);
    const refused = await client.nextEvent();
    assert.deepEqual([refused.type, refused.status, (refused.error as { type: string; code: string }).type, (refused.error as { code: string }).code], ['error', 429, 'insufficient_quota', 'insufficient_quota']);
    const second = await gw.records.nth(4);
    assert.deepEqual([second.status, second.limit, second.attempts, second.charge_basis], [429, 'run_budget', 0, null]);
    client.close();
    await client.gone();
    // Counted once the upstream leg closed behind everything sent on it: a forwarded refusal would be in.
    await eventually('the upstream leg closed', () => conn.gone, signal());
    assert.equal(conn.frames.filter((f) => f.opcode === 1).length, 1, 'the second turn never reached the upstream');
  } finally {
    await gw.close();
  }
});

test('concurrency across connections (Redis, one call at a time per instance): a turn on a second connection while the first connection\'s turn runs is refused 429 with Retry-After in its error event; once that turn ends, the next is admitted', async () => {
  const limits = redisLimits(ONE_AT_A_TIME);
  const gw = await gateway({ limits });
  const instance = `conc-${randomBytes(3).toString('hex')}`;
  try {
    const a = await connect(gw, token(instance));
    const b = await connect(gw, token(instance));
    const held = heldTurn();
    a.client.sendTurn(PLAIN);
    await held.started;
    b.client.sendTurn(PLAIN);
    const refused = await b.client.nextEvent();
    assert.deepEqual([refused.type, refused.status, (refused.error as { code: string }).code], ['error', 429, 'rate_limit_exceeded']);
    assert.deepEqual(Object.keys(refused.headers as object), ['retry-after']);
    assert.equal(Number(await store.command(['ZCARD', `lim:i:${instance}:f`])), 1, "the turn in progress holds the instance's one slot");
    held.release();
    await a.client.eventsUntil('response.completed');
    // The slot goes back to Redis just after the turn's end.
    await eventually('the slot given back', async () => Number(await store.command(['ZCARD', `lim:i:${instance}:f`])) === 0, signal());
    b.client.sendTurn(PLAIN);
    assert.equal((await b.client.eventsUntil('response.completed')).at(-1)!.type, 'response.completed');
    // Counted once b's admitted turn completed, so that a forwarded refusal would have arrived by now.
    assert.equal(b.conn.frames.filter((f) => f.opcode === 1).length, 1, "b's refused turn never reached the upstream, only its admitted one");
    for (const c of [a, b]) c.client.close();
    await Promise.all([a.client.gone(), b.client.gone()]);
  } finally {
    await gw.close();
  }
});

/** Every way a turn in progress can end, each leaving a record with how, a charge, and the slot free (Redis). */
const ENDINGS: { name: string; end: (h: { client: SocketClient; conn: FakeSocketConnection; gw: InProcessListener<ModelRequestRecord> }) => void | Promise<void>; interrupted: string; error: string; clientClose?: number }[] = [
  { name: 'the client closes (a close frame) mid-turn', end: ({ client }) => client.close(1000), interrupted: 'client', error: 'client_aborted' },
  { name: 'the client drops its connection mid-turn', end: ({ client }) => void client.socket.destroy(), interrupted: 'client', error: 'client_aborted' },
  { name: 'the upstream closes (a close frame) mid-turn', end: ({ conn }) => conn.close(1011), interrupted: 'upstream', error: 'reset', clientClose: 1014 },
  { name: 'the upstream drops its connection mid-turn', end: ({ conn }) => void conn.socket.destroy(), interrupted: 'upstream', error: 'reset', clientClose: 1014 },
  { name: 'a forced shutdown cuts the connection mid-turn', end: ({ gw }) => void gw.listener.cut(1000), interrupted: 'shutdown', error: 'shutdown' },
];

for (const e of ENDINGS) {
  test(`turn endings: ${e.name}: the turn is recorded interrupted (${e.interrupted}), charged as an HTTP stream cut the same way, its slot given back; the connection's one line is written`, async () => {
    const limits = redisLimits(ONE_AT_A_TIME);
    const gw = await gateway({ limits });
    const instance = `end-${e.interrupted}-${randomBytes(3).toString('hex')}`;
    try {
      const { client, conn } = await connect(gw, token(instance));
      const held = heldTurn();
      client.sendTurn(PLAIN);
      await held.started;
      await client.until(() => (client.frames.length >= 2 ? true : undefined), 'the first events');
      await e.end({ client, conn, gw });
      if (e.clientClose !== undefined) assert.equal(await client.closeFrame(), e.clientClose);
      const rec = await gw.records.nth(2);
      assert.deepEqual([rec.method, rec.status, rec.interrupted, rec.error, rec.attempts], ['WS', 200, e.interrupted, e.error, 1], JSON.stringify(rec));
      assert.equal(rec.charge_basis, 'estimate', 'a cut stream with output: at least what crossed');
      assert.ok(rec.charged_usd! > 0);
      await eventually('the slot given back', () => slotFree(limits, instance), signal());
      await eventually('the connection line', () => gw.logs.some((l) => l.event === 'websocket_closed'), signal());
      assert.equal(gw.records.all.length, 2, 'one record for the handshake, one for the turn');
      held.release();
    } finally {
      await gw.close();
    }
  });
}

test('turn endings: a turn the gateway refuses holds no slot and is charged nothing; a completed one is charged its usage; each recorded once', async () => {
  const limits = redisLimits(ONE_AT_A_TIME);
  const gw = await gateway({ limits });
  const instance = `end-refused-${randomBytes(3).toString('hex')}`;
  try {
    const { client } = await connect(gw, token(instance));
    client.sendTurn({ ...PLAIN, tools: [{ type: 'web_search' }] });
    assert.equal((await client.nextEvent()).type, 'error');
    client.sendTurn(PLAIN);
    await client.eventsUntil('response.completed');
    client.close();
    await client.gone();
    const [refused, done] = [await gw.records.nth(2), await gw.records.nth(3)];
    assert.deepEqual([refused.status, refused.error, refused.charge_basis], [400, 'tool_not_allowed', null]);
    assert.deepEqual([done.status, done.charge_basis, done.interrupted], [200, 'usage', null]);
    await eventually('the slot free', () => slotFree(limits, instance), signal());
    await eventually('the connection line', () => gw.logs.some((l) => l.event === 'websocket_closed'), signal());
    assert.equal(gw.records.all.length, 3);
  } finally {
    await gw.close();
  }
});

test('revocation mid-connection: a token revoked after a turn is refused at its next turn (the 401 error event, never forwarded) and the connection closed with 1008', async () => {
  let revoked = false;
  const gw = await gateway({ revoked: async () => (revoked ? { kind: 'revoked', reason: 'instance revoked' } : { kind: 'ok' }) });
  try {
    const { client, conn } = await connect(gw, token('revoked-mid'));
    client.sendTurn(PLAIN);
    await client.eventsUntil('response.completed');
    revoked = true;
    client.sendTurn(PLAIN);
    const e = await client.nextEvent();
    assert.deepEqual([e.type, e.status, (e.error as { code: string }).code], ['error', 401, 'invalid_bot_token']);
    assert.equal(await client.closeFrame(), 1008);
    await client.gone();
    await eventually('the upstream leg closed', () => conn.gone, signal());
    assert.equal(conn.frames.filter((f) => f.opcode === 1).length, 1);
    const rec = await gw.records.nth(3);
    assert.deepEqual([rec.status, rec.error, rec.attempts], [401, 'invalid_bot_token', 0]);
    await eventually('the connection line', () => gw.logs.some((l) => l.event === 'websocket_closed'), signal());
    assert.equal(gw.logs.find((l) => l.event === 'websocket_closed')!.reason, 'token_refused');
  } finally {
    await gw.close();
  }
});

test('identity expiry mid-connection: a token the verifier no longer accepts (expired) is refused at its next turn and the connection closed with 1008', async () => {
  let expired = false;
  const real = secretVerifier(suite.signingKey, 3600);
  const verifier: TokenVerifier = composeVerifier([{ name: 'expiring', verify: (kind, presented, now) => (expired ? { ok: false, reason: 'token expired' } : real.verify(kind, presented, now)) }]);
  const gw = await gateway({ deps: { verifier } });
  try {
    const { client } = await connect(gw, token('expiring'));
    client.sendTurn(PLAIN);
    await client.eventsUntil('response.completed');
    expired = true;
    client.sendTurn(PLAIN);
    const e = await client.nextEvent();
    assert.deepEqual([e.type, e.status], ['error', 401]);
    assert.match((e.error as { message: string }).message, /token expired/);
    assert.equal(await client.closeFrame(), 1008);
  } finally {
    await gw.close();
  }
});

test('the drain (SIGTERM): the turn in progress finishes within the grace, then both legs close with 1001; an idle connection closes with 1001 at once', async () => {
  const gw = await gateway();
  try {
    const busy = await connect(gw, token('drain-busy'));
    const idle = await connect(gw, token('drain-idle'));
    const held = heldTurn();
    busy.client.sendTurn(PLAIN);
    await held.started;
    const closing = gw.listener.close(30_000);
    assert.equal(await idle.client.closeFrame(), 1001, 'the idle connection goes at once');
    held.release();
    const events = await busy.client.eventsUntil('response.completed');
    assert.equal(events.at(-1)!.type, 'response.completed', 'the turn finished');
    assert.equal(await busy.client.closeFrame(), 1001);
    await closing;
    const turn = gw.records.all.find((r) => r.method === 'WS')!;
    assert.deepEqual([turn.status, turn.interrupted, turn.usage_complete], [200, null, true]);
    await eventually('both upstream legs closed', () => busy.conn.gone && idle.conn.gone, signal());
    assert.equal(busy.conn.closedByClient, 1001);
  } finally {
    await gw.close();
  }
});
