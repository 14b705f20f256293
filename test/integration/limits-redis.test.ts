// Limits shared by replicas through a real redis-server: two gateways sharing one Redis hold
// one budget together; with Redis stopped, the failure policy applies (closed: 503 with
// Retry-After, open: calls go through), logged and counted; Redis back, the gateway recovers
// without a restart.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { eventually } from '../support/eventually.ts';
import { send } from '../support/http-client.ts';
import { defaultCompletion, startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { parseExposition } from '../support/prometheus.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { startRedis, type RedisServer } from '../support/redis-server.ts';
import { RespClient } from '../../src/store/resp.ts';
import { RedisLimits } from '../../src/limits/redis-store.ts';
import { LocalLimits } from '../../src/limits/admission.ts';
import { fuzzSeed, mulberry32 } from '../support/prng.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const SIGNING_KEY = randomBytes(32).toString('hex');
let pki: TestPki;
let upstream: ModelUpstream;
let redis: RedisServer;
let dir: string;
let a: ProxyProcess;
let b: ProxyProcess;
let open: ProxyProcess;

before(async () => {
  pki = makeTestPki();
  // Persistent (AOF), as production's must be: a restart here is an outage, not a store that lost its state.
  [upstream, redis] = await Promise.all([startModelUpstream(pki), startRedis(['--appendonly', 'yes'])]);
  dir = mkdtempSync(join(tmpdir(), 'limits-redis-'));
  writeFileSync(join(dir, 'prices.json'), JSON.stringify({ 'gpt-test': { input: 1000, output: 1000 } }));
  writeFileSync(join(dir, 'limits.json'), JSON.stringify({ perInstance: { concurrent: 4 }, perRun: { budgetUsd: 0.01 } }));
  const env = { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-x', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY, MODEL_PRICES_FILE: join(dir, 'prices.json') };
  const args = (failure: string) => ['--model-gateway-listen', '127.0.0.1:0', '--limits', join(dir, 'limits.json'), '--limits-store', `redis://127.0.0.1:${redis.port}`, '--limits-store-failure', failure];
  [a, b, open] = await Promise.all([startServe({ env, args: args('closed'), listeners: ['model'] }), startServe({ env, args: args('closed'), listeners: ['model'] }), startServe({ env, args: args('open'), listeners: ['model'] })]);
  await Promise.all([a, b, open].map((gw) => gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up')));
});

after(async () => {
  await Promise.all([a?.stop(), b?.stop(), open?.stop()]);
  await Promise.all([upstream?.close(), redis?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const mint = async (run: string) => (await runCommandInProcess(['mint-token', '--instance-id', `bot-${run}`, '--workflow', 'w', '--run-id', run], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY })).stdout.trim();
const chat = (gw: ProxyProcess, token: string) => send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });

test('limits in redis: two gateways sharing one redis-server hold one run budget together: spent through one, refused (insufficient_quota) through the other', async (t) => {
  const token = await mint('shared-run');
  assert.equal((await chat(a, token)).status, 200);
  // The charge is written to Redis once the answer is over: read it there, as the other gateway will.
  const client = new RespClient({ address: { host: '127.0.0.1', port: redis.port }, tls: false, password: undefined, onState: () => {} });
  let spent: unknown = null;
  try {
    while (!client.up) await new Promise((r) => setImmediate(r));
    while (spent === null) spent = await client.command(['GET', 'lim:r:shared-run']);
  } finally {
    client.close();
  }
  const refused = await chat(b, token);
  assert.equal(refused.status, 429, 'refused at once by the other gateway');
  assert.equal((JSON.parse(refused.body.toString()) as { error: { code: string } }).error.code, 'insufficient_quota');
  assert.match(refused.body.toString(), /this run's budget is spent: \$\d+\.\d\d of \$0\.01/);
  // Total spend: the one call admitted while the budget had room (the bound: calls in flight × the largest call).
  // The admitted call's line is written after its answer: wait for it.
  const chargedLines = () => [a, b].flatMap((gw) => gw.records().filter((r) => r.event === 'request' && r.run_id === 'shared-run' && r.status === 200));
  await eventually('the admitted call\'s line', () => chargedLines().length >= 1, t.signal);
  const charges = chargedLines().map((r) => Number(r.charged_usd));
  assert.equal(charges.length, 1);
  assert.equal(Number(spent) / 1e6, charges[0], 'Redis holds the spend in micro-dollars');
});

test('limits in redis: calls racing through two gateways overshoot a run budget by no more than the stated bound (calls in flight × the largest call); the store holds exactly what was charged', { timeout: 120_000 }, async (t) => {
  const token = await mint('race-run');
  // Four calls of the instance are held at the upstream at once (its concurrency limit, shared by
  // both gateways); the other four are refused by one limit or another before reaching it.
  const held: (() => void)[] = [];
  let allHeld!: () => void;
  const fourHeld = new Promise<void>((r) => (allHeld = r));
  upstream.script(...Array.from({ length: 4 }, () => (req: Parameters<Parameters<typeof upstream.script>[0]>[0], res: Parameters<Parameters<typeof upstream.script>[0]>[1], rec: Parameters<Parameters<typeof upstream.script>[0]>[2]) => {
    held.push(() => defaultCompletion(req, res, rec));
    if (held.length === 4) allHeld();
  }));
  const settled: Awaited<ReturnType<typeof chat>>[] = [];
  const calls = Array.from({ length: 8 }, (_, i) => chat(i % 2 === 0 ? a : b, token).then((r) => (settled.push(r), r)));
  await fourHeld;
  while (settled.length < 4) await new Promise((r) => setImmediate(r)); // the refused four have been answered
  for (const answer of held) answer();
  const answers = await Promise.all(calls);
  assert.deepEqual(answers.map((r) => r.status).sort(), [200, 200, 200, 200, 429, 429, 429, 429]);
  const client = new RespClient({ address: { host: '127.0.0.1', port: redis.port }, tls: false, password: undefined, onState: () => {} });
  const charges = () => [a, b].flatMap((gw) => gw.records().filter((r) => r.event === 'request' && r.run_id === 'race-run' && r.status === 200).map((r) => Number(r.charged_usd)));
  let spent = 0;
  try {
    while (!client.up) await new Promise((r) => setImmediate(r));
    // The four records and their charges land once each answer is over; the store must hold their sum exactly.
    const charged = () => (charges().length === 4 ? charges().reduce((x, y) => x + Math.round(y * 1e6), 0) : -1);
    await eventually('the store to hold the sum of the four records\' charges', async () => {
      if (spent === charged()) return true;
      spent = Number(await client.command(['GET', 'lim:r:race-run']));
      return false;
    }, t.signal, 1);
  } finally {
    client.close();
  }
  const largest = Math.max(...charges());
  assert.ok(spent / 1e6 > 0.01, 'the budget was passed: calls already in flight when it ran out still finish');
  assert.ok(spent / 1e6 <= 0.01 + 4 * largest, `spent $${spent / 1e6}: at most the budget ($0.01) + 4 calls in flight × $${largest}`);
  assert.equal((await chat(a, token)).status, 429, 'and from now on the run is refused');
  const metrics = parseExposition((await send(a.ports.metrics!, 'GET', '/metrics')).body.toString());
  for (const op of ['admit', 'charge']) {
    const count = metrics.find((m) => m.name === 'model_gateway_limits_store_seconds_count' && m.labels.op === op);
    assert.ok(count && count.value > 0, `the store's round trips are measured (${op})`);
  }
});

test('limits in redis: with redis-server stopped, closed refuses (503 with Retry-After: the token cannot be checked for revocation, nor the call admitted) and open lets calls through, both logged and counted; restarted, the gateway recovers without a restart', async () => {
  await redis.stop();
  const ups = a.records().filter((r) => r.event === 'limits_store' && r.state === 'up').length;
  try {
    await Promise.all([a, open].map((gw) => gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'down')));
    const closed = await chat(a, await mint('while-down-1'));
    assert.equal(closed.status, 503);
    assert.equal(closed.headers['retry-after'], '1');
    // The token is checked against the revocations in the same store before admission.
    assert.equal((JSON.parse(closed.body.toString()) as { error: { code: string } }).error.code, 'revocation_store_unavailable');
    assert.equal((await chat(open, await mint('while-down-2'))).status, 200, 'open: the call goes through, unlimited');
    const metrics = parseExposition((await send(a.ports.metrics!, 'GET', '/metrics')).body.toString());
    assert.equal(metrics.find((s) => s.name === 'model_gateway_limits_store_up')?.value, 0);
    assert.ok((metrics.find((s) => s.name === 'model_gateway_limits_store_errors_total')?.value ?? 0) >= 1);
  } finally {
    await redis.start();
  }
  await a.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up' && a.records().filter((x) => x.event === 'limits_store' && x.state === 'up').length > ups);
  assert.equal((await chat(a, await mint('after-restart'))).status, 200, 'recovered without a restart');
});

test('limits in redis: admission with the store unreachable follows the failure policy: closed refuses (store_unavailable, retry after 1 s), open admits without a limit (RedisLimits)', async () => {
  const policy = { concurrent: 1, requestsPerMinute: 1, tokensPerMinute: 0, runBudgetUsd: 0, workflowBudgetUsdPerDay: 0 };
  const client = new RespClient({ address: { host: '127.0.0.1', port: 1 }, tls: false, password: undefined, onState: () => {} }); // nothing listens on port 1
  const errors: string[] = [];
  try {
    const who = { instanceId: 'i-down', workflow: 'w', runId: 'r-down' };
    const closed = await new RedisLimits(policy, client, 'closed', { onError: (e) => errors.push(e) }).admit(who, 4, Date.now());
    assert.ok(!closed.ok && closed.kind === 'store_unavailable' && closed.retryAfterSec === 1);
    const open = new RedisLimits(policy, client, 'open', { onError: (e) => errors.push(e) });
    for (let i = 0; i < 3; i++) assert.ok((await open.admit(who, 4, Date.now())).ok, 'open: no limit applies while the store is away');
    assert.equal(errors.length, 4, 'each is reported (log line, metric)');
  } finally {
    client.close();
  }
});

test('limits in redis: the store\'s script gives the in-process verdicts, step by step (concurrency, per-minute calls and tokens, run and workflow budgets, lowered by the token)', async () => {
  const policy = { concurrent: 2, requestsPerMinute: 4, tokensPerMinute: 300, runBudgetUsd: 1, workflowBudgetUsdPerDay: 1.5 };
  const client = new RespClient({ address: { host: '127.0.0.1', port: redis.port }, tls: false, password: undefined, onState: () => {} });
  while (!client.up) await new Promise((r) => setImmediate(r));
  const shared = new RedisLimits(policy, client, 'closed');
  const local = new LocalLimits(policy);
  const suffix = randomBytes(4).toString('hex');
  const who = (run: string, lowered?: { concurrent?: number }) => ({ instanceId: `i-${run}-${suffix}`, workflow: `wf-${suffix}`, runId: `r-${run}-${suffix}`, lowered });
  const steps: [ReturnType<typeof who>, number, number, { tokens: number; costUsd: number } | null][] = [
    [who('a'), 400, 0, null], // admitted, held
    [who('a'), 400, 10, null], // admitted, held
    [who('a'), 40, 20, { tokens: 0, costUsd: 0 }], // concurrency
    [who('b', { concurrent: 1 }), 40, 30, null], // lowered to 1: admitted, held
    [who('b', { concurrent: 1 }), 40, 40, { tokens: 0, costUsd: 0 }], // concurrency (lowered)
    [who('c'), 40, 50, { tokens: 100, costUsd: 1.2 }], // admitted, spends past the run budget
    [who('c'), 40, 60, { tokens: 0, costUsd: 0 }], // run budget
    [who('d'), 40, 70, { tokens: 100, costUsd: 0.5 }], // admitted: the workflow's day reaches 1.7
    [who('e'), 40, 80, { tokens: 0, costUsd: 0 }], // workflow budget
  ];
  const other = (run: string) => ({ instanceId: `i-${run}-${suffix}`, workflow: `wf2-${suffix}`, runId: `r-${run}-${suffix}`, lowered: undefined });
  for (let i = 0; i < 4; i++) steps.push([other('f'), 4, 100 + i, { tokens: 1, costUsd: 0 }]); // four calls in the minute
  steps.push([other('f'), 4, 200, { tokens: 0, costUsd: 0 }]); // the fifth: requests_per_minute
  steps.push([other('g'), 800, 300, { tokens: 250, costUsd: 0 }]); // 250 tokens used
  steps.push([other('g'), 400, 400, { tokens: 0, costUsd: 0 }]); // 250 + 100 > 300: tokens_per_minute
  const kinds: [string, string][] = [];
  try {
    for (const [w, bytes, now, charge] of steps) {
      const [s, l] = [await shared.admit(w, bytes, now), local.admit(w, bytes, now)];
      kinds.push([s.ok ? 'ok' : s.kind, l.ok ? 'ok' : l.kind]);
      if (charge) {
        if (s.ok) s.reservation.release(charge);
        if (l.ok) l.reservation.release(charge);
        await client.command(['PING']); // the release went first on the one connection
      }
    }
  } finally {
    client.close();
  }
  assert.deepEqual(kinds.map(([s]) => s), ['ok', 'ok', 'concurrency', 'ok', 'concurrency', 'ok', 'run_budget', 'ok', 'workflow_budget', 'ok', 'ok', 'ok', 'ok', 'requests_per_minute', 'ok', 'tokens_per_minute']);
  assert.deepEqual(kinds.map(([s]) => s), kinds.map(([, l]) => l), 'the same verdicts as in process');
});

const DEFAULT_SEED = 20_261_124;
const SEED = fuzzSeed(DEFAULT_SEED);
/** One random series through both stores; with `holds`, calls hold money (their worst cases) and tokens lower the run budget anywhere from a micro-dollar to a million dollars. */
async function agreeOverSeries(holds: boolean): Promise<void> {
  const rng = mulberry32(SEED);
  // Global ceilings under the sum of the instances' own: every workload together meets them too.
  const policy = { concurrent: 4, requestsPerMinute: 5, tokensPerMinute: 2000, runBudgetUsd: 2, workflowBudgetUsdPerDay: 3, global: { concurrent: 7, requestsPerMinute: 9, tokensPerMinute: 3500, budgetUsdPerDay: 5 } };
  const client = new RespClient({ address: { host: '127.0.0.1', port: redis.port }, tls: false, password: undefined, onState: () => {} });
  while (!client.up) await new Promise((r) => setImmediate(r));
  // Leases longer than the series: a call held here lives as long as in process (leases are tested apart).
  const shared = new RedisLimits(policy, client, 'closed', { onError: (e) => assert.fail(e), leaseMs: 48 * 3_600_000 });
  const local = new LocalLimits(policy);
  const suffix = randomBytes(4).toString('hex');
  // The global keys are shared by every test on this server (and by both series): each series starts them afresh.
  const days = [0, 86_400_000].map((d) => new Date(1_800_000_000_000 - 3_600_000 + d).toISOString().slice(0, 10));
  await client.command(['DEL', 'lim:g:f', 'lim:g:w', 'lim:g:t', ...days.flatMap((d) => [`lim:g:d:${d}`, `lim:g:d:${d}:h`])]);
  const held: { s: { release(c: { tokens: number; costUsd: number }): void }; l: { release(c: { tokens: number; costUsd: number }): void } }[] = [];
  const differences: string[] = [];
  const seen = new Set<string>();
  let now = 1_800_000_000_000 - 3_600_000; // an hour before a UTC midnight: the workflow's day turns on the way
  const releaseOne = async () => {
    const [r] = held.splice(rng.int(held.length), 1);
    const charge = { tokens: rng.int(900), costUsd: rng.chance(0.5) ? 0 : rng.int(40) / 100 };
    r!.s.release(charge);
    r!.l.release(charge);
    await client.command(['PING']);
  };
  try {
    for (let step = 0; step < 400; step++) {
      now += rng.pick([0, 5, 500, 4000, 20_000, 61_000]);
      if (held.length > 0 && rng.chance(0.45)) await releaseOne();
      const n = rng.int(4);
      // Instance 3 has a run and workflow of its own and sends bursts of small calls that end at
      // once: it meets the calls-per-minute limit, where the others meet concurrency, tokens and money.
      const small = n === 3;
      const who = small
        ? { instanceId: `i3-${suffix}`, workflow: `wf-small-${suffix}`, runId: `r-small-${suffix}`, lowered: undefined }
        : { instanceId: `i${n}-${suffix}`, workflow: `wf${n % 2}-${suffix}`, runId: `r${rng.int(6)}-${suffix}`, lowered: rng.chance(0.2) ? { concurrent: 1, budgetUsd: holds ? rng.pick([1, 1e-7, 4e-7, 6e-7, 0.0000015, 0.29, 1e6]) : 1 } : undefined };
      for (let call = small ? rng.between(1, 7) : 1; call > 0; call--) {
        const bytes = small ? 4 : rng.pick([4, 400, 2000, 6000]);
        const hold = small || !holds ? 0 : rng.pick([0, 0, 0.05, 0.4, 1.5]);
        const [s, l] = [await shared.admit(who, bytes, now, hold), local.admit(who, bytes, now, hold)];
        const view = (a: typeof s) => (a.ok ? 'ok' : `${a.kind}${'retryAfterSec' in a ? ` after ${a.retryAfterSec}` : ''}`);
        if (view(s) !== view(l)) differences.push(`step ${step}: redis ${view(s)}, in process ${view(l)}`);
        seen.add(l.ok ? 'ok' : l.kind);
        if (s.ok && l.ok && small) {
          s.reservation.release({ tokens: 1, costUsd: 0 });
          l.reservation.release({ tokens: 1, costUsd: 0 });
          await client.command(['PING']);
        } else if (s.ok && l.ok) held.push({ s: s.reservation, l: l.reservation });
        else if (s.ok) s.reservation.release({ tokens: 0, costUsd: 0 });
        else if (l.ok) l.reservation.release({ tokens: 0, costUsd: 0 });
      }
    }
    while (held.length > 0) await releaseOne();
  } finally {
    client.close();
  }
  assert.deepEqual(differences, [], `seed ${SEED}: reproduce with FUZZ_SEED=${SEED}`);
  // The default seed's series reaches every verdict (so this test cannot pass by comparing only
  // admissions); another seed (FUZZ_SEED) is held to agreement alone.
  if (SEED === DEFAULT_SEED && !holds) assert.deepEqual([...seen].sort(), ['concurrency', 'global_budget', 'global_concurrency', 'global_requests_per_minute', 'global_tokens_per_minute', 'ok', 'requests_per_minute', 'run_budget', 'tokens_per_minute', 'workflow_budget'], 'the series reached every verdict');
  if (SEED === DEFAULT_SEED && holds) for (const kind of ['run_budget_held', 'workflow_budget_held', 'global_budget_held', 'run_budget']) assert.ok(seen.has(kind), `the series with money held reached ${kind}`);
  assert.equal(local.held().inFlight, 0);
}

test(`limits in redis: the script and the in-process store agree over a random series (held and late charges, calls sliding out of the window, days turning, global ceilings; seed ${SEED})`, async () => {
  await agreeOverSeries(false);
});

test(`limits in redis: the script and the in-process store agree over a random series with money held by calls in progress and run budgets from a micro-dollar to a million dollars, one rounding rule in both (budgetMicroUsd; seed ${SEED})`, async () => {
  await agreeOverSeries(true);
});
