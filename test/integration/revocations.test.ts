// Stopping a run before its tokens expire: `proxy.js revoke` writes the deny list that every
// proxy reads, a shared file (as a mounted volume would be) or the Redis store the replicas
// share (--limits-store); the next request of the revoked run is refused on both gateways and on
// the git listener, while other runs go on.
// Tokens are minted, and most revokes run, in this process (test/support/command-in-process.ts, the
// same functions as `proxy.js mint-token` and `revoke`); one revoke of each kind runs the bundle.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { send } from '../support/http-client.ts';
import { parseExposition, sumOf } from '../support/prometheus.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { runProxyCommand, type ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { startRedis, type RedisServer } from '../support/redis-server.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { startUpstream, type TestUpstream } from '../support/upstream.ts';

const KEY = randomBytes(32).toString('hex');
let pki: TestPki;
let model: ModelUpstream;
let git: TestUpstream;
let dir: string;
let deny: string;
let one: ProxyProcess;
let two: ProxyProcess;
let redis: RedisServer;
/** Two more replicas whose deny list is in Redis (no file). */
let three: ProxyProcess;
let four: ProxyProcess;

before(async () => {
  pki = makeTestPki();
  [model, git, redis] = await Promise.all([startModelUpstream(pki), startUpstream(pki), startRedis(['--appendonly', 'yes'])]); // persistent: a restart is an outage, not a lost state
  dir = mkdtempSync(join(tmpdir(), 'revocations-'));
  deny = join(dir, 'revoked.json');
  const env = { UPSTREAM_BASE_URL: model.baseUrl, UPSTREAM_API_KEY: 'sk-x', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile, MODEL_PROXY_SIGNING_KEY: KEY, GIT_PROXY_SIGNING_KEY: KEY, GIT_HOST_A: git.hostKey, GIT_HOST_A_TOKEN: 'tok', NODE_EXTRA_CA_CERTS: pki.caFile };
  const args = ['--model-gateway-listen', '127.0.0.1:0', '--git-auth-listen', '127.0.0.1:0', '--revocations', deny];
  [one, two] = await Promise.all([startServe({ env, args, listeners: ['model', 'git'] }), startServe({ env, args, listeners: ['model', 'git'] })]);
  const storeArgs = ['--model-gateway-listen', '127.0.0.1:0', '--git-auth-listen', '127.0.0.1:0', '--limits-store', `redis://127.0.0.1:${redis.port}`];
  [three, four] = await Promise.all([startServe({ env, args: storeArgs, listeners: ['model', 'git'] }), startServe({ env, args: storeArgs, listeners: ['model', 'git'] })]);
  await Promise.all([three, four].map((p) => p.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up')));
});

after(async () => {
  await Promise.all([one?.stop(), two?.stop(), three?.stop(), four?.stop()]);
  await Promise.all([model?.close(), git?.close(), redis?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const mint = async (run: string, extra: string[] = []) => {
  const r = await runCommandInProcess(['mint-token', '--instance-id', `bot-${run}`, '--workflow', 'w', '--run-id', run, ...extra], { MODEL_PROXY_SIGNING_KEY: KEY, GIT_PROXY_SIGNING_KEY: KEY, GIT_HOST_A: git.hostKey });
  assert.equal(r.code, 0, r.stderr);
  return { token: r.stdout.trim(), id: /token id (\S+)/.exec(r.stderr)?.[1] };
};
const chat = (gw: ProxyProcess, token: string) => send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
const refs = (gw: ProxyProcess, token: string) => send(gw.ports.git!, 'GET', `/${git.hostKey}/org/repo.git/info/refs?service=git-upload-pack`, { headers: { authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}` } });

test('revoke: a run stopped mid-series is refused from its next request on both gateways and on the git listener, while other runs go on', async () => {
  const stopped = await mint('run-stop');
  const stoppedGit = await mint('run-stop', ['--git-repo', `${git.hostKey}/org/*:read`]);
  const other = await mint('run-go');
  for (const gw of [one, two]) assert.equal((await chat(gw, stopped.token)).status, 200, 'before: served');
  assert.equal((await refs(one, stoppedGit.token)).status, 200);
  const r = await runProxyCommand(['revoke', '--revocations', deny, '--run-id', 'run-stop']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^revoked run_id run-stop until .* \(1 entries in .*\); both listeners refuse its tokens from their next request/);
  for (const gw of [one, two]) {
    const refused = await chat(gw, stopped.token);
    assert.equal(refused.status, 401);
    assert.match(refused.body.toString(), /its run was revoked/);
    assert.equal((await chat(gw, other.token)).status, 200, 'another run goes on');
  }
  const gitRefused = await refs(two, stoppedGit.token);
  assert.equal(gitRefused.status, 401);
  assert.match(gitRefused.body.toString(), /its run was revoked/);
  // Each refusal of a revoked token is counted, on either listener (the dashboard's Revoked
  // tokens panel), and the gateway's refusal by its reason (its Security refusals panel).
  const samples = parseExposition((await send(two.ports.metrics!, 'GET', '/metrics')).body.toString());
  assert.equal(sumOf(samples, 'proxy_revoked_tokens_refused_total'), 2, 'one model call and one git request of the revoked run');
  assert.equal(sumOf(samples, 'model_gateway_refusals_total', { reason: 'invalid_bot_token' }), 1, 'a refused token has no identity: its workflow is none');
});

test('revoke: one token alone, by the id mint-token printed; another token of the same run goes on', async () => {
  const a = await mint('run-two-tokens');
  const b = await mint('run-two-tokens');
  assert.ok(a.id && b.id && a.id !== b.id);
  assert.equal((await runCommandInProcess(['revoke', '--revocations', deny, '--token-id', a.id!])).code, 0);
  assert.match((await chat(one, a.token)).body.toString(), /the token was revoked/);
  assert.equal((await chat(one, b.token)).status, 200);
});

test('revoke: a mistake is a usage error (exit 2): no deny list, or not exactly one of run, instance, token', async () => {
  assert.equal((await runProxyCommand(['revoke', '--run-id', 'r'])).code, 2, 'through the bundle: its exit code');
  assert.match((await runCommandInProcess(['revoke', '--run-id', 'r'])).stderr, /give --revocations FILE .* or --limits-store redis:\/\/HOST:PORT/);
  assert.equal((await runCommandInProcess(['revoke', '--revocations', deny])).code, 2);
  assert.equal((await runCommandInProcess(['revoke', '--revocations', deny, '--run-id', 'r', '--instance-id', 'i'])).code, 2);
});

test('revoke through the shared store (--limits-store redis://): a run stopped mid-series is refused from its next request on both replicas and on the git listener; an instance too; other runs go on', async () => {
  const store = `redis://127.0.0.1:${redis.port}`;
  const stopped = await mint('run-store-stop');
  const stoppedGit = await mint('run-store-stop', ['--git-repo', `${git.hostKey}/org/*:read`]);
  const other = await mint('run-store-go');
  for (const gw of [three, four]) assert.equal((await chat(gw, stopped.token)).status, 200, 'before: served');
  assert.equal((await refs(three, stoppedGit.token)).status, 200);
  const r = await runProxyCommand(['revoke', '--limits-store', store, '--run-id', 'run-store-stop']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^revoked run_id run-store-stop until .* \(in the store at 127\.0\.0\.1:\d+\); both listeners refuse/);
  for (const gw of [three, four]) {
    const refused = await chat(gw, stopped.token);
    assert.equal(refused.status, 401);
    assert.match(refused.body.toString(), /its run was revoked/);
    assert.equal((await chat(gw, other.token)).status, 200, 'another run goes on');
  }
  const gitRefused = await refs(four, stoppedGit.token);
  assert.equal(gitRefused.status, 401);
  assert.match(gitRefused.body.toString(), /its run was revoked/);
  assert.equal((await runCommandInProcess(['revoke', '--limits-store', store, '--instance-id', 'bot-run-store-go'])).code, 0);
  assert.match((await chat(three, other.token)).body.toString(), /its instance was revoked/);
});

test('revoke through the shared store: with the store down, a token that cannot be checked is refused as transient (503 with Retry-After, the default failure policy, closed) on both listeners; back, it is served again; revoke itself says it could not reach the store', async () => {
  const { token } = await mint('run-store-outage');
  const gitToken = (await mint('run-store-outage', ['--git-repo', `${git.hostKey}/org/*:read`])).token;
  assert.equal((await chat(three, token)).status, 200);
  const upLines = () => three.records().filter((r) => r.event === 'limits_store' && r.state === 'up').length;
  let before = 0;
  await redis.stop();
  try {
    await three.waitForRecord((r) => r.event === 'limits_store' && r.state === 'down');
    // Counted while the store is down: every earlier up line came before the down line, and the
    // next one cannot come before the restart (counted after it, it could already be there).
    before = upLines();
    const refused = await chat(three, token);
    assert.equal(refused.status, 503, 'transient: the token is not known to be revoked, only unchecked');
    assert.equal(refused.headers['retry-after'], '1');
    assert.match(refused.body.toString(), /revocation_store_unavailable/);
    const gitRefused = await refs(three, gitToken);
    assert.equal(gitRefused.status, 503);
    assert.equal(gitRefused.headers['retry-after'], '1');
    // The store is stopped: every connection is refused at once, so a short reach timeout is all the wait there is.
    const r = await runCommandInProcess(['revoke', '--limits-store', `redis://127.0.0.1:${redis.port}`, '--store-reach-timeout', '100ms', '--run-id', 'x']);
    assert.equal(r.code, 1);
    // With the refusal's reason when it came within the wait (it comes at once unless the machine is loaded).
    assert.match(r.stderr, /could not be reached within 0\.1 s(?: \(connect ECONNREFUSED [^)]*\))?; nothing was revoked there/);
  } finally {
    await redis.start();
  }
  await three.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up' && upLines() > before, 'the store up again');
  assert.equal((await chat(three, token)).status, 200, 'served again without a restart');
});
