import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lookupWorkload, parseWorkloadPolicy, type PolicyLookup } from '../../src/auth/workload-policy.ts';
import { canonicalScope } from '../../src/git/scope.ts';

const FILE = '/etc/proxy/workloads.json';
const policyOf = (accounts: Record<string, unknown>) => parseWorkloadPolicy(JSON.stringify({ serviceAccounts: accounts }), FILE, canonicalScope);
const entryOf = (found: PolicyLookup) => (found.ok ? found.grant.entry : `refused: ${found.reason}`);

test('workload policy: an entry grants git scopes (canonical, as mint-token writes them), models, limits in the token claim\'s shape and a workflow', () => {
  const policy = policyOf({
    'agents/triage': { git: ['GitHub.com/Acme/Widgets.git:write', 'github.com/acme/*:read'], models: true, limits: { budget_usd: 2.5, max_concurrent: 2, requests_per_minute: 60, tokens_per_minute: 100000 }, workflow: 'triage' },
  });
  const found = lookupWorkload(policy, 'agents', 'triage', 'model');
  assert.ok(found.ok);
  assert.deepEqual(found.grant, {
    entry: 'agents/triage',
    git: ['github.com/acme/widgets:write', 'github.com/acme/*:read'],
    models: true,
    limits: { budget_usd: 2.5, max_concurrent: 2, requests_per_minute: 60, tokens_per_minute: 100000 },
    workflow: 'triage',
  });
  assert.ok(lookupWorkload(policy, 'agents', 'triage', 'git').ok);
});

test('workload policy precedence: the exact name, then namespace/*, then */serviceaccount, then */*, whatever the file order', () => {
  const policy = policyOf({ '*/*': { models: true }, '*/builder': { models: true }, 'agents/*': { models: true }, 'agents/builder': { models: true } });
  assert.equal(entryOf(lookupWorkload(policy, 'agents', 'builder', 'model')), 'agents/builder');
  assert.equal(entryOf(lookupWorkload(policy, 'agents', 'other', 'model')), 'agents/*');
  assert.equal(entryOf(lookupWorkload(policy, 'ci', 'builder', 'model')), '*/builder');
  assert.equal(entryOf(lookupWorkload(policy, 'ci', 'other', 'model')), '*/*');
});

test('workload policy: entries are not merged; the entry found is the whole grant', () => {
  const policy = policyOf({ 'agents/*': { git: ['github.com/acme/*:read'], models: true }, 'agents/narrow': { models: true } });
  const found = lookupWorkload(policy, 'agents', 'narrow', 'git');
  assert.equal(found.ok, false);
  assert.match(found.ok ? '' : found.reason, /agents\/narrow may not use git: its entry "agents\/narrow" in \/etc\/proxy\/workloads\.json has no "git" scopes/);
});

test('unmapped service account is refused: the message names namespace/serviceaccount and what to add to the policy file', () => {
  const found = lookupWorkload(policyOf({ 'agents/triage': { models: true } }), 'team-b', 'runner', 'model');
  assert.deepEqual(found, {
    ok: false,
    reason: 'the service account team-b/runner is not in the workload policy /etc/proxy/workloads.json: add "team-b/runner" (or "team-b/*") under serviceAccounts with the git scopes, models and limits it should have',
  });
});

test('workload policy per listener: git needs "git" scopes, the model gateway "models": true', () => {
  const policy = policyOf({ 'agents/git-only': { git: ['github.com/acme/widgets:read'] }, 'agents/model-only': { models: true } });
  assert.ok(lookupWorkload(policy, 'agents', 'git-only', 'git').ok);
  const model = lookupWorkload(policy, 'agents', 'git-only', 'model');
  assert.match(model.ok ? '' : model.reason, /agents\/git-only may not call models: its entry "agents\/git-only" .* lacks "models": true/);
  assert.ok(lookupWorkload(policy, 'agents', 'model-only', 'model').ok);
  assert.equal(lookupWorkload(policy, 'agents', 'model-only', 'git').ok, false);
});

test('workload policy file mistakes stop start-up naming the file, the entry and the field', () => {
  const cases: [unknown, RegExp][] = [
    [{ serviceAccounts: { agents: { models: true } } }, /serviceAccounts\["agents"\]: the key must be "namespace\/serviceaccount"/],
    [{ serviceAccounts: { 'Agents/x': { models: true } } }, /"Agents" is not a namespace name/],
    [{ serviceAccounts: { 'agents/x_y': { models: true } } }, /"x_y" is not a service account name/],
    [{ serviceAccounts: { 'agents/a*': { models: true } } }, /"a\*" is not a service account name .* nor "\*"/],
    [{ serviceAccounts: { 'agents/x': {} } }, /serviceAccounts\["agents\/x"\]: grants nothing/],
    [{ serviceAccounts: { 'agents/x': { models: true, limit: {} } } }, /serviceAccounts\["agents\/x"\]\.limit: unknown field \(did you mean limits\?\)/],
    [{ serviceAccounts: { 'agents/x': { models: 'yes' } } }, /\.models: must be true or false/],
    [{ serviceAccounts: { 'agents/x': { git: 'github.com/a/b:read' } } }, /\.git: must be a list/],
    [{ serviceAccounts: { 'agents/x': { git: ['github.com/a/b'] } } }, /\.git\[0\]: "github.com\/a\/b": must end in :read or :write/],
    [{ serviceAccounts: { 'agents/x': { models: true, limits: { budget_usd: 0 } } } }, /\.limits\.budget_usd: must be a number above 0/],
    [{ serviceAccounts: { 'agents/x': { models: true, limits: { max_concurrent: 1.5 } } } }, /\.limits\.max_concurrent: must be a whole number/],
    [{ serviceAccounts: { 'agents/x': { models: true, limits: { budgetUsd: 1 } } } }, /\.limits\.budgetUsd: unknown field/],
    [{ serviceAccounts: { 'agents/x': { git: ['github.com/a/b:read'], limits: { budget_usd: 1 } } } }, /\.limits: limits apply to model calls: add "models": true/],
    [{ serviceAccounts: { 'agents/x': { models: true, workflow: 'has space' } } }, /\.workflow: must be 1 to 128/],
    [{ accounts: {} }, /accounts: unknown field/],
    [[], /must be an object/],
  ];
  for (const [doc, message] of cases) {
    assert.throws(() => parseWorkloadPolicy(JSON.stringify(doc), FILE, canonicalScope), (err: Error) => err.message.startsWith(`${FILE}: `) && message.test(err.message), JSON.stringify(doc));
  }
  assert.throws(() => parseWorkloadPolicy('{"serviceAccounts":{"a/b":{"models":true},"a/b":{"models":true}}}', FILE, canonicalScope), /the key "a\/b" appears twice/);
});
