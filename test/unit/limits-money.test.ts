// Money in the limits: one rounding rule for budgets in every store, money held by calls in
// progress, and the worst case a call holds.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { admissionVerdict, budgetMicroUsd, effectivePolicy, LocalLimits } from '../../src/limits/admission.ts';
import { maxOutputTokens, worstCase } from '../../src/limits/worst-case.ts';
import { parseLimitsFile } from '../../src/limits/policy.ts';

const none = { inFlight: 0, requestsLastMinute: 0, tokensLastMinute: 0, runSpentUsd: 0, workflowSpentUsdToday: 0 };
const policy = { concurrent: 0, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 1, workflowBudgetUsdPerDay: 0 };

test('budgetMicroUsd: a budget rounds up to whole micro-dollars and never to 0 when above 0 (the rule of both stores): a sub-micro-dollar budget is one micro-dollar, spent by any charge, never "no budget"', () => {
  assert.deepEqual([0, -1, 1e-9, 1e-7, 4e-7, 5e-7, 6e-7, 0.000001, 0.0000015, 0.29, 1, 1e6].map(budgetMicroUsd), [0, 0, 1, 1, 1, 1, 1, 1, 2, 290_000, 1_000_000, 1_000_000_000_000]);
  const tiny = { ...policy, runBudgetUsd: 1e-7 };
  assert.equal(admissionVerdict(tiny, none, 1, 0).ok, true, 'nothing spent yet');
  const spent = admissionVerdict(tiny, { ...none, runSpentUsd: 0.000001 }, 1, 0);
  assert.equal(spent.ok ? 'ok' : spent.kind, 'run_budget');
});

test('limits: a token\'s budget only ever lowers the file\'s, a micro-dollar one included (effectivePolicy, budgetMicroUsd)', () => {
  const file = parseLimitsFile('{"perRun":{"budgetUsd":{"default":1,"max":5}}}', 'l.json');
  for (const asked of [1e-7, 0.5, 5, 50, 1e9]) {
    const applied = effectivePolicy(file, { budgetUsd: asked }).runBudgetUsd;
    assert.ok(budgetMicroUsd(applied) <= budgetMicroUsd(5) && budgetMicroUsd(applied) >= 1, `asked ${asked}: applied ${applied}`);
    assert.ok(applied <= asked, `asked ${asked}: never more than asked`);
  }
});

test('admissionVerdict: what is left of a budget held by calls in progress refuses the next call as transient (retry after 1 s), a spent budget as final, and a budget with room admits', () => {
  const held = admissionVerdict(policy, { ...none, runSpentUsd: 0.4, runHeldUsd: 0.6 }, 1, 0);
  assert.deepEqual(held.ok ? 'ok' : [held.kind, 'retryAfterSec' in held ? held.retryAfterSec : null], ['run_budget_held', 1]);
  const spent = admissionVerdict(policy, { ...none, runSpentUsd: 1, runHeldUsd: 0 }, 1, 0);
  assert.deepEqual(spent.ok ? 'ok' : [spent.kind, 'retryAfterSec' in spent], ['run_budget', false]);
  assert.equal(admissionVerdict(policy, { ...none, runSpentUsd: 0.4, runHeldUsd: 0.5 }, 1, 0).ok, true);
  const wf = admissionVerdict({ ...policy, runBudgetUsd: 0, workflowBudgetUsdPerDay: 2 }, { ...none, workflowSpentUsdToday: 1, workflowHeldUsdToday: 1 }, 1, 0);
  assert.equal(wf.ok ? 'ok' : wf.kind, 'workflow_budget_held');
  const all = admissionVerdict({ ...policy, runBudgetUsd: 0, global: { concurrent: 0, requestsPerMinute: 0, tokensPerMinute: 0, budgetUsdPerDay: 3 } }, { ...none, global: { inFlight: 0, requestsLastMinute: 0, tokensLastMinute: 0, oldestInWindowAgeMs: 0, spentUsdToday: 1, heldUsdToday: 2 } }, 1, 0);
  assert.equal(all.ok ? 'ok' : all.kind, 'global_budget_held');
});

test('LocalLimits: an admitted call holds its worst case against the run budget until it is released with its real charge', () => {
  const limits = new LocalLimits({ ...policy, runBudgetUsd: 1 });
  const who = { instanceId: 'i', workflow: 'w', runId: 'r' };
  const first = limits.admit(who, 40, 0, 0.9);
  assert.ok(first.ok);
  assert.ok(limits.admit(who, 40, 1, 0.1).ok, 'what is left ($0.10) still has room: a call is admitted while anything is left');
  const held = limits.admit(who, 40, 2, 0.05);
  assert.equal(held.ok ? 'ok' : held.kind, 'run_budget_held', 'all of $1 held');
  first.reservation.release({ tokens: 10, costUsd: 0.2 });
  assert.ok(limits.admit(who, 40, 3, 0.05).ok, 'released: $0.20 spent, $0.05 held');
});

test('maxOutputTokens: the most output a body allows, from whichever of max_tokens, max_completion_tokens, max_output_tokens it names (the largest), or none', () => {
  assert.equal(maxOutputTokens({ max_tokens: 8000 }), 8000);
  assert.equal(maxOutputTokens({ max_completion_tokens: 100, max_tokens: 50 }), 100);
  assert.equal(maxOutputTokens({ max_output_tokens: 2048 }), 2048);
  assert.equal(maxOutputTokens({}), undefined);
  for (const bad of [0, -5, 1.5, '9000', null, 1e300]) assert.equal(maxOutputTokens({ max_tokens: bad }), undefined, JSON.stringify(bad));
});

test('worstCase: the input estimated from the body\'s size plus the most output it allows (or the assumed maximum), at the model\'s prices; no price, no money', () => {
  const price = { input: 3, output: 15, cached: undefined, reasoning: undefined, cacheWrite: undefined };
  assert.deepEqual(worstCase(4000, 8000, 128_000, price), { inputTokens: 1000, outputTokens: 8000, usd: (1000 * 3 + 8000 * 15) / 1e6 });
  assert.deepEqual(worstCase(4000, undefined, 128_000, price), { inputTokens: 1000, outputTokens: 128_000, usd: (1000 * 3 + 128_000 * 15) / 1e6 });
  assert.deepEqual(worstCase(4000, 8000, 128_000, undefined), { inputTokens: 1000, outputTokens: 8000, usd: 0 });
});

test('limits file: perCall.assumedMaxOutputTokens sets the output a call naming no limit is assumed to reach; perCall.holdWorstCase is a boolean, off unless set (parseLimitsFile)', () => {
  assert.equal(parseLimitsFile('{"perCall":{"assumedMaxOutputTokens":32000}}', 'l.json').assumedMaxOutputTokens, 32000);
  assert.equal(parseLimitsFile('{"perCall":{"holdWorstCase":true}}', 'l.json').holdWorstCase, true);
  assert.equal(parseLimitsFile('{"perCall":{"holdWorstCase":false}}', 'l.json').holdWorstCase, undefined);
  assert.throws(() => parseLimitsFile('{"perCall":{"holdWorstCase":"yes"}}', 'l.json'), /perCall\.holdWorstCase: must be true or false/);
  assert.equal(parseLimitsFile('{}', 'l.json').assumedMaxOutputTokens, undefined);
  assert.throws(() => parseLimitsFile('{"perCall":{"assumedMaxOutputTokens":1.5}}', 'l.json'), /perCall\.assumedMaxOutputTokens/);
});
