// Charges the shared store could not take: a call that ends while the gateway cannot reach Redis
// (a partition, a failover) is charged once Redis answers again, and its concurrency slot given
// back; a charge whose answer was lost after Redis ran it is not charged twice. Against a real
// redis-server, behind a TCP relay the test can cut, and make lose one answer.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { startRedis, type RedisServer } from '../support/redis-server.ts';
import { eventually } from '../support/eventually.ts';
import { RespClient } from '../../src/store/resp.ts';
import { RedisLimits } from '../../src/limits/redis-store.ts';

/**
 * The gateway's client reconnects every 20 ms, not after its backoff (100 ms growing to 5 s while
 * the relay is cut): each test waits for the store to be seen back, and that comes as soon as the
 * relay is restored rather than up to 5 s later.
 */
const RECONNECT_MS = [20];

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.close();
});

/** A relay to Redis: `cut()` drops every connection and refuses new ones until `restore()`; `loseNextAnswer()` drops the connection instead of relaying Redis' next answer. */
async function startRelay(port: number) {
  let cut = false;
  let loseAnswer = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    if (cut) {
      client.destroy();
      return;
    }
    const upstream = connect(port, '127.0.0.1');
    for (const s of [client, upstream]) {
      // As the gateway's own client does: without it, Nagle's algorithm holds each small write
      // for the peer's delayed ACK, and a replayed backlog of 10,000 charges crawls.
      s.setNoDelay(true);
      sockets.add(s);
      s.on('error', () => {});
      s.once('close', () => (sockets.delete(s), client.destroy(), upstream.destroy()));
    }
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (loseAnswer) {
        loseAnswer = false;
        client.destroy();
        return;
      }
      client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    cut: () => {
      cut = true;
      for (const s of sockets) s.destroy();
    },
    restore: () => void (cut = false),
    loseNextAnswer: () => void (loseAnswer = true),
    close: () => new Promise((resolve) => (sockets.forEach((s) => s.destroy()), server.close(resolve))),
  };
}


test('limits in redis: a call that ends while the store is away is charged once it is back, and its slot given back; an answer lost after the charge ran is not charged twice (RedisLimits)', { timeout: 120_000 }, async (t) => {
  const relay = await startRelay(redis.port);
  let up = false;
  const client = new RespClient({ address: { host: '127.0.0.1', port: relay.port }, tls: false, password: undefined, onState: (isUp) => void (up = isUp), reconnectDelaysMs: RECONNECT_MS });
  const direct = new RespClient({ address: { host: '127.0.0.1', port: redis.port }, tls: false, password: undefined, onState: () => {} });
  const backlog: { pending: number; dropped: number; settled: number }[] = [];
  const policy = { concurrent: 2, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 100, workflowBudgetUsdPerDay: 0 };
  const limits = new RedisLimits(policy, client, 'closed', { onBacklog: (s) => backlog.push(s), replayEveryMs: 50 });
  const other = new RedisLimits(policy, direct, 'closed'); // another replica, which still reaches Redis
  const suffix = randomBytes(4).toString('hex');
  const who = { instanceId: `i-backlog-${suffix}`, workflow: 'w', runId: `r-backlog-${suffix}` };
  const spent = async () => Number((await direct.command(['GET', `lim:r:${who.runId}`])) ?? 0);
  try {
    await eventually('both connections up', () => up && direct.up, t.signal);
    const a = await limits.admit(who, 40, Date.now());
    const b = await limits.admit(who, 40, Date.now());
    assert.ok(a.ok && b.ok);

    relay.cut();
    await eventually('the store seen away', () => !up, t.signal);
    a.reservation.release({ tokens: 10, costUsd: 1 });
    b.reservation.release({ tokens: 10, costUsd: 2 });
    await eventually('both charges waiting', () => limits.unsettled === 2, t.signal);
    assert.deepEqual(backlog, [{ pending: 1, dropped: 0, settled: 0 }], 'the backlog is told when it begins');
    const held = await other.admit(who, 40, Date.now());
    assert.ok(!held.ok && held.kind === 'concurrency', 'meanwhile the two slots are still held in the store');

    relay.restore();
    await eventually('the backlog settled', () => backlog.length === 2, t.signal);
    assert.deepEqual(backlog[1], { pending: 0, dropped: 0, settled: 2 });
    assert.equal(await spent(), 3_000_000, 'both calls charged ($1 + $2, in micro-dollars)');
    const c = await other.admit(who, 40, Date.now());
    assert.ok(c.ok, 'the slots are back');

    // The charge runs in Redis, but its answer never arrives: the gateway keeps it and replays it;
    // the replay finds the reservation settled and charges nothing.
    const d = await limits.admit(who, 40, Date.now());
    assert.ok(d.ok);
    relay.loseNextAnswer();
    d.reservation.release({ tokens: 10, costUsd: 4 });
    await eventually('the lost answer replayed', () => backlog.length === 4, t.signal);
    assert.deepEqual(backlog[3], { pending: 0, dropped: 0, settled: 1 });
    assert.equal(await spent(), 7_000_000, 'charged once: $3 + $4, not $3 + $8');
    c.reservation.release({ tokens: 0, costUsd: 0 });
  } finally {
    client.close();
    direct.close();
    await relay.close();
  }
});

test('limits in redis: the backlog of charges is bounded: past 10,000 the oldest is dropped, told once when it first overflows, and counted when the rest are settled', { timeout: 120_000 }, async (t) => {
  const relay = await startRelay(redis.port);
  let up = false;
  const client = new RespClient({ address: { host: '127.0.0.1', port: relay.port }, tls: false, password: undefined, onState: (isUp) => void (up = isUp), reconnectDelaysMs: RECONNECT_MS });
  const backlog: { pending: number; dropped: number; settled: number }[] = [];
  const limits = new RedisLimits({ concurrent: 0, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 0, workflowBudgetUsdPerDay: 0 }, client, 'closed', { onBacklog: (s) => backlog.push(s), replayEveryMs: 50 });
  const who = { instanceId: `i-bound-${randomBytes(4).toString('hex')}`, workflow: 'w', runId: 'r-bound' };
  try {
    await eventually('the connection up', () => up, t.signal);
    const held = [];
    for (let i = 0; i < 10_001; i += 1000) {
      for (const a of await Promise.all(Array.from({ length: Math.min(1000, 10_001 - i) }, () => limits.admit(who, 4, Date.now())))) {
        assert.ok(a.ok);
        held.push(a.reservation);
      }
    }
    relay.cut();
    await eventually('the store seen away', () => !up, t.signal);
    for (const r of held) r.release({ tokens: 1, costUsd: 0 });
    await eventually('the 10,001st charge kept', () => backlog.length === 2, t.signal);
    assert.equal(limits.unsettled, 10_000, 'kept up to the bound');
    assert.deepEqual(backlog, [{ pending: 1, dropped: 0, settled: 0 }, { pending: 10_000, dropped: 1, settled: 0 }], 'told when it began and when it first overflowed, not once per charge');
    relay.restore();
    await eventually('the backlog settled', () => backlog.length === 3, t.signal);
    assert.deepEqual(backlog[2], { pending: 0, dropped: 1, settled: 10_000 });
  } finally {
    client.close();
    await relay.close();
  }
});
