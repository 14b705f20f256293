// A shared store that lost its state, against a real redis-server: restarted without persistence
// it comes back empty, its revocations and spend gone. The gateway finds it (the state marker
// it knew is gone), logs and counts it, and under --limits-store-failure closed refuses calls and
// treats tokens as unchecked until an operator confirms the store (confirm-store-reset); under open
// it says so and goes on. A store restarted with its state (AOF) is not a loss. Start-up warns
// about a store that does not persist its writes.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { recordFor } from '../support/gateway-replies.ts';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { parseExposition, sumOf } from '../support/prometheus.ts';
import { type LogRecord, type ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { startRedis, type RedisServer } from '../support/redis-server.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { RespClient } from '../../src/store/resp.ts';
import { RedisLimits } from '../../src/limits/redis-store.ts';
import { limitRefusal } from '../../src/limits/refusal.ts';
import { storeRevocations } from '../../src/auth/redis-revocations.ts';
import { StoreStateWatch, type StateChange } from '../../src/store/state-marker.ts';

const SIGNING_KEY = randomBytes(32).toString('hex');
let pki: TestPki;
let upstream: ModelUpstream;
let redis: RedisServer;
let dir: string;
let closed: ProxyProcess;
let open: ProxyProcess;

before(async () => {
  pki = makeTestPki();
  [upstream, redis] = await Promise.all([startModelUpstream(pki), startRedis()]); // no persistence: a restart empties it
  dir = mkdtempSync(join(tmpdir(), 'limits-store-state-'));
  writeFileSync(join(dir, 'limits.json'), JSON.stringify({ perInstance: { concurrent: 4 } }));
  const env = { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-x', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY };
  const args = (failure: string) => ['--model-gateway-listen', '127.0.0.1:0', '--limits', join(dir, 'limits.json'), '--limits-store', `redis://127.0.0.1:${redis.port}`, '--limits-store-failure', failure];
  [closed, open] = await Promise.all([startServe({ env, args: args('closed'), listeners: ['model'] }), startServe({ env, args: args('open'), listeners: ['model'] })]);
  await Promise.all([closed, open].map((gw) => gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up')));
});

after(async () => {
  await Promise.all([closed?.stop(), open?.stop()]);
  await Promise.all([upstream?.close(), redis?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const mint = async (run: string) => (await runCommandInProcess(['mint-token', '--instance-id', `bot-${run}`, '--workflow', 'w', '--run-id', run], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY })).stdout.trim();
const chat = (gw: ProxyProcess, token: string) => send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
const stateLost = async (gw: ProxyProcess) => parseExposition((await send(gw.ports.metrics!, 'GET', '/metrics')).body.toString()).find((s) => s.name === 'model_gateway_limits_store_state_lost_total')?.value;
const refusals = async (gw: ProxyProcess, reason: string) => sumOf(parseExposition((await send(gw.ports.metrics!, 'GET', '/metrics')).body.toString()), 'model_gateway_refusals_total', { reason });
const storeLines = (gw: ProxyProcess, state: string) => gw.records().filter((r: LogRecord) => r.event === 'limits_store' && r.state === state);

test('store settings: start-up warns that the store does not persist every write (appendonly no), naming the setting', async () => {
  const warning = await closed.waitForRecord((r) => r.event === 'warning' && /appendonly no/.test(String(r.message)), 'the AOF warning');
  assert.match(String(warning.message), /set appendonly yes/);
  assert.equal(closed.records().filter((r) => r.event === 'warning' && /maxmemory-policy/.test(String(r.message))).length, 0, 'noeviction is the default: nothing to say');
});

test('a store restarted empty is found to have lost its state: closed refuses calls (503 revocation_store_state_lost, naming confirm-store-reset, recorded and counted as such) and logs and counts the loss until confirm-store-reset; open logs it and goes on', async () => {
  const token = await mint('state-run');
  for (const gw of [closed, open]) assert.equal((await chat(gw, token)).status, 200, 'before the restart: admitted');
  assert.equal(await stateLost(closed), undefined, 'nothing lost yet (a counter shows once counted)');

  await redis.stop();
  await redis.start(); // without persistence: empty, the marker gone with the rest
  const lost = await closed.waitForRecord((r) => r.event === 'limits_store' && r.state === 'lost', 'the loss, logged');
  assert.equal(lost.failure_policy, 'closed');
  assert.match(String(lost.message), /lost its state.*refused.*until an operator runs confirm-store-reset/);
  // Tokens issued before the loss may have been revoked: until every one has expired (24 h and a minute by default).
  assert.equal(Date.parse(String(lost.until)) - Date.parse(String(lost.lost_at)), (86_400 + 60) * 1000);
  await closed.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up' && storeLines(closed, 'up').length === 2, 'connected again');
  const refused = await chat(closed, token);
  assert.equal(refused.status, 503, 'the store is up, but its state cannot be trusted');
  assert.equal(refused.headers['retry-after'], '1');
  // The real cause, not an outage: the store answers, and what ends it is the operator's confirmation.
  const error = (JSON.parse(refused.body.toString()) as { error: { code: string; message: string } }).error;
  assert.equal(error.code, 'revocation_store_state_lost', 'the token is unchecked: its revocation may be gone');
  assert.match(error.message, /lost its state \(restarted empty, flushed or evicting keys\).*confirm-store-reset --limits-store URL/);
  assert.doesNotMatch(error.message, /cannot be reached/);
  assert.equal((await recordFor(closed, String(refused.headers['x-request-id']))).error, 'revocation_store_state_lost');
  assert.equal((await chat(closed, await mint('state-run-new'))).status, 503, 'every call, not only those of the earlier run');
  assert.equal(await stateLost(closed), 1);
  assert.equal(await refusals(closed, 'revocation_store_state_lost'), 2, 'counted under its own reason');
  assert.equal(await refusals(closed, 'revocation_store_unavailable'), 0, 'not as an outage');

  const openLost = await open.waitForRecord((r) => r.event === 'limits_store' && r.state === 'lost', 'the loss, logged under open');
  assert.equal(openLost.failure_policy, 'open');
  assert.match(String(openLost.message), /calls go on/);
  assert.equal((await chat(open, token)).status, 200, 'open: logged, and calls go on');
  assert.equal(await stateLost(open), 1);

  const confirmed = await runCommandInProcess(['confirm-store-reset', '--limits-store', `redis://127.0.0.1:${redis.port}`]);
  assert.equal(confirmed.code, 0, confirmed.stderr);
  assert.match(confirmed.stdout, /^confirmed the store at 127\.0\.0\.1:\d+ \(it was marked as having lost its state at \d{4}-.*\): the gateways trust its state as it is now/);
  const trusted = await closed.waitForRecord((r) => r.event === 'limits_store' && r.state === 'trusted', 'trusted again');
  assert.equal(trusted.reason, 'confirmed');
  assert.equal((await chat(closed, token)).status, 200, 'confirmed: admitted again, without a restart');
  assert.equal(storeLines(closed, 'lost').length, 1, 'told once');
  assert.equal(await stateLost(closed), 1);
});

test('confirm-store-reset needs the shared store: without --limits-store it is a usage error', async () => {
  const none = await runCommandInProcess(['confirm-store-reset']);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /confirm-store-reset: give --limits-store redis:\/\/HOST:PORT/);
});

/** A client with the state marker checked on every connection, as the gateway opens it. */
function watchedClient(port: number) {
  const changes: StateChange[] = [];
  const watch = new StoreStateWatch({ maxTokenLifetimeSec: 3600, onChange: (c) => changes.push(c), onWarning: () => {} });
  let ups = 0;
  const client = new RespClient({ address: { host: '127.0.0.1', port }, tls: false, password: undefined, handshake: (command) => watch.onConnect(command), onState: (up) => void (up && ups++) });
  const connected = async (times: number) => {
    while (ups < times) await new Promise((r) => setTimeout(r, 10));
  };
  return { client, watch, changes, connected };
}

test('the marker is checked before a reconnected store carries a call: admission refused as store_state_lost and tokens state_lost (not unavailable: the store answers) under closed, through the hooks; open admits (RedisLimits, storeRevocations, StoreStateWatch)', async () => {
  const { client, watch, changes, connected } = watchedClient(redis.port);
  const policy = { concurrent: 2, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 0, workflowBudgetUsdPerDay: 0 };
  const hooks = { stateLost: () => watch.lost };
  const who = { instanceId: 'i-state', workflow: 'w', runId: 'r-state', tokenId: undefined };
  try {
    await connected(1);
    const limits = new RedisLimits(policy, client, 'closed', hooks);
    const first = await limits.admit(who, 4, Date.now());
    assert.ok(first.ok);
    first.reservation.release({ tokens: 1, costUsd: 0 });
    await redis.stop();
    await redis.start();
    await connected(2);
    assert.deepEqual(changes.map((c) => c.state), ['lost'], 'found by the handshake, before any call went');
    const refused = await limits.admit(who, 4, Date.now());
    assert.ok(!refused.ok && refused.kind === 'store_state_lost' && refused.retryAfterSec === 1);
    assert.match(refused.message, /lost its state.*confirm-store-reset --limits-store URL/);
    const told = limitRefusal(refused, 'openai');
    assert.deepEqual([told.error.code, told.error.status, told.headers], ['limits_store_state_lost', 503, { 'retry-after': '1' }]);
    assert.deepEqual(await storeRevocations(client, 'closed', () => {}, hooks.stateLost).verdict(who), { kind: 'state_lost' });
    assert.ok((await new RedisLimits(policy, client, 'open', hooks).admit(who, 4, Date.now())).ok, 'open: admitted');
    assert.deepEqual(await storeRevocations(client, 'open', () => {}, hooks.stateLost).verdict(who), { kind: 'ok' });
  } finally {
    client.close();
  }
});

test('a store that keeps its state across a restart (appendonly yes) keeps its marker: no loss; one flushed while connected is found at the next check (StoreStateWatch)', async () => {
  const durable = await startRedis(['--appendonly', 'yes']);
  const { client, watch, changes, connected } = watchedClient(durable.port);
  try {
    await connected(1);
    await durable.stop();
    await durable.start();
    await connected(2);
    assert.deepEqual([watch.lost, changes], [false, []]);
    // A FLUSHALL (or an eviction) drops the connection to no one: the periodic check finds it.
    await client.command(['FLUSHALL']);
    await watch.check((args) => client.command(args));
    assert.equal(watch.lost, true);
    assert.deepEqual(changes.map((c) => c.state), ['lost']);
  } finally {
    client.close();
    await durable.close();
  }
});
