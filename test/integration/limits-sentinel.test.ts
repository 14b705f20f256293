// The limits store behind Redis Sentinel (--limits-store redis+sentinel://...): a master, its
// replica and three sentinels, real redis-server processes (test/support/redis-sentinel.ts). The
// gateway asks the sentinels for the master and follows a failover without a restart, whether
// the failover is asked for (SENTINEL FAILOVER, calls running through it) or the master is
// killed; budgets are still counted after it. The sentinels and the nodes have passwords of their
// own (--limits-store-sentinel-password-file, --limits-store-password-file).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { eventually } from '../support/eventually.ts';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { assertNoSecrets, type LogRecord, type ProxyProcess } from '../support/proxy-process.ts';
import { redisAsk, startSentinelSet, type SentinelSet } from '../support/redis-sentinel.ts';
import { startRedis } from '../support/redis-server.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { encodeCommand, RespReader } from '../../src/store/resp.ts';

const SIGNING_KEY = randomBytes(32).toString('hex');
const NODE_PASSWORD = `node-${randomBytes(8).toString('hex')}`;
const SENTINEL_PASSWORD = `sentinel-${randomBytes(8).toString('hex')}`;
let pki: TestPki;
let upstream: ModelUpstream;
let set: SentinelSet;
let dir: string;
let gw: ProxyProcess;

before(async () => {
  pki = makeTestPki();
  [upstream, set] = await Promise.all([
    startModelUpstream(pki),
    startSentinelSet({
      // The nodes' password: the replica, the sentinels and the gateway give it.
      nodeFlags: () => ['--requirepass', NODE_PASSWORD, '--masterauth', NODE_PASSWORD],
      sentinelConfig: ['sentinel auth-pass limits ' + NODE_PASSWORD, `requirepass ${SENTINEL_PASSWORD}`, `sentinel sentinel-pass ${SENTINEL_PASSWORD}`],
      ask: { password: NODE_PASSWORD },
      askSentinel: { password: SENTINEL_PASSWORD },
    }),
  ]);
  dir = mkdtempSync(join(tmpdir(), 'limits-sentinel-'));
  writeFileSync(join(dir, 'prices.json'), JSON.stringify({ 'gpt-test': { input: 1000, output: 1000 } }));
  // One call spends a run's budget: a run that has made one call is refused from then on, by whichever node is the master.
  writeFileSync(join(dir, 'limits.json'), JSON.stringify({ perInstance: { concurrent: 8 }, perRun: { budgetUsd: 0.01 } }));
  writeFileSync(join(dir, 'node-password'), `${NODE_PASSWORD}\n`);
  writeFileSync(join(dir, 'sentinel-password'), `${SENTINEL_PASSWORD}\n`);
  gw = await gateway(set.url());
});

after(async () => {
  await gw?.stop();
  await Promise.all([upstream?.close(), set?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function gateway(url: string, more: string[] = []): Promise<ProxyProcess> {
  const env = { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-x', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY, MODEL_PRICES_FILE: join(dir, 'prices.json') };
  const args = ['--model-gateway-listen', '127.0.0.1:0', '--limits', join(dir, 'limits.json'), '--limits-store', url, '--limits-store-password-file', join(dir, 'node-password'), '--limits-store-sentinel-password-file', join(dir, 'sentinel-password'), ...more];
  return startServe({ env, args, listeners: ['model'] });
}

const mint = async (run: string) => (await runCommandInProcess(['mint-token', '--instance-id', `bot-${run}`, '--workflow', 'w', '--run-id', run], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY })).stdout.trim();
const chat = async (run: string) => send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${await mint(run)}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
const errorCode = (body: Buffer) => (JSON.parse(body.toString()) as { error: { code: string } }).error.code;
/** The micro-dollars a run has spent, as node `port` holds them. */
const spentOn = async (port: number, run: string) => Number((await redisAsk(port, ['GET', `lim:r:${run}`], set.ask)) ?? 0);
/** What the gateway recorded as charged to a run's calls, in micro-dollars. */
const charged = (run: string) => gw.records().filter((r) => r.event === 'request' && r.run_id === run && r.status === 200).reduce((sum, r) => sum + Math.round(Number(r.charged_usd) * 1e6), 0);
const upOn = (port: number) => (r: Record<string, unknown>) => r.event === 'limits_store' && r.state === 'up' && r.node === `127.0.0.1:${port}`;

/** A run's call is charged (its line written), the master holds that charge, and so does every replica. */
async function chargedEverywhere(run: string, signal: AbortSignal): Promise<number> {
  await eventually(`the charge of ${run} in its record`, () => charged(run) > 0, signal);
  const want = charged(run);
  for (const node of set.nodes) await eventually(`node ${node.port} to hold the charge of ${run}`, async () => (await spentOn(node.port, run)) === want, signal);
  return want;
}

test('limits through sentinels: the gateway asks them for the master (with their password), checks it with ROLE, and logs the node it reached', async () => {
  const master = await set.masterPort();
  const up = await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up');
  assert.equal(up.node, `127.0.0.1:${master}`);
  assert.equal(up.store, `limits via ${set.sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}`);
  assert.equal((await chat('first')).status, 200);
  assertNoSecrets(gw.output(), [NODE_PASSWORD, SENTINEL_PASSWORD], 'the gateway\'s output');
});

test('store failover followed: a failover (SENTINEL FAILOVER) while calls run: the gateway follows the promoted replica without a restart; the spend recorded before it is counted after it; calls after it are admitted and charged on the new master', { timeout: 120_000 }, async (t) => {
  const old = await set.masterPort();
  const promoted = set.nodes.map((n) => n.port).find((p) => p !== old)!;
  await gw.waitForRecord(upOn(old));
  assert.equal((await chat('before-failover')).status, 200);
  const before = await chargedEverywhere('before-failover', t.signal);

  // Calls go on through the failover, each of a run of its own (one call each is within budget),
  // about one every 10 ms: in flight at every stage of it, without spending the suite's CPU on
  // thousands of calls (13 s of it). LIMITS_SENTINEL_BACK_TO_BACK=1 sends them back to back, as
  // the failover's cost in docs/operations.md was measured.
  const statuses: { status: number; code?: string }[] = [];
  let stop = false;
  const caller = (async () => {
    for (let i = 0; !stop; i++) {
      const r = await chat(`during-${i}`);
      statuses.push({ status: r.status, code: r.status === 200 ? undefined : errorCode(r.body) });
      if (process.env.LIMITS_SENTINEL_BACK_TO_BACK !== '1') await sleep(10);
    }
  })();
  await eventually('a call answered before the failover', () => statuses.length > 0, t.signal);
  await eventually('SENTINEL FAILOVER accepted', async () => (await redisAsk(set.sentinels[0]!.port, ['SENTINEL', 'FAILOVER', set.name], set.askSentinel)) === 'OK', t.signal, 100);
  await set.settled(promoted, t.signal);
  await gw.waitForRecord(upOn(promoted), 'the gateway up on the promoted replica');
  const seen = statuses.length;
  await eventually('a call answered after the gateway reconnected', () => statuses.length > seen + 1, t.signal);
  stop = true;
  await caller;

  // Every call was answered: served, or refused as the store's outage (the closed policy), never anything else.
  for (const s of statuses) assert.ok(s.status === 200 || (s.status === 503 && (s.code === 'limits_store_unavailable' || s.code === 'revocation_store_unavailable')), JSON.stringify(s));
  assert.equal(statuses.at(-1)!.status, 200, 'served again after the failover');
  // Before: its spend (on the replica when it was promoted) is the new master's, and still spends the run's budget.
  assert.equal(await spentOn(promoted, 'before-failover'), before);
  const refused = await chat('before-failover');
  assert.equal(refused.status, 429);
  assert.equal(errorCode(refused.body), 'insufficient_quota');
  // After: admitted and charged on the new master.
  assert.equal((await chat('after-failover')).status, 200);
  await eventually('the charge after the failover on the new master', async () => charged('after-failover') > 0 && (await spentOn(promoted, 'after-failover')) === charged('after-failover'), t.signal);
  assert.equal((await chat('after-failover')).status, 429, 'and it spends the run\'s budget there');
});

test('store failover followed: the master killed (SIGKILL): the sentinels promote its replica and the gateway reconnects to it without a restart; spend before and after is counted', { timeout: 120_000 }, async (t) => {
  const old = await set.masterPort();
  const dead = set.nodes.find((n) => n.port === old)!;
  const survivor = set.nodes.find((n) => n.port !== old)!;
  await gw.waitForRecord(upOn(old));
  assert.equal((await chat('before-kill')).status, 200);
  const before = await chargedEverywhere('before-kill', t.signal);
  // Only records written after the kill count (the earlier tests logged a `down` and `up`s of their own).
  const from = gw.records().length;
  const afterKill = (match: (r: LogRecord) => boolean) => (r: LogRecord) => match(r) && gw.records().indexOf(r) >= from;
  await dead.stop();
  await gw.waitForRecord(afterKill((r) => r.event === 'limits_store' && r.state === 'down'), 'the gateway losing the killed master');
  await set.settled(survivor.port, t.signal);
  await gw.waitForRecord(afterKill(upOn(survivor.port)), 'the gateway up on the promoted replica');
  assert.equal(await spentOn(survivor.port, 'before-kill'), before);
  assert.equal((await chat('before-kill')).status, 429, 'the spend before the kill still counts');
  assert.equal((await chat('after-kill')).status, 200);
  await eventually('the charge after the kill on the new master', async () => charged('after-kill') > 0 && (await spentOn(survivor.port, 'after-kill')) === charged('after-kill'), t.signal);
  // The killed node back: Sentinel makes it a replica of the new master (it is, for the next test).
  await dead.start();
  await set.settled(survivor.port, t.signal);
});

/** A sentinel of the test's own: it names `master()` and publishes +switch-master to its subscribers on demand. */
async function fakeSentinel(master: () => number): Promise<{ port: number; subscribed(): boolean; announce(from: number, to: number): void; close(): Promise<void> }> {
  const subscribers = new Set<Socket>();
  const server: Server = createServer((socket) => {
    const reader = new RespReader(); // commands are RESP arrays too
    socket.on('data', (chunk: Buffer) => {
      for (const command of reader.push(chunk) as string[][]) {
        if (command[0] === 'AUTH') socket.write('+OK\r\n');
        else if (command[0] === 'SUBSCRIBE') {
          subscribers.add(socket);
          socket.write('*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n');
        } else socket.write(encodeCommand(['127.0.0.1', String(master())]));
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => subscribers.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    subscribed: () => subscribers.size > 0,
    announce: (from, to) => {
      for (const s of subscribers) s.write(encodeCommand(['message', '+switch-master', `${set.name} 127.0.0.1 ${from} 127.0.0.1 ${to}`]));
    },
    close: () => new Promise<void>((resolve) => {
      for (const s of subscribers) s.destroy();
      server.close(() => resolve());
    }),
  };
}

test('store failover followed: when a sentinel announces the end of a failover (+switch-master), the gateway leaves the old master at once (it could take writes that the promoted node never gets) and reconnects to the one the sentinels now name', async (t) => {
  // Two masters of their own (no replication): which one the gateway writes to is plain to see.
  const [a, b] = await Promise.all([startRedis(['--requirepass', NODE_PASSWORD]), startRedis(['--requirepass', NODE_PASSWORD])]);
  t.after(() => Promise.all([a.close(), b.close()]));
  let named = a.port;
  const sentinel = await fakeSentinel(() => named);
  t.after(() => sentinel.close());
  const moving = await gateway(`redis+sentinel://127.0.0.1:${sentinel.port}/${set.name}`, ['--metrics-listen', 'off']);
  try {
    await moving.waitForRecord(upOn(a.port));
    await eventually('the gateway subscribed to +switch-master', () => sentinel.subscribed(), t.signal);
    // What replication would have given the promoted node: the store's state marker (else the gateway finds the store lost its state).
    await redisAsk(b.port, ['SET', 'cp:state', String(await redisAsk(a.port, ['GET', 'cp:state'], set.ask))], set.ask);
    named = b.port;
    sentinel.announce(a.port, b.port);
    const down = await moving.waitForRecord((r) => r.event === 'limits_store' && r.state === 'down');
    assert.equal(down.reason, `the sentinels moved the master to 127.0.0.1:${b.port} (+switch-master)`);
    await moving.waitForRecord(upOn(b.port), 'up on the node the sentinels now name');
    // A call's charge lands on the new master, none on the old one.
    const token = await mint('moved');
    const call = await send(moving.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
    assert.equal(call.status, 200);
    await eventually('the charge on the new master', async () => Number(await redisAsk(b.port, ['GET', 'lim:r:moved'], set.ask)) > 0, t.signal);
    assert.equal(await redisAsk(a.port, ['GET', 'lim:r:moved'], set.ask), null);
  } finally {
    await moving.stop();
  }
});

test('store failover followed: a node the sentinels name that says it is not the master (ROLE slave) is never used: the gateway stays down, saying so, and refuses calls (closed)', async (t) => {
  const master = await set.masterPort();
  const replica = set.nodes.find((n) => n.port !== master)!.port;
  // A sentinel whose answer is out of date: it names the replica.
  const liar = await fakeSentinel(() => replica);
  t.after(() => liar.close());
  const port = liar.port;
  const fooled = await gateway(`redis+sentinel://127.0.0.1:${port}/${set.name}`, ['--metrics-listen', 'off']);
  try {
    const down = await fooled.waitForRecord((r) => r.event === 'limits_store' && r.state === 'down');
    assert.equal(down.reason, `the limits store at 127.0.0.1:${replica} is not the master (ROLE slave): asking the sentinels again`);
    const token = await mint('fooled');
    const r = await send(fooled.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
    assert.equal(r.status, 503);
    assert.ok(!fooled.records().some((x) => x.event === 'limits_store' && x.state === 'up'), 'never up');
  } finally {
    await fooled.stop();
  }
});

test('limits through sentinels: sentinels that do not know the master\'s name, or refuse the password, are named in the reason the store is down', async () => {
  const wrong = join(dir, 'wrong-sentinel-password');
  writeFileSync(wrong, 'not-it\n');
  const [s0, s1] = set.sentinels;
  const sentinels = `127.0.0.1:${s0!.port},127.0.0.1:${s1!.port}`;
  for (const [master, passwordFile, why] of [
    ['nobody', join(dir, 'sentinel-password'), 'does not know nobody'],
    [set.name, wrong, 'it refused the user or password'],
  ] as const) {
    const lost = await startServe({
      env: { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-x', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY },
      args: ['--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off', '--limits', join(dir, 'limits.json'), '--limits-store', `redis+sentinel://${sentinels}/${master}`, '--limits-store-password-file', join(dir, 'node-password'), '--limits-store-sentinel-password-file', passwordFile],
      listeners: ['model'],
    });
    try {
      const down = await lost.waitForRecord((r) => r.event === 'limits_store' && r.state === 'down');
      assert.equal(down.reason, `no sentinel named the master of ${master} (127.0.0.1:${s0!.port}: ${why}; 127.0.0.1:${s1!.port}: ${why})`);
      assertNoSecrets(lost.output(), ['not-it', NODE_PASSWORD, SENTINEL_PASSWORD], 'the gateway\'s output');
    } finally {
      await lost.stop();
    }
  }
});
