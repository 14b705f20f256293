// A replica whose shared store is away: readiness (/healthz) answers 503 once the store has been
// unreachable for --limits-store-unready-after, on every listener (the metrics listener is the
// one Kubernetes probes), so that a replica that admits nothing leaves the load balancer; and 200
// again as soon as the store is back. Under the open failure policy calls go on without the
// store, and readiness ignores it. And a store node that a failover turned into a replica
// (READONLY to a write): the connection is dropped, a charge it refused waits and is applied once
// the node is the master again, and a node that says it is a replica is not used meanwhile.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { eventually } from '../support/eventually.ts';
import { send } from '../support/http-client.ts';
import { defaultCompletion, startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { redisAsk } from '../support/redis-sentinel.ts';
import { startRedis, type RedisServer } from '../support/redis-server.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const SIGNING_KEY = randomBytes(32).toString('hex');
const GIT_KEY = randomBytes(32).toString('hex');
let pki: TestPki;
let upstream: ModelUpstream;
let redis: RedisServer;
let dir: string;

before(async () => {
  pki = makeTestPki();
  // Persistent (AOF): a restart here is an outage, not a store that lost its state.
  [upstream, redis] = await Promise.all([startModelUpstream(pki), startRedis(['--appendonly', 'yes'])]);
  dir = mkdtempSync(join(tmpdir(), 'limits-store-readiness-'));
  writeFileSync(join(dir, 'prices.json'), JSON.stringify({ 'gpt-test': { input: 1000, output: 1000 } }));
  writeFileSync(join(dir, 'limits.json'), JSON.stringify({ perInstance: { concurrent: 4 }, perRun: { budgetUsd: 1 } }));
});

after(async () => {
  await Promise.all([upstream?.close(), redis?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function gateway(port: number, more: string[]): Promise<ProxyProcess> {
  return startServe({
    env: { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-x', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY, MODEL_PRICES_FILE: join(dir, 'prices.json'), GIT_AUTH_ENABLED: 'true', GIT_PROXY_SIGNING_KEY: GIT_KEY },
    args: ['--git-auth-listen', '127.0.0.1:0', '--model-gateway-listen', '127.0.0.1:0', '--limits', join(dir, 'limits.json'), '--limits-store', `redis://127.0.0.1:${port}`, ...more],
    listeners: ['git', 'model'],
  });
}

const mint = async (run: string) => (await runCommandInProcess(['mint-token', '--instance-id', `bot-${run}`, '--workflow', 'w', '--run-id', run], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY })).stdout.trim();
const chat = async (gw: ProxyProcess, run: string) => send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${await mint(run)}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
/** /healthz of every listener: its status and body, by listener. */
async function health(gw: ProxyProcess): Promise<Record<string, { status: number; body: string }>> {
  const out: Record<string, { status: number; body: string }> = {};
  for (const listener of ['git', 'model', 'metrics']) {
    const r = await send(gw.ports[listener]!, 'GET', '/healthz');
    out[listener] = { status: r.status, body: r.body.toString() };
  }
  return out;
}
const statuses = async (gw: ProxyProcess) => Object.values(await health(gw)).map((h) => h.status);

test('unreachable store leaves the load balancer: the store unreachable past --limits-store-unready-after makes /healthz answer 503 on every listener, naming the store and the flag; within the grace, or under the open policy, it stays 200; back, 200 again without a restart', { timeout: 120_000 }, async (t) => {
  const [quick, patient, open] = await Promise.all([
    gateway(redis.port, ['--limits-store-unready-after', '200ms']),
    gateway(redis.port, ['--limits-store-unready-after', '1h']),
    gateway(redis.port, ['--limits-store-unready-after', '200ms', '--limits-store-failure', 'open']),
  ]);
  t.after(() => Promise.all([quick.stop(), patient.stop(), open.stop()]));
  const all = [quick, patient, open];
  await Promise.all(all.map((gw) => gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up')));
  for (const gw of all) assert.deepEqual(await statuses(gw), [200, 200, 200], 'ready while the store is up');
  await redis.stop();
  try {
    await Promise.all(all.map((gw) => gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'down')));
    let last: Record<string, { status: number; body: string }> = {};
    await eventually('/healthz 503 on every listener of the gateway with a 200 ms grace', async () => Object.values((last = await health(quick))).every((h) => h.status === 503), t.signal, 20, () => JSON.stringify(last));
    for (const h of Object.values(last)) assert.match(h.body, /^not ready: the limits store has been unreachable for \d+ s \(--limits-store-unready-after 0\.2 s\): model calls and the tokens it checks are refused \(503\) until it is back/);
    assert.deepEqual(await statuses(patient), [200, 200, 200], 'within its grace (an hour): still ready');
    assert.deepEqual(await statuses(open), [200, 200, 200], 'open: calls go on without the store, so the replica stays in');
    assert.equal((await chat(open, 'open-run')).status, 200);
  } finally {
    await redis.start();
  }
  await eventually('/healthz 200 again on every listener', async () => (await statuses(quick)).every((s) => s === 200), t.signal, 20);
  assert.equal((await chat(quick, 'back')).status, 200);
});

test('unreachable store leaves the load balancer: a store never reached since start-up counts from start-up (a replica started while Redis is away stays out of the load balancer)', async (t) => {
  const gw = await gateway(1, ['--limits-store-unready-after', '100ms']); // nothing listens on port 1
  t.after(() => gw.stop());
  await eventually('/healthz 503 on the metrics listener', async () => (await send(gw.ports.metrics!, 'GET', '/healthz')).status === 503, t.signal, 20);
  assert.ok(!gw.records().some((r) => r.event === 'limits_store' && r.state === 'up'));
});

test('store failover followed: a store node turned replica (READONLY): the charge it refused waits, the connection is dropped, the node is not used while it says it is a replica (ROLE, logged once), and once it is the master again the charge is applied without a restart', { timeout: 120_000 }, async (t) => {
  // A second node with the same data, to make the first one a replica of (as a failover would).
  const other = await startRedis(['--replicaof', '127.0.0.1', String(redis.port)]);
  t.after(() => other.close());
  const gw = await gateway(redis.port, ['--metrics-listen', 'off']);
  t.after(() => gw.stop());
  await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up');
  // One call held at the upstream while the node is demoted: its charge comes after.
  let release!: () => void;
  const held = new Promise<void>((resolve) => upstream.script((req, res, rec) => {
    release = () => defaultCompletion(req, res, rec);
    resolve();
  }));
  const call = chat(gw, 'demoted');
  await held;
  await eventually('the other node in sync', async () => String(await redisAsk(other.port, ['INFO', 'replication'])).includes('master_link_status:up'), t.signal, 20);
  assert.equal(await redisAsk(other.port, ['REPLICAOF', 'NO', 'ONE']), 'OK');
  assert.equal(await redisAsk(redis.port, ['REPLICAOF', '127.0.0.1', String(other.port)]), 'OK');
  release();
  assert.equal((await call).status, 200);
  const down = await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'down');
  assert.equal(down.reason, 'the limits store answered READONLY: it is a replica now');
  await gw.waitForRecord((r) => r.event === 'limits_charges' && r.state === 'waiting');
  const replica = await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'down' && String(r.reason).includes('ROLE'));
  assert.equal(replica.reason, `the limits store at 127.0.0.1:${redis.port} is not the master (ROLE slave)`);
  assert.equal((await chat(gw, 'while-replica')).status, 503, 'refused while the node is a replica (closed)');
  const downs = gw.records().filter((r) => r.event === 'limits_store' && r.state === 'down').length;
  // The node the master again: the gateway comes back to it and the waiting charge is applied.
  assert.equal(await redisAsk(redis.port, ['REPLICAOF', 'NO', 'ONE']), 'OK');
  await gw.waitForRecord((r) => r.event === 'limits_charges' && r.state === 'settled');
  const charged = gw.records().find((r) => r.event === 'request' && r.run_id === 'demoted')!;
  assert.equal(Number(await redisAsk(redis.port, ['GET', 'lim:r:demoted'])), Math.round(Number(charged.charged_usd) * 1e6));
  assert.equal(gw.records().filter((r) => r.event === 'limits_store' && r.state === 'down').length, downs, 'the replica\'s refusal told once, not once per retry');
});
