// Limits per workload: the file, the admission verdict, and the in-process store's accounting
// (a slot is given back exactly once, money is charged to the run and the workflow's day).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { admissionVerdict, effectivePolicy, estimateTokens, LocalLimits, toMicroUsd } from '../../src/limits/admission.ts';
import { parseLimitsFile, unpricedWarning } from '../../src/limits/policy.ts';

const POLICY = { concurrent: 2, requestsPerMinute: 3, tokensPerMinute: 1000, runBudgetUsd: 1, workflowBudgetUsdPerDay: 10 };
const IDLE = { inFlight: 0, requestsLastMinute: 0, tokensLastMinute: 0, runSpentUsd: 0, workflowSpentUsdToday: 0 };
const WHO = { instanceId: 'bot-1', workflow: 'triage', runId: 'run-1' };

test('limits file: every field is read; an unknown one or a negative value stops start-up naming it (parseLimitsFile)', () => {
  assert.deepEqual(parseLimitsFile('{"perInstance":{"concurrent":4,"requestsPerMinute":60,"tokensPerMinute":400000},"perRun":{"budgetUsd":5},"perWorkflow":{"budgetUsdPerDay":200}}', 'limits.json'), { concurrent: 4, requestsPerMinute: 60, tokensPerMinute: 400000, runBudgetUsd: 5, workflowBudgetUsdPerDay: 200 });
  assert.deepEqual(parseLimitsFile('{}', 'l.json'), { concurrent: 0, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 0, workflowBudgetUsdPerDay: 0 });
  assert.throws(() => parseLimitsFile('{"perInstance":{"concurent":4}}', 'l.json'), /^Error: l\.json: perInstance\.concurent: unknown field/);
  assert.throws(() => parseLimitsFile('{"perRun":{"budgetUsd":-1}}', 'l.json'), /perRun\.budgetUsd: must be a number ≥ 0/);
  assert.throws(() => parseLimitsFile('{"perInstance":{"concurrent":1.5}}', 'l.json'), /perInstance\.concurrent: must be a whole number/);
  assert.throws(() => parseLimitsFile('{"perTeam":{}}', 'l.json'), /perTeam: unknown field/);
});

test('limits file: a per-instance or per-run limit may be {"default", "max"} (a token may ask up to max), and global ceilings cover every workload together (parseLimitsFile)', () => {
  const policy = parseLimitsFile('{"perInstance":{"concurrent":{"default":2,"max":8},"requestsPerMinute":60},"perRun":{"budgetUsd":{"default":5,"max":50}},"global":{"concurrent":100,"tokensPerMinute":2000000,"budgetUsdPerDay":1000}}', 'l.json');
  assert.deepEqual(policy, {
    concurrent: 2,
    requestsPerMinute: 60,
    tokensPerMinute: 0,
    runBudgetUsd: 5,
    workflowBudgetUsdPerDay: 0,
    ceilings: { concurrent: 8, runBudgetUsd: 50 },
    global: { concurrent: 100, requestsPerMinute: 0, tokensPerMinute: 2000000, budgetUsdPerDay: 1000 },
  });
  assert.throws(() => parseLimitsFile('{"perRun":{"budgetUsd":{"default":10,"max":5}}}', 'l.json'), /perRun\.budgetUsd: default \(10\) must not be above max \(5\)/);
  assert.throws(() => parseLimitsFile('{"perInstance":{"concurrent":{"default":0,"max":5}}}', 'l.json'), /default \(0: no limit\) must not be above max/);
  assert.throws(() => parseLimitsFile('{"perInstance":{"concurrent":{"default":1,"ceiling":5}}}', 'l.json'), /perInstance\.concurrent\.ceiling: unknown field/);
  assert.throws(() => parseLimitsFile('{"perWorkflow":{"budgetUsdPerDay":{"default":1,"max":2}}}', 'l.json'), /perWorkflow\.budgetUsdPerDay: must be a number/);
  assert.throws(() => parseLimitsFile('{"global":{"budgetUsd":1}}', 'l.json'), /global\.budgetUsd: unknown field/);
});

test('limits: global ceilings refuse a call when every workload together is at them: calls in progress, per minute, tokens, the day\'s money (admissionVerdict, LocalLimits)', () => {
  const global = { concurrent: 2, requestsPerMinute: 3, tokensPerMinute: 0, budgetUsdPerDay: 1 };
  const limits = new LocalLimits({ concurrent: 0, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 0, workflowBudgetUsdPerDay: 0, global });
  const a = limits.admit({ instanceId: 'a', workflow: 'w1', runId: 'r1' }, 4, 0);
  const b = limits.admit({ instanceId: 'b', workflow: 'w2', runId: 'r2' }, 4, 1);
  assert.ok(a.ok && b.ok);
  const c = limits.admit({ instanceId: 'c', workflow: 'w3', runId: 'r3' }, 4, 2);
  assert.ok(!c.ok && c.kind === 'global_concurrency' && 'retryAfterSec' in c && /all workloads together already have 2 model calls in progress, the gateway's global limit/.test(c.message), JSON.stringify(c));
  a.reservation.release({ tokens: 1, costUsd: 0.4 });
  b.reservation.release({ tokens: 1, costUsd: 0 });
  const d = limits.admit({ instanceId: 'd', workflow: 'w4', runId: 'r4' }, 4, 3);
  assert.ok(d.ok, 'a slot came back');
  d.reservation.release({ tokens: 1, costUsd: 0 });
  const e = limits.admit({ instanceId: 'e', workflow: 'w5', runId: 'r5' }, 4, 10_000);
  assert.ok(!e.ok && e.kind === 'global_requests_per_minute' && 'retryAfterSec' in e && e.retryAfterSec === 50, JSON.stringify(e));
  const f = limits.admit({ instanceId: 'f', workflow: 'w6', runId: 'r6' }, 4, 60_000);
  assert.ok(f.ok);
  f.reservation.release({ tokens: 1, costUsd: 0.6 });
  const g = limits.admit({ instanceId: 'g', workflow: 'w7', runId: 'r7' }, 4, 60_001);
  assert.ok(!g.ok && g.kind === 'global_budget' && !('retryAfterSec' in g) && /the gateway's budget for today \(UTC\), shared by every workload, is spent: \$1\.00 of \$1\.00/.test(g.message), JSON.stringify(g));
  assert.ok(limits.admit({ instanceId: 'h', workflow: 'w8', runId: 'r8' }, 4, 86_400_000).ok, 'a new UTC day');
});

test('limits: a spent budget is final and named with the amounts; rate and concurrency limits are transient with a Retry-After (admissionVerdict)', () => {
  assert.deepEqual(admissionVerdict(POLICY, IDLE, 10, 0), { ok: true });
  const run = admissionVerdict(POLICY, { ...IDLE, runSpentUsd: 1.2 }, 10, 0);
  assert.ok(!run.ok && run.kind === 'run_budget' && !('retryAfterSec' in run) && /\$1\.20 of \$1\.00/.test(run.message));
  const wf = admissionVerdict(POLICY, { ...IDLE, workflowSpentUsdToday: 10 }, 10, 0);
  assert.ok(!wf.ok && wf.kind === 'workflow_budget');
  const busy = admissionVerdict(POLICY, { ...IDLE, inFlight: 2 }, 10, 0);
  assert.ok(!busy.ok && busy.kind === 'concurrency' && 'retryAfterSec' in busy && busy.retryAfterSec === 1);
  const rpm = admissionVerdict(POLICY, { ...IDLE, requestsLastMinute: 3 }, 10, 45_000);
  assert.ok(!rpm.ok && rpm.kind === 'requests_per_minute' && 'retryAfterSec' in rpm && rpm.retryAfterSec === 15, JSON.stringify(rpm));
  const tpm = admissionVerdict(POLICY, { ...IDLE, tokensLastMinute: 900 }, 200, 0);
  assert.ok(!tpm.ok && tpm.kind === 'tokens_per_minute');
  assert.deepEqual(admissionVerdict(POLICY, IDLE, 5000, 0), { ok: true }, 'one call larger than the window alone still starts: the limit paces, never blocks for good');
  assert.deepEqual(admissionVerdict({ concurrent: 0, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 0, workflowBudgetUsdPerDay: 0 }, { ...IDLE, inFlight: 1e6, runSpentUsd: 1e6 }, 1e9, 0), { ok: true }, '0 means no limit');
  assert.equal(estimateTokens(4001), 1001);
});

test('limits: a slot is given back once however often it is released, and money is charged to the run and the workflow (LocalLimits)', () => {
  const limits = new LocalLimits(POLICY);
  const a = limits.admit(WHO, 400, 0);
  const b = limits.admit(WHO, 400, 1);
  assert.ok(a.ok && b.ok);
  const c = limits.admit(WHO, 400, 2);
  assert.ok(!c.ok && c.kind === 'concurrency');
  a.reservation.release({ tokens: 120, costUsd: 0.6 });
  a.reservation.release({ tokens: 120, costUsd: 0.6 });
  assert.equal(limits.held().inFlight, 1);
  const d = limits.admit(WHO, 400, 3);
  assert.ok(d.ok, 'the slot came back');
  b.reservation.release({ tokens: 10, costUsd: 0.5 });
  d.reservation.release({ tokens: 10, costUsd: 0 });
  assert.equal(limits.held().inFlight, 0);
  const spent = limits.admit(WHO, 10, 4);
  assert.ok(!spent.ok && spent.kind === 'run_budget', 'the run spent $1.10 of $1.00');
  assert.ok(limits.admit({ ...WHO, runId: 'run-2', instanceId: 'bot-2' }, 10, 5).ok, 'another run of the workflow goes on');
});

test('limits: the per-minute windows slide: a call older than 60 s no longer counts', () => {
  const limits = new LocalLimits({ ...POLICY, concurrent: 0, runBudgetUsd: 0 });
  for (let i = 0; i < 3; i++) {
    const r = limits.admit(WHO, 4, i * 1000);
    assert.ok(r.ok);
    r.reservation.release({ tokens: 1, costUsd: 0 });
  }
  const fourth = limits.admit(WHO, 4, 30_000);
  assert.ok(!fourth.ok && fourth.kind === 'requests_per_minute' && 'retryAfterSec' in fourth && fourth.retryAfterSec === 30);
  assert.ok(limits.admit(WHO, 4, 60_001).ok);
});

test('limits: the token window keeps a running sum: a call charged after it slid out of the window takes nothing from the calls still in it', () => {
  const limits = new LocalLimits({ ...POLICY, concurrent: 0, runBudgetUsd: 0, requestsPerMinute: 0, tokensPerMinute: 1000 });
  const early = limits.admit(WHO, 400, 0); // 100 tokens estimated, charged only after it has slid out
  assert.ok(early.ok);
  const later = limits.admit(WHO, 400, 30_000);
  assert.ok(later.ok);
  later.reservation.release({ tokens: 800, costUsd: 0 });
  const blocked = limits.admit(WHO, 1200, 61_000); // the early call is gone from the window: 800 + 300 > 1000
  assert.ok(!blocked.ok && blocked.kind === 'tokens_per_minute', 'the later call\'s real tokens count');
  early.reservation.release({ tokens: 5000, costUsd: 0 });
  const fits = limits.admit(WHO, 800, 61_500); // 800 + 200 = 1000: fits only if the late charge was not added
  assert.ok(fits.ok, 'a charge for a call already out of the window does not count in it');
});

test('limits: state does not outlive its use: idle instances, other days\' workflow totals and runs unseen for two days are dropped (LocalLimits)', () => {
  const limits = new LocalLimits({ ...POLICY, runBudgetUsd: 100, workflowBudgetUsdPerDay: 100 });
  for (let i = 0; i < 50; i++) {
    const r = limits.admit({ instanceId: `bot-${i}`, workflow: `wf-${i % 5}`, runId: `run-${i}` }, 40, 1000 + i);
    assert.ok(r.ok);
    r.reservation.release({ tokens: 10, costUsd: 0.01 });
  }
  const held = limits.admit({ instanceId: 'bot-held', workflow: 'wf-0', runId: 'run-held' }, 40, 2000);
  assert.ok(held.ok);
  assert.deepEqual(limits.held(), { inFlight: 1, instances: 51, runs: 50, workflowDays: 5 });
  const nextDay = 86_400_000 + 1000;
  const r = limits.admit({ instanceId: 'bot-new', workflow: 'wf-new', runId: 'run-new' }, 40, nextDay);
  assert.ok(r.ok);
  assert.deepEqual(limits.held(), { inFlight: 2, instances: 2, runs: 50, workflowDays: 0 }, 'the call still in flight keeps its instance; yesterday\'s totals go');
  held.reservation.release({ tokens: 1, costUsd: 0 });
  r.reservation.release({ tokens: 1, costUsd: 0.01 });
  const twoDaysOn = nextDay + 2 * 86_400_000;
  assert.ok(limits.admit({ instanceId: 'bot-x', workflow: 'wf-x', runId: 'run-x' }, 40, twoDaysOn).ok);
  assert.deepEqual(limits.held(), { inFlight: 1, instances: 1, runs: 0, workflowDays: 0 });
});

test('limits: a bot token lowers its run\'s budget, concurrency and per-minute rates, never raises them (effectivePolicy)', () => {
  assert.deepEqual(effectivePolicy(POLICY, { budgetUsd: 0.5, concurrent: 1 }), { ...POLICY, runBudgetUsd: 0.5, concurrent: 1 });
  assert.deepEqual(effectivePolicy(POLICY, { requestsPerMinute: 1, tokensPerMinute: 10 }), { ...POLICY, requestsPerMinute: 1, tokensPerMinute: 10 });
  assert.deepEqual(effectivePolicy(POLICY, { requestsPerMinute: 1e6, tokensPerMinute: 1e9 }), { ...POLICY, askedAboveCeiling: { requestsPerMinute: 1e6, tokensPerMinute: 1e9 } }, 'rates above the file: the file holds, and what the token asked is kept for the refusal');
  const withMax = { ...POLICY, ceilings: { concurrent: 8, runBudgetUsd: 50 } };
  assert.deepEqual([effectivePolicy(withMax, { concurrent: 6, budgetUsd: 20 }).concurrent, effectivePolicy(withMax, { concurrent: 6, budgetUsd: 20 }).runBudgetUsd], [6, 20], 'a token may ask above the default, up to max');
  assert.deepEqual([effectivePolicy(withMax, { concurrent: 99, budgetUsd: 999 }).concurrent, effectivePolicy(withMax, { concurrent: 99, budgetUsd: 999 }).runBudgetUsd], [8, 50], 'never past max');
  assert.deepEqual(effectivePolicy(POLICY, { budgetUsd: 50, concurrent: 99 }), { ...POLICY, askedAboveCeiling: { runBudgetUsd: 50, concurrent: 99 } }, 'above the file: the file holds');
  assert.deepEqual(effectivePolicy({ ...POLICY, runBudgetUsd: 0 }, { budgetUsd: 3 }).runBudgetUsd, 3, 'no limit in the file: the token\'s applies');
  assert.equal(effectivePolicy(POLICY, undefined), POLICY);
});

test('limits: start-up warns when a money limit meets models without a price, naming them (unpricedWarning)', () => {
  const models = [{ provider: 'openai', model: 'gpt-test' }, { provider: 'local', model: 'qwen3-coder' }];
  const priced = (p: string) => p === 'openai';
  assert.match(unpricedWarning(POLICY, models, priced) ?? '', /no price in MODEL_PRICES_FILE.*: local\/qwen3-coder$/);
  assert.equal(unpricedWarning({ ...POLICY, runBudgetUsd: 0, workflowBudgetUsdPerDay: 0 }, models, priced), undefined, 'no money limit: nothing to warn');
  assert.equal(unpricedWarning(POLICY, models.slice(0, 1), priced), undefined);
});

test('limits: money is counted in whole micro-dollars, so every store and replica agrees on a spent budget (toMicroUsd)', () => {
  let sum = 0;
  for (let i = 0; i < 10; i++) sum += toMicroUsd(0.1);
  assert.equal(sum, toMicroUsd(1), 'ten charges of $0.10 are $1.00 exactly');
  const limits = new LocalLimits({ ...POLICY, concurrent: 0, runBudgetUsd: 0.8 });
  for (const cost of [0.7, 0.1]) {
    const r = limits.admit(WHO, 4, 0);
    assert.ok(r.ok);
    r.reservation.release({ tokens: 1, costUsd: cost });
  }
  const after = limits.admit(WHO, 4, 1);
  assert.ok(!after.ok && after.kind === 'run_budget', '$0.70 + $0.10 spends a $0.80 budget (0.7 + 0.1 < 0.8 in floating point)');
});
