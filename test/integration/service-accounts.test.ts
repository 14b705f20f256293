// Kubernetes service-account tokens end to end: the proxy with --sa-issuer takes its keys
// from a fake OIDC issuer's discovery document over HTTPS (the test CA), a projected token (as
// the kubelet writes it into the pod's file) authenticates a model call and the REAL git, through
// the configuration `git-config --workload-token-file` writes; the workload policy decides what
// each account may do, and an account it does not name is refused with its name on both listeners.
// Rotation, the fetch floor and hostile issuers are tested in process: service-account-keys.test.ts.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { includeGitConfig, makeGitHome, runGit } from '../support/git-client.ts';
import { startGitServer, type GitServer } from '../support/git-server.ts';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { startFakeIssuer, type FakeIssuer } from '../support/oidc-issuer.ts';
import { assertNoSecrets, type LogRecord, type ProxyProcess, stopProxyAndCleanUp } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { jwksOf, POD_UID, rsaSigner, saPayload, signSaToken, TEST_AUDIENCE, type SaIdentity } from '../support/service-accounts.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const HOST_TOKEN = `sahost_${randomBytes(16).toString('hex')}`;
const SIGNING_KEY = randomBytes(32).toString('hex');
const clusterKey = rsaSigner('cluster-rsa');
const TRIAGE: SaIdentity = { namespace: 'agents', serviceAccount: 'triage', pod: 'triage-6d5f-0' };
const STRANGER: SaIdentity = { namespace: 'team-b', serviceAccount: 'runner', pod: 'runner-0' };

let pki: TestPki;
let issuer: FakeIssuer;
let model: ModelUpstream;
let gitServer: GitServer;
let proxy: ProxyProcess;
let work: string;
let workload: { home: string; cleanup(): void };
let tokenFile: string;

const projected = (who: SaIdentity, signer = clusterKey, over: Record<string, unknown> = {}) =>
  signSaToken(signer, saPayload(who, Math.floor(Date.now() / 1000), 3600, { iss: issuer.issuer, ...over }));

before(async () => {
  pki = makeTestPki();
  [issuer, model, gitServer] = await Promise.all([startFakeIssuer(pki, clusterKey), startModelUpstream(pki), startGitServer({ pki, auth: { type: 'bearer', token: HOST_TOKEN } })]);
  gitServer.createBareRepo('acme/widgets.git');
  gitServer.createBareRepo('acme/secret.git');
  work = mkdtempSync(join(tmpdir(), 'test-sa-'));
  const policy = join(work, 'workloads.json');
  writeFileSync(policy, JSON.stringify({
    serviceAccounts: {
      'agents/triage': { git: [`${gitServer.hostKey}/acme/widgets:read`], models: true, workflow: 'triage', limits: { max_concurrent: 2 } },
      'agents/*': { models: true },
    },
  }));
  // The policy's limits are enforced only with --limits: a file holding {} sets no ceiling of its own.
  writeFileSync(join(work, 'limits.json'), '{}');
  proxy = await startServe({
    env: {
      UPSTREAM_BASE_URL: model.baseUrl, UPSTREAM_API_KEY: 'sk-upstream', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile,
      GIT_HOST_A: gitServer.hostKey, GIT_HOST_A_TOKEN: HOST_TOKEN, NODE_EXTRA_CA_CERTS: pki.caFile,
      // Minted tokens keep working beside service accounts.
      MODEL_PROXY_SIGNING_KEY: SIGNING_KEY,
    },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--git-auth-listen', '127.0.0.1:0', '--sa-issuer', issuer.issuer, '--sa-audience', TEST_AUDIENCE, '--sa-jwks-discovery', '--sa-ca-file', pki.caFile, '--workload-policy', policy, '--limits', join(work, 'limits.json')],
    listeners: ['model', 'git'],
  });
  await proxy.waitForRecord((r) => r.event === 'sa_keys_loaded', 'the key set loaded');
  workload = makeGitHome();
  tokenFile = join(work, 'token');
  const generated = await runCommandInProcess(['git-config', '--proxy-host', `127.0.0.1:${proxy.ports.git}`, '--workload-token-file', tokenFile], { GIT_HOST_A: gitServer.hostKey });
  assert.equal(generated.code, 0, generated.stderr);
  includeGitConfig(workload.home, generated.stdout, 'proxy.gitconfig');
});

after(() => stopProxyAndCleanUp(proxy, { close: [issuer, model, gitServer], cleanup: [workload, pki], dirs: [work] }));

const chat = (token: string) =>
  send(proxy.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
const gitRecords = (): LogRecord[] => proxy.records().filter((r) => r.event === 'request' && r.listener === 'git');

test('service-account token: the listening lines name the issuer, and the key set came from its discovery document over HTTPS', async () => {
  const loaded = await proxy.waitForRecord((r) => r.event === 'sa_keys_loaded');
  assert.deepEqual(loaded.kids, ['cluster-rsa']);
  assert.equal(loaded.from, `the discovery document of ${issuer.issuer}`);
  for (const listener of ['model', 'git']) {
    const line = await proxy.waitForRecord((r) => r.event === 'listening' && r.listener === listener);
    assert.equal(line.service_account_issuer, issuer.issuer, listener);
  }
});

test('service-account token: a model call with a projected token is served; the record names namespace/pod, the policy\'s workflow and the pod UID as run', async () => {
  const token = projected(TRIAGE);
  const res = await chat(token);
  assert.equal(res.status, 200, res.body.toString());
  const rec = await proxy.waitForRecord((r) => r.event === 'request' && r.listener === 'model' && r.instance_id === 'agents/triage-6d5f-0');
  assert.deepEqual([rec.instance_id, rec.workflow, rec.run_id], ['agents/triage-6d5f-0', 'triage', POD_UID]);
  assert.equal(model.requests.at(-1)!.headers.authorization, 'Bearer sk-upstream', 'the upstream sees the provider key, not the token');
  assertNoSecrets(proxy.output(), [token], 'the proxy output');
});

test('service-account token: the real git clones with the projected token file through git-config --workload-token-file, within the policy\'s scope only', async () => {
  writeFileSync(tokenFile, projected(TRIAGE));
  const before = gitRecords().length;
  const seenBefore = gitServer.requests.length;
  const dir = join(work, 'widgets');
  const clone = await runGit(['clone', '--quiet', `https://${gitServer.hostKey}/acme/widgets`, dir], { home: workload.home });
  assert.equal(clone.code, 0, `${clone.stderr}\n${proxy.output()}`);
  // Each request served reached the git server; its line comes a moment after git has exited.
  const servedLines = () => gitRecords().slice(before).filter((r) => r.status === 200);
  const forwarded = gitServer.requests.length - seenBefore;
  await proxy.waitForRecord(() => servedLines().length >= forwarded, `the log lines of the ${forwarded} requests the git server saw`);
  const served = servedLines();
  assert.ok(served.length >= 2, JSON.stringify(gitRecords().slice(before)));
  for (const r of served) assert.deepEqual([r.instance_id, r.workflow, r.run_id], ['agents/triage-6d5f-0', 'triage', POD_UID]);
  const outside = await runGit(['clone', `https://${gitServer.hostKey}/acme/secret`, join(work, 'secret')], { home: workload.home });
  assert.equal(outside.code, 128);
  assert.ok(outside.stderr.includes(`remote: git-auth-proxy: this workload may not read ${gitServer.hostKey}/acme/secret\n`), outside.stderr);
});

test('unmapped service account is refused on both listeners, the message naming namespace/serviceaccount and what to add to the policy', async () => {
  const res = await chat(projected(STRANGER));
  assert.equal(res.status, 401);
  assert.match(res.body.toString(), /the service account team-b\/runner is not in the workload policy .*workloads\.json: add \\"team-b\/runner\\" \(or \\"team-b\/\*\\"\) under serviceAccounts/);
  writeFileSync(tokenFile, projected(STRANGER));
  const clone = await runGit(['clone', `https://${gitServer.hostKey}/acme/widgets`, join(work, 'stranger')], { home: workload.home });
  assert.equal(clone.code, 128);
  assert.match(clone.stderr, /remote: git-auth-proxy: the workload token was refused: the service account team-b\/runner is not in the workload policy/);
  // An account the policy grants models but no git is told so by the git listener.
  writeFileSync(tokenFile, projected({ namespace: 'agents', serviceAccount: 'helper', pod: 'helper-0' }));
  const noGit = await runGit(['clone', `https://${gitServer.hostKey}/acme/widgets`, join(work, 'helper')], { home: workload.home });
  assert.match(noGit.stderr, /the service account agents\/helper may not use git: its entry "agents\/\*" in .* has no "git" scopes/);
});

test('service-account token refused for its audience, its issuer\'s unknown key, a lifetime beyond --max-token-lifetime, or another issuer (naming both issuers); the refusal never points at mint-token; a minted token still works, also one whose workflow spells the issuer', async () => {
  const reasons: string[] = [];
  const other = 'https://oidc.other-cluster.example';
  for (const token of [projected(TRIAGE, clusterKey, { aud: ['https://kubernetes.default.svc'] }), projected(TRIAGE, { ...rsaSigner('forged'), kid: 'cluster-rsa' }), projected(TRIAGE, clusterKey, { exp: Math.floor(Date.now() / 1000) + 2 * 86_400 }), projected(TRIAGE, clusterKey, { iss: other })]) {
    const res = await chat(token);
    assert.equal(res.status, 401);
    const message = (JSON.parse(res.body.toString()) as { error: { message: string } }).error.message;
    assert.doesNotMatch(message, /mint-token/);
    reasons.push(/^the service-account token was refused: (.*)$/.exec(message)?.[1] ?? message);
  }
  assert.deepEqual(reasons, ['wrong audience', 'bad signature', 'lifetime too long', `its issuer "${other}" is not --sa-issuer "${issuer.issuer}": the cluster's --service-account-issuer is what --sa-issuer must be`]);
  for (const workflow of ['w', issuer.issuer]) {
    const minted = await runCommandInProcess(['mint-token', '--instance-id', 'bot-1', '--workflow', workflow, '--run-id', 'r'], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY });
    assert.equal((await chat(minted.stdout.trim())).status, 200, workflow);
  }
  await proxy.waitForRecord((r) => r.event === 'request' && r.listener === 'model' && r.instance_id === 'bot-1', 'the minted token\'s record');
});

test('service-account flags that do not fit together stop start-up naming the flag to add', async () => {
  const cases: [string[], RegExp][] = [
    [['--sa-issuer', 'https://k8s.example', '--sa-audience', 'a', '--sa-jwks-discovery'], /--sa-issuer needs --workload-policy/],
    [['--sa-issuer', 'https://k8s.example', '--workload-policy', '/nonexistent', '--sa-jwks-discovery'], /--sa-issuer needs --sa-audience/],
    [['--sa-issuer', 'https://k8s.example', '--sa-audience', 'a', '--workload-policy', '/x'], /needs exactly one of --sa-jwks-file, --sa-jwks-url and --sa-jwks-discovery/],
    [['--sa-issuer', 'https://k8s.example', '--sa-audience', 'a', '--workload-policy', '/x', '--sa-jwks-url', 'http://k8s.example/jwks'], /--sa-jwks-url "http:\/\/k8s.example\/jwks" must be an https URL/],
    [['--sa-audience', 'a'], /--sa-audience is read only with --sa-issuer/],
    [['--sa-issuer', 'https://k8s.example', '--sa-audience', 'a', '--workload-policy', join(work, 'workloads.json'), '--sa-jwks-file', '/nonexistent/jwks.json'], /--sa-jwks-file \/nonexistent\/jwks.json cannot be read \(ENOENT\)/],
  ];
  for (const [args, message] of cases) {
    const r = await runCommandInProcess(['--model-gateway-listen', '127.0.0.1:0', ...args], { MODEL_GATEWAY_ENABLED: 'true' });
    assert.notEqual(r.code, 0, args.join(' '));
    assert.match(`${r.stdout}${r.stderr}`, message, args.join(' '));
  }
});

test('a workload policy entry with limits and no --limits stops start-up naming the entry and the fix; with --limits holding {} the entry\'s limit applies as written (unenforcedPolicyLimits)', async () => {
  const jwksFile = join(work, 'jwks-limits.json');
  writeFileSync(jwksFile, JSON.stringify(jwksOf(clusterKey)));
  const policy = join(work, 'limits-policy.json');
  writeFileSync(policy, JSON.stringify({ serviceAccounts: { 'agents/triage': { models: true, limits: { max_concurrent: 1 } }, 'agents/*': { models: true } } }));
  const env = { UPSTREAM_BASE_URL: model.baseUrl, UPSTREAM_API_KEY: 'sk-upstream', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile };
  const args = ['--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off', '--sa-issuer', issuer.issuer, '--sa-audience', TEST_AUDIENCE, '--sa-jwks-file', jwksFile, '--workload-policy', policy];
  const refused = await runCommandInProcess(args, env);
  assert.equal(refused.code, 1, refused.stderr);
  assert.match(refused.stderr, /--workload-policy .*limits-policy\.json: the entry "agents\/triage" set limits, which only a gateway started with --limits enforces; give --limits FILE \(a file holding \{\} sets no ceiling of its own/);
  // With an empty --limits file the entry's max_concurrent of 1 holds: a second call while the first is in progress is refused.
  const limited = await startServe({ env, args: [...args, '--limits', join(work, 'limits.json')], listeners: ['model'] });
  let release: (() => void) | undefined;
  try {
    let arrived!: () => void;
    const upstream = new Promise<void>((r) => (arrived = r));
    const held = new Promise<void>((r) => (release = r));
    model.script((_req, res) => {
      arrived();
      void held.then(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'c', object: 'chat.completion', model: 'gpt-test', choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })));
    });
    const call = () => send(limited.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${projected(TRIAGE)}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
    const first = call();
    await upstream; // the first call is in progress
    const second = await call();
    release?.();
    assert.equal(second.status, 429, second.body.toString());
    assert.equal((await first).status, 200);
  } finally {
    release?.();
    assert.equal((await limited.stop()).code, 0);
  }
});

test('service-account keys from a mounted file (--sa-jwks-file): the key set is logged at start-up, and a projected token is served by a proxy that never reaches the issuer', async () => {
  const jwksFile = join(work, 'jwks.json');
  writeFileSync(jwksFile, JSON.stringify(jwksOf(clusterKey)));
  const policy = join(work, 'file-policy.json');
  writeFileSync(policy, JSON.stringify({ serviceAccounts: { 'agents/*': { models: true } } }));
  const fileProxy = await startServe({
    env: { UPSTREAM_BASE_URL: model.baseUrl, UPSTREAM_API_KEY: 'sk-upstream', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--sa-issuer', issuer.issuer, '--sa-audience', TEST_AUDIENCE, '--sa-jwks-file', jwksFile, '--workload-policy', policy],
    listeners: ['model'],
  });
  try {
    // The key set is read and logged at start-up, not at the first token.
    const loaded = fileProxy.records().find((r) => r.event === 'sa_keys_loaded');
    assert.deepEqual(loaded?.kids, ['cluster-rsa'], 'sa_keys_loaded before any token');
    const fetched = { ...issuer.fetches };
    const res = await send(fileProxy.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${projected(TRIAGE)}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
    assert.equal(res.status, 200, res.body.toString());
    assert.deepEqual(issuer.fetches, fetched, 'the issuer was not asked');
  } finally {
    assert.equal((await fileProxy.stop()).code, 0);
  }
});
