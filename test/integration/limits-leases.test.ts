// Slots in Redis are leases: renewed while a call lives, lapsing within one lease when nobody
// renews them (a replica that died, an admission whose answer was lost), never held for an hour.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { RedisLimits } from '../../src/limits/redis-store.ts';
import { RespClient } from '../../src/store/resp.ts';
import { startRedis, type RedisServer } from '../support/redis-server.ts';
import { eventually } from '../support/eventually.ts';

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.close();
});

const ONE = { concurrent: 1, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 0, workflowBudgetUsdPerDay: 0 };

/** `reconnectDelaysMs`: the waits before each reconnect (RespOptions), default the client's backoff. */
async function client(port = redis.port, reconnectDelaysMs?: readonly number[]): Promise<RespClient> {
  const c = new RespClient({ address: { host: '127.0.0.1', port }, tls: false, password: undefined, onState: () => {}, reconnectDelaysMs });
  while (!c.up) await new Promise((r) => setImmediate(r));
  return c;
}

// The waits below have no deadline of their own (test/support/eventually.ts): each test's 30 s
// timeout is what tells a lease from an hour.
test('limits leases: a replica that dies holding a slot frees it within one lease, not an hour (RedisLimits)', { timeout: 30_000 }, async () => {
  const who = { instanceId: `dies-${randomBytes(4).toString('hex')}`, workflow: 'w', runId: 'r' };
  const dying = await client();
  const survivor = await client();
  const lease = 1500;
  try {
    // The store judges a lease by the clock the gateway passes with each admission (admit's nowMs,
    // Date.now() in production): the lease's end is checked on either side of its edge, the way
    // any later admission would meet it, rather than waited for.
    const t0 = Date.now();
    const first = await new RedisLimits(ONE, dying, 'closed', { leaseMs: lease }).admit(who, 4, t0);
    assert.ok(first.ok);
    dying.close(); // the replica is gone: nothing renews or releases its slot
    const other = new RedisLimits(ONE, survivor, 'closed', { leaseMs: lease });
    const refused = await other.admit(who, 4, t0 + lease - 1);
    assert.equal(refused.ok ? 'ok' : refused.kind, 'concurrency', 'the slot is held while its lease runs, to its last millisecond');
    assert.ok(Number(await survivor.command(['PTTL', `lim:i:${who.instanceId}:f`])) <= lease + 60_000, 'the slot set lives a lease (plus a minute), not an hour');
    const again = await other.admit(who, 4, t0 + lease);
    assert.ok(again.ok, 'the lapsed slot lets the instance in again, one lease after it was taken');
    again.reservation.release({ tokens: 0, costUsd: 0 });
  } finally {
    dying.close();
    survivor.close();
  }
});

test('limits leases: a call that lives longer than its lease keeps its slot, renewed while it lives, and gives it back at its end (RedisLimits)', { timeout: 30_000 }, async (t) => {
  const who = { instanceId: `lives-${randomBytes(4).toString('hex')}`, workflow: 'w', runId: 'r' };
  const c = await client();
  try {
    const limits = new RedisLimits(ONE, c, 'closed', { leaseMs: 600 });
    const held = await limits.admit(who, 4, Date.now());
    assert.ok(held.ok);
    await delay(2000); // more than three leases: only the renewals keep it
    const refused = await limits.admit(who, 4, Date.now());
    assert.equal(refused.ok ? 'ok' : refused.kind, 'concurrency', 'still held: renewed');
    // The key holding the slot is renewed with it (a lease and a minute), not left to expire a
    // minute after the admission that created it.
    assert.ok(Number(await c.command(['PTTL', `lim:i:${who.instanceId}:f`])) > 60_000, 'the slot set\'s own expiry is renewed');
    held.reservation.release({ tokens: 1, costUsd: 0 });
    await eventually('the released slot lets the instance in', async () => {
      const a = await limits.admit(who, 4, Date.now());
      if (a.ok) a.reservation.release({ tokens: 0, costUsd: 0 });
      return a.ok;
    }, t.signal, 20);
  } finally {
    c.close();
  }
});

/** A relay to Redis that, once armed, cuts the connection after forwarding the next command: the store runs it, its answer is lost. */
async function losingRelay(port: number): Promise<{ port: number; loseNext(): void; close(): Promise<void> }> {
  let lose = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((c) => {
    const store = connect(port, '127.0.0.1');
    sockets.add(c).add(store);
    let dropping = false;
    c.on('data', (chunk: Buffer) => {
      if (lose && chunk.includes('EVAL')) {
        lose = false;
        dropping = true;
      }
      store.write(chunk);
    });
    store.on('data', (chunk: Buffer) => {
      if (!dropping) return void (!c.destroyed && c.write(chunk));
      c.destroy(); // the script ran; its answer never reaches the gateway
    });
    const end = () => (c.destroy(), store.destroy());
    c.on('close', end).on('error', end);
    store.on('close', end).on('error', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as { port: number }).port, loseNext: () => void (lose = true), close: () => new Promise((r) => (sockets.forEach((s) => s.destroy()), server.close(() => r()))) };
}

test('limits leases: an admission whose answer is lost holds its slot no longer than one lease, and is given back as soon as the store answers again (RedisLimits)', { timeout: 30_000 }, async (t) => {
  const relay = await losingRelay(redis.port);
  // The store answers again as soon as the relay cut the connection (a reconnect after 20 ms, not
  // the 100 ms backoff), and the queued release is sent then (replayed every 50 ms, not each second).
  const c = await client(relay.port, [20]);
  const direct = await client();
  const who = { instanceId: `lost-${randomBytes(4).toString('hex')}`, workflow: 'w', runId: 'r' };
  try {
    const limits = new RedisLimits(ONE, c, 'closed', { leaseMs: 60_000, replayEveryMs: 50 });
    // Warm: the script is loaded, so the next admission is one EVALSHA.
    const warm = await limits.admit({ ...who, instanceId: `${who.instanceId}-warm` }, 4, Date.now());
    assert.ok(warm.ok);
    warm.reservation.release({ tokens: 0, costUsd: 0 });
    relay.loseNext();
    const lost = await limits.admit(who, 4, Date.now());
    assert.equal(lost.ok ? 'ok' : lost.kind, 'store_unavailable', 'the gateway never learnt it was admitted');
    assert.equal(await direct.command(['ZCARD', `lim:i:${who.instanceId}:f`]), 1, 'the script ran: a slot is held in Redis');
    // The lease here is a minute: the slot comes back before it, by the release queued for the lost answer.
    await eventually('the lost admission\'s slot is given back', async () => (await direct.command(['ZCARD', `lim:i:${who.instanceId}:f`])) === 0, t.signal, 20);
    while (!c.up) await delay(20);
    const next = await limits.admit(who, 4, Date.now());
    assert.ok(next.ok, 'the instance is admitted again');
    next.reservation.release({ tokens: 0, costUsd: 0 });
  } finally {
    c.close();
    direct.close();
    await relay.close();
  }
});

test('limits keys: an id ending in a key suffix (run "r:h", instance "i:f") never names another run\'s or instance\'s keys in Redis (limitsKeys)', { timeout: 30_000 }, async () => {
  const c = await client();
  const suffix = randomBytes(4).toString('hex');
  try {
    const errors: string[] = [];
    const limits = new RedisLimits({ ...ONE, concurrent: 0, runBudgetUsd: 1 }, c, 'closed', { onError: (e) => void errors.push(e) });
    const crafted = await limits.admit({ instanceId: `i-${suffix}:f`, workflow: 'w', runId: `victim-${suffix}:h` }, 4, Date.now(), 0.5);
    assert.ok(crafted.ok);
    crafted.reservation.release({ tokens: 1, costUsd: 0.9 });
    await c.command(['PING']);
    const victim = await limits.admit({ instanceId: `i-${suffix}`, workflow: 'w', runId: `victim-${suffix}` }, 4, Date.now(), 0.5);
    assert.ok(victim.ok, `the victim run is admitted: ${victim.ok ? '' : victim.message}`);
    victim.reservation.release({ tokens: 1, costUsd: 0 });
    await c.command(['PING']); // the charge went first on the one connection
    assert.deepEqual(errors, [], 'no script met a key of another type (WRONGTYPE)');
  } finally {
    c.close();
  }
});
