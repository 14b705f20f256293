// The start-up warnings (src/run/warnings.ts): one test per warning, from the facts start-up
// learned, with no process to spawn.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseWorkloadPolicy } from '../../src/auth/workload-policy.ts';
import { canonicalScope } from '../../src/git/scope.ts';
import { parseLimitsFile } from '../../src/limits/policy.ts';
import { everyRefPushWarning, startupWarnings, unenforcedPolicyLimits, type ModelFacts } from '../../src/run/warnings.ts';

const quietModel: ModelFacts = {
  limits: undefined,
  providers: [{ name: 'openai', models: ['gpt-5'], plainHttp: false, credential: 'key' }],
  priced: () => true,
  hostedTools: new Set(),
  botAuth: true,
};
const moneyBudget = parseLimitsFile('{"perRun":{"budgetUsd":5}}', 'limits.json');
const messages = (facts: Parameters<typeof startupWarnings>[0]) => startupWarnings(facts).map((w) => w.message);

test('no warning: TLS verified, both signing keys set, priced models allowed, no hosted tool, descriptors enough', () => {
  assert.deepEqual(
    startupWarnings({
      git: { hosts: [{ host: 'github.com', tls_verify: true }], workloadAuth: true },
      model: quietModel,
      descriptors: { openFilesLimit: 1_000_000, proxyListeners: 2, caps: { total: 1024, perClient: 256 }, metricsCaps: { total: 64, perClient: 16 } },
    }),
    [],
  );
});

test('git host with TLS verification off: warned for that host only (tlsInsecureSkipVerify)', () => {
  assert.deepEqual(startupWarnings({ git: { hosts: [{ host: 'github.com', tls_verify: true }, { host: 'git.internal:8443', tls_verify: false }], workloadAuth: true } }), [
    { event: 'warning', listener: 'git', host: 'git.internal:8443', message: 'TLS verification is switched off for this host (tlsInsecureSkipVerify)' },
  ]);
});

test('git without GIT_PROXY_SIGNING_KEY: workloads are not authenticated (network-policy mode)', () => {
  const [warning, ...rest] = startupWarnings({ git: { hosts: [], workloadAuth: false } });
  assert.deepEqual(rest, []);
  assert.equal(warning!.listener, 'git');
  assert.match(warning!.message, /^GIT_PROXY_SIGNING_KEY is not set: workloads are not authenticated \(network-policy mode\)/);
});

test('unpriced models under a money budget: the models the price table lacks are named', () => {
  const [warning, ...rest] = startupWarnings({ model: { ...quietModel, limits: moneyBudget, priced: (_, model) => model !== 'gpt-5' } });
  assert.deepEqual(rest, []);
  assert.equal(warning!.listener, 'model');
  assert.match(warning!.message, /openai\/gpt-5/);
  assert.deepEqual(startupWarnings({ model: { ...quietModel, limits: parseLimitsFile('{"perInstance":{"concurrent":2}}', 'l.json'), priced: () => false } }), [], 'no money limit, no warning');
});

test('hosted tool fees under a money budget: what a hosted tool bills is not counted', () => {
  const warnings = messages({ model: { ...quietModel, limits: moneyBudget, hostedTools: new Set(['web_search']) } });
  assert.equal(warnings.length, 2);
  assert.match(warnings[0]!, /^--limits sets a money budget, and --allow-hosted-tools allows web_search: .* is not counted/);
  assert.match(warnings[1]!, /^hosted tools allowed/);
});

test('model gateway without MODEL_PROXY_SIGNING_KEY: bots are not authenticated, identity headers informational', () => {
  assert.deepEqual(messages({ model: { ...quietModel, botAuth: false } }), [
    'MODEL_PROXY_SIGNING_KEY is not set: bots are not authenticated (network-policy mode); identity headers are informational only',
  ]);
});

test('provider over plain http: warned by name, and the credential in clear said when it carries one', () => {
  const providers = [
    { name: 'vllm', models: ['llama'], plainHttp: true, credential: 'none' },
    { name: 'tgi', models: ['mistral'], plainHttp: true, credential: 'key' },
  ];
  assert.deepEqual(startupWarnings({ model: { ...quietModel, providers } }), [
    { event: 'warning', listener: 'model', provider: 'vllm', message: 'provider vllm is reached over plain http (allowPlainHttp): only for a server inside the cluster' },
    { event: 'warning', listener: 'model', provider: 'tgi', message: 'provider tgi is reached over plain http (allowPlainHttp), and its credential travels in clear (allowCredentialOverPlainHttp): only for a server inside the cluster' },
  ]);
});

test('no model allowed: every model request will be refused until UPSTREAM_ALLOWED_MODELS lists some', () => {
  assert.deepEqual(messages({ model: { ...quietModel, providers: [{ name: 'openai', models: [], plainHttp: false, credential: 'key' }] } }), [
    'no model is allowed (UPSTREAM_ALLOWED_MODELS is empty): every model request will be refused until it lists the model IDs bots may use',
  ]);
});

test('hosted tools allowed: named, and the provider runs them outside the sandbox', () => {
  assert.deepEqual(messages({ model: { ...quietModel, hostedTools: new Set(['web_search', 'code_interpreter']) } }), [
    'hosted tools allowed (--allow-hosted-tools): web_search, code_interpreter; the provider runs them outside the sandbox',
  ]);
});

test('file descriptors: connection caps that may need more than the open-files limit, with the cap that fits', () => {
  const [warning, ...rest] = startupWarnings({ descriptors: { openFilesLimit: 1024, proxyListeners: 2, caps: { total: 1024, perClient: 256 }, metricsCaps: undefined } });
  assert.deepEqual(rest, []);
  assert.equal(warning!.listener, undefined);
  assert.match(warning!.message, /^--max-connections 1024 on 2 proxy listener\(s\) may need \d+ file descriptors, above the process limit of 1024: raise the limit \(ulimit -n\) or lower --max-connections to \d+$/);
});

test('the warnings come in the order they are logged: git, then the model gateway, then file descriptors', () => {
  const warnings = startupWarnings({
    descriptors: { openFilesLimit: 64, proxyListeners: 2, caps: { total: 0, perClient: 0 }, metricsCaps: undefined },
    model: { ...quietModel, botAuth: false },
    git: { hosts: [], workloadAuth: false },
  });
  assert.deepEqual(warnings.map((w) => w.listener), ['git', 'model', undefined]);
});

test('workload policy wildcard namespace: a "*/<serviceaccount>" or "*/*" entry granting git write or model calls is warned, naming the entry and that any namespace with that account name gets it; read-only git and named namespaces are not', () => {
  const policy = parseWorkloadPolicy(
    JSON.stringify({
      serviceAccounts: {
        '*/deployer': { git: ['github.com/acme/prod-infra:write', 'github.com/acme/docs:read'] },
        '*/*': { models: true },
        '*/reader': { git: ['github.com/acme/*:read'] },
        'agents/*': { git: ['github.com/acme/widgets:write'], models: true },
      },
    }),
    'policy.json', canonicalScope);
  assert.deepEqual(messages({ policy: { policy, limits: undefined } }), [
    'workload policy policy.json: the entry "*/deployer" grants git github.com/acme/prod-infra:write to a service account named deployer in any namespace that has no entry of its own: whoever may create a service account of that name in any namespace gets it; name the namespace ("<namespace>/deployer") unless every namespace is trusted',
    'workload policy policy.json: the entry "*/*" grants model calls to every service account in every namespace that has no entry of its own: whoever may create a service account of that name in any namespace gets it; name the namespace ("<namespace>/*") unless every namespace is trusted',
    'workload policy policy.json: write scopes without ref rules ("*/deployer": github.com/acme/prod-infra:write; "agents/*": github.com/acme/widgets:write): each lets a push change every branch and tag the host\'s credential may change, as before ref rules existed; to narrow it, add the refs after :write (:refs/heads/agent/<run>/*)',
  ]);
});

test('ref rules, start-up: write scopes of the workload policy without ref rules are said once, at start-up, naming them; a scope with ref rules is not, and a push under a token\'s is said at the first one', () => {
  const policy = parseWorkloadPolicy(
    JSON.stringify({
      serviceAccounts: {
        'agents/a': { git: ['github.com/acme/widgets:write:refs/heads/agent/*', 'github.com/acme/*:read'] },
        'agents/b': { git: ['github.com/acme/b:write', 'github.com/acme/c:write'] },
        'agents/c': { git: ['github.com/acme/d:write'] },
        'agents/d': { git: ['github.com/acme/e:write'] },
      },
    }),
    'policy.json', canonicalScope);
  assert.deepEqual(messages({ policy: { policy, limits: undefined } }), [
    'workload policy policy.json: write scopes without ref rules ("agents/b": github.com/acme/b:write; "agents/b": github.com/acme/c:write; "agents/c": github.com/acme/d:write and 1 more): each lets a push change every branch and tag the host\'s credential may change, as before ref rules existed; to narrow it, add the refs after :write (:refs/heads/agent/<run>/*)',
  ]);
  const narrowed = parseWorkloadPolicy(JSON.stringify({ serviceAccounts: { 'agents/a': { git: ['github.com/acme/widgets:write:refs/heads/agent/*'] } } }), 'policy.json', canonicalScope);
  assert.deepEqual(messages({ policy: { policy: narrowed, limits: undefined } }), []);
  // A write scope with ref rules is still a write for the wildcard-namespace warning.
  const wild = parseWorkloadPolicy(JSON.stringify({ serviceAccounts: { '*/bot': { git: ['github.com/acme/widgets:write:refs/heads/agent/*'] } } }), 'policy.json', canonicalScope);
  assert.match(messages({ policy: { policy: wild, limits: undefined } }).join('\n'), /the entry "\*\/bot" grants git github\.com\/acme\/widgets:write:refs\/heads\/agent\/\* to a service account named bot/);
  assert.deepEqual(everyRefPushWarning('github.com/acme/*:write'), {
    event: 'warning',
    listener: 'git',
    message: "a push went through under a write scope without ref rules (github.com/acme/*:write), which lets a push change every branch and tag the host's credential may change, as before ref rules existed; to narrow it, add the refs after :write (:refs/heads/agent/<run>/*); said once",
  });
});

test('workload policy limits above the --limits ceilings: warned naming the entry, each limit and its ceiling, as mint-token refuses them; limits within are not', () => {
  const limits = parseLimitsFile('{"perRun":{"budgetUsd":{"default":5,"max":20}},"perInstance":{"concurrent":4}}', 'limits.json');
  const policy = parseWorkloadPolicy(
    JSON.stringify({
      serviceAccounts: {
        'agents/big': { models: true, limits: { budget_usd: 50, max_concurrent: 8, requests_per_minute: 1000 } },
        'agents/small': { models: true, limits: { budget_usd: 20, max_concurrent: 4 } },
      },
    }),
    'policy.json', canonicalScope);
  const warnings = startupWarnings({ policy: { policy, limits: { policy: limits, file: 'limits.json' } } });
  assert.deepEqual(warnings, [
    {
      event: 'warning',
      listener: 'model',
      message: 'workload policy policy.json: the entry "agents/big": budget_usd 50 is above the ceiling 20 of limits.json (perRun.budgetUsd); max_concurrent 8 is above the ceiling 4 of limits.json (perInstance.concurrent); the gateway applies the ceiling, so lower the entry to at most that (mint-token refuses the same)',
    },
  ]);
  assert.deepEqual(messages({ policy: { policy, limits: undefined } }), [], 'without --limits there is no ceiling');
});

test('unenforcedPolicyLimits: workload policy entries that set limits, with no --limits to enforce them, stop start-up naming the entries (three, then how many more) and the fix; entries without limits pass', () => {
  const policy = (entries: Record<string, unknown>) => parseWorkloadPolicy(JSON.stringify({ serviceAccounts: entries }), 'workloads.json', canonicalScope);
  assert.equal(unenforcedPolicyLimits(policy({ 'agents/*': { models: true } })), undefined);
  assert.equal(
    unenforcedPolicyLimits(policy({ 'agents/triage': { models: true, limits: { budget_usd: 5 } }, 'agents/*': { models: true } })),
    '--workload-policy workloads.json: the entry "agents/triage" set limits, which only a gateway started with --limits enforces; give --limits FILE (a file holding {} sets no ceiling of its own, so the entries\' limits apply as written), or remove the entries\' "limits"',
  );
  const five = Object.fromEntries(['a', 'b', 'c', 'd', 'e'].map((n) => [`ns/${n}`, { models: true, limits: { max_concurrent: 1 } }]));
  assert.match(unenforcedPolicyLimits(policy(five)) ?? '', /the entries "ns\/a", "ns\/b", "ns\/c" and 2 more set limits/);
});
