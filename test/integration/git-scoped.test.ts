// Scoped, short-lived git access end to end: the REAL git, configured only by the proxy's
// `git-config --workload-token-env` output, presents a workload token minted by the proxy's
// `mint-token --git-repo` through the credential-helper flow, against the proxy as `serve` starts it, in front
// of real `git http-backend` servers. What git prints is checked as git prints it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { signBotToken } from '../../src/auth/jwt.ts';
import { eventually } from '../support/eventually.ts';
import { gitEnv, type GitResult, includeGitConfig, makeGitHome, runGit } from '../support/git-client.ts';
import { startGitServer, type GitServer } from '../support/git-server.ts';
import { send } from '../support/http-client.ts';
import { parseExposition } from '../support/prometheus.ts';
import { assertNoSecrets, type LogRecord, type ProxyProcess, stopProxyAndCleanUp } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const HOST_TOKEN_A = `scopedA_${randomBytes(16).toString('hex')}`;
const HOST_TOKEN_B = `scopedB_${randomBytes(16).toString('hex')}`;
// One secret for both listeners, the case that needs the git claim to tell the tokens apart.
const SIGNING_KEY = randomBytes(32).toString('hex');
const TOKEN_VAR = 'GIT_WORKLOAD_TOKEN';

let pki: TestPki;
let serverA: GitServer;
/** Registered from the hosts file with repos ["team/*"] and readOnly. */
let serverB: GitServer;
let proxy: ProxyProcess;
let workloadConfig: string;
let workload: { home: string; cleanup(): void };
let admin: { home: string; cleanup(): void };
let work: string;
let counter = 0;
/** The workload token: write on acme/widgets, read on the rest of acme, write on team/* of B. */
let token: string;
let gatewayToken: string;
const gitOutputs: string[] = [];

async function mint(args: string[]): Promise<string> {
  const r = await runCommandInProcess(['mint-token', '--instance-id', 'bot-7', '--workflow', 'triage', '--run-id', 'run-42', '--ttl', '10m', ...args], {
    GIT_PROXY_SIGNING_KEY: SIGNING_KEY,
    MODEL_PROXY_SIGNING_KEY: SIGNING_KEY,
  });
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim();
}

before(async () => {
  pki = makeTestPki();
  [serverA, serverB] = await Promise.all([
    startGitServer({ pki, auth: { type: 'bearer', token: HOST_TOKEN_A } }),
    startGitServer({ pki, auth: { type: 'bearer', token: HOST_TOKEN_B } }),
  ]);
  work = mkdtempSync(join(tmpdir(), 'test-git-scoped-'));
  const hostsFile = join(work, 'hosts.json');
  writeFileSync(hostsFile, JSON.stringify({ hosts: [{ host: serverB.hostKey, auth: 'bearer', tokenEnv: 'HOST_TOKEN_B', repos: ['team/*'], readOnly: true }] }));
  proxy = await startServe({
    env: {
      GIT_HOST_A: serverA.hostKey,
      GIT_HOST_A_TOKEN: HOST_TOKEN_A,
      HOST_TOKEN_B,
      GIT_PROXY_SIGNING_KEY: SIGNING_KEY,
      MODEL_PROXY_SIGNING_KEY: SIGNING_KEY,
      MODEL_GATEWAY_ENABLED: 'true',
      NODE_EXTRA_CA_CERTS: pki.caFile,
    },
    args: ['--git-auth-listen', '127.0.0.1:0', '--model-gateway-listen', '127.0.0.1:0', '--git-hosts', hostsFile],
    listeners: ['git', 'model'],
  });

  token = await mint(['--git-repo', `${serverA.hostKey}/acme/widgets:write`, '--git-repo', `${serverA.hostKey}/acme/*:read`, '--git-repo', `${serverB.hostKey}/team/*:write`]);
  gatewayToken = await mint([]);

  // The orchestrator's second command: the workload's git configuration, with no token in it.
  const generated = await runCommandInProcess(['git-config', '--git-hosts', hostsFile, '--proxy-host', `127.0.0.1:${proxy.ports.git}`, '--workload-token-env', TOKEN_VAR], {
    GIT_HOST_A: serverA.hostKey,
  });
  assert.equal(generated.code, 0, generated.stderr);
  workloadConfig = generated.stdout;
  workload = makeGitHome();
  admin = makeGitHome();
  includeGitConfig(workload.home, workloadConfig);

  for (const name of ['acme/widgets.git', 'acme/docs.git', 'other/secret.git']) serverA.createBareRepo(name);
  for (const name of ['team/tools.git', 'elsewhere/tools.git']) serverB.createBareRepo(name);
});

after(() => stopProxyAndCleanUp(proxy, { close: [serverA, serverB], cleanup: [workload, admin, pki], dirs: [work] }));

/** Runs git as the workload, the token in the variable (the orchestrator's third step). */
async function git(args: string[], opts: { cwd?: string; token?: string | null } = {}): Promise<GitResult> {
  const tokenValue = opts.token === undefined ? token : opts.token;
  const result = await runGit(args, { cwd: opts.cwd, home: workload.home, env: tokenValue === null ? {} : { [TOKEN_VAR]: tokenValue } });
  // What git printed (its arguments may hold a token on purpose: the http.extraHeader test).
  gitOutputs.push(`${result.stdout}${result.stderr}`);
  return result;
}

async function mustGit(args: string[], opts: { cwd?: string; token?: string | null } = {}): Promise<GitResult> {
  const r = await git(args, opts);
  assert.equal(r.code, 0, `git ${args.join(' ')} failed (exit ${r.code}):\n${r.stderr}\nproxy output:\n${proxy.output()}`);
  return r;
}

const url = (server: GitServer, name: string) => `https://${server.hostKey}/${name}`;
const freshDir = (label: string) => join(work, `${label}-${++counter}`);
const requestRecords = (): LogRecord[] => proxy.records().filter((r) => r.event === 'request' && r.listener === 'git');

function bareRev(server: GitServer, name: string): string {
  return execFileSync('git', ['--git-dir', join(server.root, name), 'rev-parse', 'main'], { env: gitEnv(admin.home), encoding: 'utf8' }).trim();
}

/** git_proxy_scope_refusals_total now, by "host reason". */
async function scopeRefusals(): Promise<Map<string, number>> {
  const text = (await send(proxy.ports.metrics!, 'GET', '/metrics')).body.toString();
  const counts = new Map<string, number>();
  for (const s of parseExposition(text)) if (s.name === 'git_proxy_scope_refusals_total') counts.set(`${s.labels.host} ${s.labels.reason}`, s.value);
  return counts;
}

/**
 * Resolves once the log holds a line for every git request the proxy has counted so far: a
 * request is counted (git_proxy_requests_total, or the challenge counter) as its line is written,
 * and the line reaches this process a moment later.
 */
async function everyCountedRequestLogged(signal: AbortSignal): Promise<void> {
  const samples = parseExposition((await send(proxy.ports.metrics!, 'GET', '/metrics')).body.toString());
  const counted = samples.filter((s) => s.name === 'git_proxy_requests_total' || s.name === 'git_proxy_auth_challenges_total').reduce((n, s) => n + s.value, 0);
  await eventually(`the log lines of the ${counted} git requests counted`, () => requestRecords().length >= counted, signal);
}

/** The refusal counters that moved since `before`, by how much: each test names exactly its own. */
async function refusalsSince(before: Map<string, number>): Promise<Record<string, number>> {
  const moved: Record<string, number> = {};
  for (const [key, value] of await scopeRefusals()) if (value !== (before.get(key) ?? 0)) moved[key] = value - (before.get(key) ?? 0);
  return moved;
}

async function commitIn(dir: string, file: string): Promise<string> {
  writeFileSync(join(dir, file), `${randomBytes(8).toString('hex')}\n`);
  await mustGit(['add', file], { cwd: dir });
  await mustGit(['commit', '--quiet', '-m', `add ${file}`], { cwd: dir });
  return (await mustGit(['rev-parse', 'HEAD'], { cwd: dir })).stdout.trim();
}

test('the workload git config routes through the proxy and gives git the token from the variable, holding no token', () => {
  assert.ok(workloadConfig.includes(`[credential "http://127.0.0.1:${proxy.ports.git}"]\n\thelper = ""\n`), workloadConfig);
  assert.ok(workloadConfig.includes(`$${TOKEN_VAR}`), workloadConfig);
  assertNoSecrets(workloadConfig, [token, gatewayToken, SIGNING_KEY, HOST_TOKEN_A, HOST_TOKEN_B], 'the git-config output');
});

test('clone and push inside the scope work through the credential-helper flow', async () => {
  const logBefore = requestRecords().length;
  const refusedBefore = await scopeRefusals();
  const dir = freshDir('widgets');
  await mustGit(['clone', '--quiet', url(serverA, 'acme/widgets.git'), dir]);
  const head = await commitIn(dir, 'scoped.txt');
  await mustGit(['push', '--quiet', 'origin', 'main'], { cwd: dir });
  assert.equal(bareRev(serverA, 'acme/widgets.git'), head, 'the push landed upstream');

  // git's first request of each command gets the challenge; the retry carries the token.
  await proxy.waitForRecord(() => requestRecords().slice(logBefore).some((r) => r.route === 'receive-pack'), 'the push log line');
  const records = requestRecords().slice(logBefore);
  const challenged = records.filter((r) => r.status === 401);
  assert.ok(challenged.length >= 2 && challenged.every((r) => r.challenge === true && r.error === undefined && r.instance_id === undefined), JSON.stringify(challenged));
  const served = records.filter((r) => r.status === 200);
  assert.deepEqual(new Set(served.map((r) => r.route)), new Set(['info-refs', 'upload-pack', 'receive-pack']));
  for (const r of served) assert.deepEqual([r.instance_id, r.workflow, r.run_id], ['bot-7', 'triage', 'run-42']);
  // git's first, unauthenticated request of each command (the 401 challenge) is no refusal.
  assert.deepEqual(await refusalsSince(refusedBefore), {});
});

test("a push to a repository the token may only read fails with the proxy's message as git prints it", async () => {
  const dir = freshDir('docs');
  await mustGit(['clone', '--quiet', url(serverA, 'acme/docs.git'), dir]);
  const before = bareRev(serverA, 'acme/docs.git');
  await commitIn(dir, 'not-allowed.txt');
  const refusedBefore = await scopeRefusals();
  const push = await git(['push', 'origin', 'main'], { cwd: dir });
  assert.notEqual(push.code, 0);
  assert.ok(push.stderr.includes(`remote: git-auth-proxy: this workload may not push to ${serverA.hostKey}/acme/docs.git (its token allows reading only)\n`), push.stderr);
  assert.match(push.stderr, /The requested URL returned error: 403/);
  assert.equal(bareRev(serverA, 'acme/docs.git'), before, 'nothing was pushed');
  assert.deepEqual(await refusalsSince(refusedBefore), { [`${serverA.hostKey} push_not_in_scope`]: 1 });
});

test("a clone outside the scope fails with the proxy's message as git prints it", async () => {
  const seenBefore = serverA.requests.length;
  const refusedBefore = await scopeRefusals();
  const r = await git(['clone', url(serverA, 'other/secret.git'), freshDir('secret')]);
  assert.equal(r.code, 128);
  assert.ok(r.stderr.includes(`remote: git-auth-proxy: this workload may not read ${serverA.hostKey}/other/secret.git\n`), r.stderr);
  assert.ok(!serverA.requests.slice(seenBefore).some((req) => req.url.includes('other/secret')), 'the git host never saw the request');
  assert.deepEqual(await refusalsSince(refusedBefore), { [`${serverA.hostKey} repo_not_in_scope`]: 1 });
});

test('an expired token fails with the reason as git prints it, and a fresh one in the variable works at once', async () => {
  const now = Math.floor(Date.now() / 1000);
  const expired = signBotToken(
    { sub: 'bot-7', workflow: 'triage', run_id: 'run-42', iat: now - 3600, exp: now - 60, git: [`${serverA.hostKey}/acme/widgets:read`] },
    Buffer.from(SIGNING_KEY, 'utf8'),
  );
  const refusedBefore = await scopeRefusals();
  const r = await git(['clone', url(serverA, 'acme/widgets.git'), freshDir('expired')], { token: expired });
  assert.equal(r.code, 128);
  assert.ok(r.stderr.includes('remote: git-auth-proxy: the workload token was refused: expired\n'), r.stderr);
  assert.match(r.stderr, /fatal: Authentication failed for/);
  const rec = await proxy.waitForRecord((l) => l.event === 'request' && l.token_error === 'expired', 'the refusal log line');
  assert.equal(rec.error, 'workload_token_invalid');
  assert.deepEqual(await refusalsSince(refusedBefore), { [`${serverA.hostKey} workload_token_invalid`]: 1 });
  // The same configuration, the variable rotated: the helper reads it when git asks.
  await mustGit(['clone', '--quiet', url(serverA, 'acme/widgets.git'), freshDir('rotated')]);
});

test('without the variable git is told why it has no token, and never prompts', async () => {
  const refusedBefore = await scopeRefusals();
  const r = await git(['clone', url(serverA, 'acme/widgets.git'), freshDir('no-token')], { token: null });
  assert.equal(r.code, 128);
  assert.ok(r.stderr.includes(`git-auth-proxy: $${TOKEN_VAR} is empty: no workload token for git to present\n`), r.stderr);
  assert.match(r.stderr, /terminal prompts disabled/);
  assert.deepEqual(await refusalsSince(refusedBefore), {}, 'no token presented: a challenge, no refusal');
});

test('a Bearer token from http.extraHeader is accepted too', async (t) => {
  // The earlier tests' last lines may still be on their way: count from after them.
  await everyCountedRequestLogged(t.signal);
  const logBefore = requestRecords().length;
  const seenBefore = serverA.requests.length;
  await mustGit(['-c', `http.extraHeader=Authorization: Bearer ${token}`, 'clone', '--quiet', url(serverA, 'acme/widgets.git'), freshDir('bearer')], { token: null });
  // Every request of the clone reached the git host; each one's line comes a moment after git has exited.
  const forwarded = serverA.requests.length - seenBefore;
  await eventually(`the log lines of the clone's ${forwarded} requests`, () => requestRecords().length - logBefore >= forwarded, t.signal);
  const records = requestRecords().slice(logBefore);
  assert.ok(records.length >= 2 && records.every((r) => r.status === 200 && r.instance_id === 'bot-7'), JSON.stringify(records));
});

test("the hosts file's readOnly and repos limit every workload, whatever its token allows", async () => {
  const dir = freshDir('team-tools');
  await mustGit(['clone', '--quiet', url(serverB, 'team/tools.git'), dir]);
  await commitIn(dir, 'read-only-host.txt');
  let refusedBefore = await scopeRefusals();
  const push = await git(['push', 'origin', 'main'], { cwd: dir });
  assert.notEqual(push.code, 0);
  assert.ok(push.stderr.includes(`remote: git-auth-proxy: the proxy allows no pushes to ${serverB.hostKey}: it is read-only in the hosts file\n`), push.stderr);
  assert.deepEqual(await refusalsSince(refusedBefore), { [`${serverB.hostKey} host_read_only`]: 1 });

  refusedBefore = await scopeRefusals();
  const outside = await git(['clone', url(serverB, 'elsewhere/tools.git'), freshDir('elsewhere')]);
  assert.equal(outside.code, 128);
  assert.ok(
    outside.stderr.includes(`remote: git-auth-proxy: the proxy serves no repository ${serverB.hostKey}/elsewhere/tools.git: the hosts file limits ${serverB.hostKey} to other repositories\n`),
    outside.stderr,
  );
  assert.deepEqual(await refusalsSince(refusedBefore), { [`${serverB.hostKey} repo_not_in_host_repos`]: 1 });
});

test('one secret signs both kinds of token, and neither listener accepts the other kind', async () => {
  const atGateway = await send(proxy.ports.model!, 'GET', '/v1/models', { headers: { authorization: `Bearer ${token}` } });
  assert.equal(atGateway.status, 401);
  assert.match(atGateway.body.toString(), /meant for the git proxy/);
  assert.equal((await send(proxy.ports.model!, 'GET', '/v1/models', { headers: { authorization: `Bearer ${gatewayToken}` } })).status, 200);

  const refusedBefore = await scopeRefusals();
  const r = await git(['clone', url(serverA, 'acme/widgets.git'), freshDir('gateway-token')], { token: gatewayToken });
  assert.equal(r.code, 128);
  assert.ok(r.stderr.includes('remote: git-auth-proxy: the workload token was refused: no git scope\n'), r.stderr);
  assert.deepEqual(await refusalsSince(refusedBefore), { [`${serverA.hostKey} workload_token_invalid`]: 1 });
});

test("git's first, unauthenticated request is challenged, not counted as a scope refusal", async () => {
  // Each refusal test above checks that exactly its own counter moved by one; this one needs no other test.
  const refusedBefore = await scopeRefusals();
  const r = await send(proxy.ports.git!, 'GET', `/${serverA.hostKey}/acme/widgets.git/info/refs?service=git-upload-pack`);
  assert.equal(r.status, 401);
  assert.deepEqual(await refusalsSince(refusedBefore), {});
  const text = (await send(proxy.ports.metrics!, 'GET', '/metrics')).body.toString();
  assert.doesNotMatch(text, /reason="workload_token_missing"/, "git's first, unauthenticated request is no refusal");
});

test('the workload token reaches no upstream and appears in no log line and no file git-config or git wrote', () => {
  const secrets = [token, gatewayToken, SIGNING_KEY];
  for (const server of [serverA, serverB]) {
    assert.ok(server.requests.length > 0);
    for (const r of server.requests) {
      assert.ok(r.authorized, `${server.hostKey} ${r.method} ${r.url}: only the host credential`);
      assertNoSecrets(`${r.url}\n${JSON.stringify(r.headers)}`, secrets, `an upstream request to ${server.hostKey}`);
    }
  }
  assertNoSecrets(proxy.output(), [...secrets, HOST_TOKEN_A, HOST_TOKEN_B], 'the proxy output');
  assertNoSecrets(workloadConfig, secrets, 'the git-config output');
  // Every file in the workload's HOME and in each clone's .git, except objects and packs.
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (name === 'objects') continue;
      if (statSync(path).isDirectory()) walk(path);
      else files.push(path);
    }
  };
  walk(workload.home);
  for (const d of readdirSync(work)) if (statSync(join(work, d)).isDirectory()) walk(join(work, d, '.git'));
  assert.ok(files.length > 20);
  for (const f of files) assertNoSecrets(readFileSync(f, 'latin1'), secrets, f);
  assertNoSecrets(gitOutputs.join('\n'), [token, gatewayToken, SIGNING_KEY, HOST_TOKEN_A, HOST_TOKEN_B], "git's stdout/stderr");
});
