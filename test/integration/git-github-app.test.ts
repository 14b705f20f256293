// GitHub App git hosts through the proxy as `serve` starts it: the real git client, configured
// by the proxy's own `git-config`, clones and pushes through the proxy to a `git http-backend`
// host that accepts only a live installation token as Basic x-access-token; the tokens come from
// a fake GitHub API that verifies the app's JWT with its public key. A host whose app cannot get a
// token fails closed with git printing why; a host that echoes the token gets it redacted; no
// token, JWT or key reaches a log line, a record, git's output or an answer.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type GitResult, includeGitConfig, makeGitHome, runGit } from '../support/git-client.ts';
import { startGitServer, type GitServer } from '../support/git-server.ts';
import { startGitHubAppFake, type GitHubAppFake } from '../support/github-app-fake.ts';
import { seenResponses, send } from '../support/http-client.ts';
import { assertNoSecrets, type ProxyProcess, stopProxyAndCleanUp } from '../support/proxy-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { rsaKeyPair } from '../support/test-keys.ts';

const APP = rsaKeyPair(2048);
const PEM = APP.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const APP_ID = 123456;
const INSTALLATION = 4242;

let pki: TestPki;
let api: GitHubAppFake;
let good: GitServer;
/** A host that answers every request 403, echoing the credential it was sent in its body and a header. */
let echo: Server;
/** A host whose app has no such installation: it must never be reached. */
let unreachable: Server;
const unreachableSeen: string[] = [];
let proxy: ProxyProcess;
let dir: string;
let workload: { home: string; cleanup(): void };
const gitOutputs: string[] = [];

const basicOf = (token: string) => Buffer.from(`x-access-token:${token}`).toString('base64');
const portOf = (s: Server) => (s.address() as AddressInfo).port;
const hostKeyOf = (s: Server) => `127.0.0.1:${portOf(s)}`;

before(async () => {
  pki = makeTestPki();
  dir = mkdtempSync(join(tmpdir(), 'git-github-app-'));
  api = await startGitHubAppFake({ pki, publicKey: APP.publicKey, issuer: APP_ID, installationId: INSTALLATION, grantedRepositories: ['widgets', 'gadgets'], grantedPermissions: { contents: 'write', metadata: 'read' }, basePath: '/api/v3' });
  good = await startGitServer({
    pki,
    auth: { type: 'check', accepts: (authorization) => /^Basic /.test(authorization ?? '') && /^x-access-token:(.+)$/.test(Buffer.from(authorization!.slice(6), 'base64').toString()) && api.isValid(Buffer.from(authorization!.slice(6), 'base64').toString().slice('x-access-token:'.length)) },
  });
  echo = createServer({ key: pki.keyPem, cert: pki.certPem }, (req, res) => {
    const authorization = req.headers.authorization ?? '';
    const token = Buffer.from(authorization.replace(/^Basic /, ''), 'base64').toString().replace(/^x-access-token:/, '');
    req.resume();
    res.writeHead(403, { 'content-type': 'application/json', 'x-echo': token }).end(JSON.stringify({ message: `denied for ${token}`, header: authorization, escaped: token.replace(/_/g, '\\u005f') }));
  });
  unreachable = createServer({ key: pki.keyPem, cert: pki.certPem }, (req, res) => {
    unreachableSeen.push(req.url ?? '');
    res.writeHead(500).end();
  });
  await Promise.all([new Promise<void>((r) => echo.listen(0, '127.0.0.1', r)), new Promise<void>((r) => unreachable.listen(0, '127.0.0.1', r))]);
  writeFileSync(join(dir, 'app.pem'), PEM);
  const app = { appId: APP_ID, installationId: INSTALLATION, privateKeyFile: join(dir, 'app.pem'), apiUrl: api.apiUrl };
  const hostsFile = join(dir, 'hosts.json');
  writeFileSync(
    hostsFile,
    JSON.stringify({
      hosts: [
        { host: good.hostKey, auth: 'github-app', githubApp: { ...app, repositories: ['widgets'], permissions: { contents: 'write', metadata: 'read' } } },
        { host: hostKeyOf(echo), auth: 'github-app', githubApp: app },
        { host: hostKeyOf(unreachable), auth: 'github-app', githubApp: { ...app, installationId: 999 } },
      ],
    }),
  );
  proxy = await startServe({ env: { NODE_EXTRA_CA_CERTS: pki.caFile }, args: ['--git-auth-listen', '127.0.0.1:0', '--git-hosts', hostsFile] });
  const generated = await runCommandInProcess(['git-config', '--git-hosts', hostsFile], { GIT_AUTH_PROXY_HOST: `127.0.0.1:${proxy.ports.git}` });
  assert.equal(generated.code, 0, generated.stderr);
  workload = makeGitHome();
  includeGitConfig(workload.home, generated.stdout);
});

after(() =>
  stopProxyAndCleanUp(proxy, {
    close: [good, api, ...[echo, unreachable].map((server) => ({ close: () => new Promise((closed) => server?.close(closed)) }))],
    cleanup: [workload, pki],
    dirs: [dir],
  }),
);

async function git(args: string[], opts: { cwd?: string; allowFailure?: boolean } = {}): Promise<GitResult> {
  const result = await runGit(args, { cwd: opts.cwd, home: workload.home });
  gitOutputs.push(`$ git ${args.join(' ')}\n${result.stdout}${result.stderr}`);
  if (!opts.allowFailure) assert.equal(result.code, 0, `git ${args.join(' ')} failed:\n${result.stderr}\nproxy output:\n${proxy.output()}`);
  return result;
}

/** The exchanges the good host's app made: the narrowed ones. */
const goodExchanges = () => api.exchanges.filter((e) => (e.body as { repositories?: unknown } | undefined)?.repositories !== undefined);

test('github app host: a real git clone and push through the proxy carry the installation token as Basic x-access-token, one exchange serving every request, the narrowing sent as configured', async () => {
  const bare = good.createBareRepo('acme/widgets.git');
  const before = good.requests.length;
  const clone = join(dir, 'widgets');
  await git(['clone', '--quiet', `https://${good.hostKey}/acme/widgets.git`, clone]);
  writeFileSync(join(clone, 'pushed.txt'), 'through a GitHub App token\n');
  await git(['add', 'pushed.txt'], { cwd: clone });
  await git(['commit', '--quiet', '-m', 'push with an installation token'], { cwd: clone });
  await git(['push', '--quiet', 'origin', 'main'], { cwd: clone });
  const head = (await git(['rev-parse', 'HEAD'], { cwd: clone })).stdout.trim();
  assert.equal((await runGit(['--git-dir', bare, 'rev-parse', 'main'], { home: workload.home })).stdout.trim(), head, 'the push landed');

  const seen = good.requests.slice(before);
  assert.ok(seen.length >= 4, `info/refs and upload-pack, info/refs and receive-pack: ${seen.length} requests`);
  assert.ok(seen.every((r) => r.authorized), 'every request carried a live installation token');
  const exchanges = goodExchanges();
  assert.equal(exchanges.length, 1, 'one token for every request');
  assert.equal(exchanges[0]!.status, 201, `the fake refused: ${exchanges[0]!.refused}`);
  assert.equal(exchanges[0]!.claims.iss, APP_ID);
  assert.equal(exchanges[0]!.url, `/api/v3/app/installations/${INSTALLATION}/access_tokens`);
  assert.deepEqual(exchanges[0]!.body, { repositories: ['widgets'], permissions: { contents: 'write', metadata: 'read' } });
  assert.ok(seen.every((r) => r.headers.authorization === `Basic ${basicOf(exchanges[0]!.token!)}`));
  const listening = proxy.records().find((r) => r.event === 'listening' && r.listener === 'git') as { hosts: { host: string; auth: string; credential: string }[] };
  assert.deepEqual(listening.hosts.map((h) => [h.auth, h.credential]), [['github-app', 'present'], ['github-app', 'present'], ['github-app', 'present']]);
});

test('github app host: a failing token exchange fails closed: git prints the proxy\'s 502 line naming the host and what failed, nothing reaches the host, the failure is logged', async () => {
  const host = hostKeyOf(unreachable);
  const result = await git(['clone', '--quiet', `https://${host}/acme/widgets.git`, join(dir, 'never')], { allowFailure: true });
  assert.notEqual(result.code, 0);
  assert.ok(
    result.stderr.includes(`git-auth-proxy: the proxy could not obtain the GitHub App installation token for git host ${host} (no valid GitHub App installation token (the GitHub API at ${api.apiUrl} answered 404: this app has no installation 999; check installationId)); the operator must fix its githubApp settings`),
    result.stderr,
  );
  assert.deepEqual(unreachableSeen, [], 'nothing was forwarded');
  // The record is written when the handler finishes, which may be just after git has the answer.
  const record = await proxy.waitForRecord((r) => r.event === 'request' && r.host === host, 'the refused request\'s record');
  assert.equal(record?.status, 502);
  assert.equal(record?.error, 'git_app_token_failed');
  const logged = await proxy.waitForRecord((r) => r.event === 'credential_refresh_failed' && r.host === host, 'the failed refresh logged');
  assert.match(String(logged.reason), /answered 404: this app has no installation 999/);
});

test('github app host: an installation token a host echoes in its error body or a header is redacted before the answer reaches the workload', async () => {
  const reply = await send(proxy.ports.git!, 'GET', `/${hostKeyOf(echo)}/acme/widgets.git/info/refs?service=git-upload-pack`);
  assert.equal(reply.status, 403);
  const issued = api.exchanges.filter((e) => e.token !== undefined && (e.body as object | undefined) !== undefined && Object.keys(e.body as object).length === 0);
  assert.equal(issued.length, 1, 'the echo host has its own token');
  const token = issued[0]!.token!;
  const body = reply.body.toString('latin1');
  assert.match(body, /\[REDACTED\]/);
  assertNoSecrets(body, [token, basicOf(token), token.replace(/_/g, '\\u005f')], 'the relayed error body');
  assert.equal(reply.headers['x-echo'], undefined, 'a header carrying the token is dropped');
});

test('github app host: no installation token, JWT or private key appears in the logs, the records, git\'s output or any answer', () => {
  const secrets = [PEM.split('\n')[1]!, ...api.exchanges.flatMap((e) => [String(e.headers.authorization ?? '').replace(/^Bearer /, ''), ...(e.token ? [e.token, basicOf(e.token)] : [])])].filter((s) => s.length > 0);
  assert.ok(secrets.length >= 7, `tokens, their Basic values and the JWTs: ${secrets.length}`);
  assertNoSecrets(proxy.output(), secrets, 'the proxy output (logs and records)');
  assertNoSecrets(gitOutputs.join('\n'), secrets, "git's output");
  assertNoSecrets(seenResponses.join('\n'), secrets, 'the answers');
});
