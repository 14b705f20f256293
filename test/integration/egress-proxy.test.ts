// Outbound through a corporate egress proxy (HTTPS_PROXY, NO_PROXY, --egress-proxy-auth-file),
// through the proxy as `serve` starts it: a CONNECT proxy on loopback (test/support/connect-proxy.ts) records
// every byte it receives. Model calls, a real git clone and the credential fetches (a Google
// token endpoint, STS web identity) all reach their upstream through it, TLS end to end inside
// the tunnel: the egress proxy sees the CONNECT line, Host and its own Proxy-Authorization, never
// an upstream credential. NO_PROXY sends an upstream direct; an egress proxy that refuses, wants a
// credential, or frames its answer badly gives a 502 naming it and what it did.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startTokenEndpoint, type TokenEndpoint } from '../support/cloud-fakes.ts';
import { startConnectProxy, type ConnectProxy, type ConnectRecord } from '../support/connect-proxy.ts';
import { makeGitHome, runGit } from '../support/git-client.ts';
import { startGitServer, type GitServer } from '../support/git-server.ts';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { assertNoSecrets, type ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { rsaKeyPair } from '../support/test-keys.ts';

const API_KEY = `sk-egress-${randomBytes(16).toString('hex')}`;
const GIT_TOKEN = `ghp_egress${randomBytes(16).toString('hex')}`;
const EGRESS_AUTH = `Basic ${Buffer.from(`corp-user:${randomBytes(8).toString('hex')}`).toString('base64')}`;
const STS_SECRET = `sts-secret-${randomBytes(8).toString('hex')}`;
const { privateKey, publicKey } = rsaKeyPair(2048);

let pki: TestPki;
let model: ModelUpstream;
let git: GitServer;
let tokens: TokenEndpoint;
let sts: HttpsServer;
let stsPort: number;
let egress: ConnectProxy;
let proxy: ProxyProcess;
let dir: string;
let providersFile: string;
let authFile: string;
const extra: { stop(): Promise<unknown> }[] = [];

const CHAT = (model: string) => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }) });
const bytesOf = (r: ConnectRecord) => Buffer.concat([Buffer.from(r.rawHead, 'latin1'), ...r.tunnelled]).toString('latin1');
const targets = (e: ConnectProxy) => e.records.map((r) => r.requestLine.split(' ')[1]);

before(async () => {
  pki = makeTestPki();
  [model, git, tokens] = await Promise.all([startModelUpstream(pki), startGitServer({ pki, auth: { type: 'bearer', token: GIT_TOKEN } }), startTokenEndpoint(pki, publicKey)]);
  git.createBareRepo('org/repo.git');
  sts = createHttpsServer({ key: pki.keyPem, cert: pki.certPem }, (req, res) => {
    req.resume();
    req.on('end', () => {
      const expiry = new Date(Date.now() + 3600_000).toISOString();
      res.writeHead(200, { 'content-type': 'text/xml' }).end(`<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIAEGRESS</AccessKeyId><SecretAccessKey>${STS_SECRET}</SecretAccessKey><SessionToken>egress-session</SessionToken><Expiration>${expiry}</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`);
    });
  });
  await new Promise<void>((r) => sts.listen(0, '127.0.0.1', r));
  stsPort = (sts.address() as AddressInfo).port;
  dir = mkdtempSync(join(tmpdir(), 'egress-proxy-'));
  writeFileSync(join(dir, 'key'), `${API_KEY}\n`);
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  writeFileSync(join(dir, 'sa.json'), JSON.stringify({ type: 'service_account', private_key_id: 'k1', private_key: pem, client_email: 'gw@proj.iam.gserviceaccount.com', token_uri: tokens.uri }));
  writeFileSync(join(dir, 'eks-token'), 'eks-projected-token\n');
  providersFile = join(dir, 'providers.json');
  writeFileSync(
    providersFile,
    JSON.stringify({
      providers: [
        { name: 'openai', kind: 'openai', baseUrl: model.baseUrl, keyFile: join(dir, 'key'), models: ['gpt-test'], caFile: pki.caFile },
        { name: 'vertex', kind: 'openai', baseUrl: model.baseUrl, credential: { type: 'google-service-account', keyFile: join(dir, 'sa.json') }, models: ['gemini-test'], caFile: pki.caFile },
        { name: 'eks', kind: 'openai', baseUrl: model.baseUrl, credential: { type: 'aws-web-identity', roleArn: 'arn:aws:iam::123456789012:role/gw', tokenFile: join(dir, 'eks-token'), region: 'us-west-2', stsEndpoint: `https://127.0.0.1:${stsPort}/` }, models: ['eks-test'], caFile: pki.caFile },
      ],
    }),
  );
  authFile = join(dir, 'egress-auth');
  writeFileSync(authFile, `${EGRESS_AUTH}\n`);
  const allowed = new Set([`127.0.0.1:${model.port}`, git.hostKey, new URL(tokens.uri).host, `127.0.0.1:${stsPort}`]);
  egress = await startConnectProxy({ kind: 'tunnel', allow: (t) => allowed.has(t), requireAuthorization: EGRESS_AUTH });
  proxy = await startEgressProxy({ HTTPS_PROXY: egress.url }, ['--egress-proxy-auth-file', authFile]);
});

after(async () => {
  await Promise.all([proxy?.stop(), ...extra.map((p) => p.stop())]);
  await Promise.all([model?.close(), git?.close(), tokens?.close(), egress?.close(), new Promise((r) => sts?.close(r))]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The proxy with both listeners, the git host and the providers, and the egress settings given. */
async function startEgressProxy(env: Record<string, string>, args: string[] = []): Promise<ProxyProcess> {
  const p = await startServe({
    env: { NODE_EXTRA_CA_CERTS: pki.caFile, GIT_HOST_A: git.hostKey, GIT_HOST_A_TOKEN: GIT_TOKEN, ...env },
    args: ['--git-auth-listen', '127.0.0.1:0', '--model-gateway-listen', '127.0.0.1:0', '--providers', providersFile, ...args],
    listeners: ['git', 'model'],
  });
  if (p !== proxy) extra.push(p);
  return p;
}

/** Every byte any egress proxy received holds none of the upstream credentials. */
function assertNoCredentialReachedEgress(e: ConnectProxy): void {
  for (const r of e.records) {
    assertNoSecrets(bytesOf(r), [API_KEY, GIT_TOKEN, STS_SECRET, 'ya29.fake', 'eks-projected-token', privateKey.export({ type: 'pkcs8', format: 'pem' }).toString().split('\n')[1]!], `the bytes the egress proxy received (${r.requestLine})`);
  }
}

test('egress: a model call goes through a CONNECT tunnel to its provider; the egress proxy receives only the CONNECT line, Host and Proxy-Authorization, never the key; the next call reuses the tunnel', async () => {
  const r = await send(proxy.ports.model!, 'POST', '/v1/chat/completions', CHAT('gpt-test'));
  assert.equal(r.status, 200, r.body.toString());
  assert.equal(model.requests.at(-1)!.headers.authorization, `Bearer ${API_KEY}`, 'the provider got the key, inside the tunnel');
  const target = `127.0.0.1:${model.port}`;
  const record = egress.records.find((x) => x.requestLine === `CONNECT ${target} HTTP/1.1`);
  assert.ok(record?.opened, `a tunnel to ${target}: ${targets(egress).join(', ')}`);
  assert.deepEqual(record.headers, [['host', target], ['proxy-authorization', EGRESS_AUTH]]);
  const tunnelsBefore = egress.records.length;
  assert.equal((await send(proxy.ports.model!, 'POST', '/v1/chat/completions', CHAT('gpt-test'))).status, 200);
  assert.equal(egress.records.length, tunnelsBefore, 'the pooled connection (inside its tunnel) served the second call');
  assertNoCredentialReachedEgress(egress);
});

test('egress: a real git clone goes through a CONNECT tunnel to the git host; its token never reaches the egress proxy', async () => {
  const home = makeGitHome();
  try {
    const config = await runCommandInProcess(['git-config'], { GIT_AUTH_PROXY_HOST: `127.0.0.1:${proxy.ports.git}`, GIT_HOST_A: git.hostKey });
    assert.equal(config.code, 0, config.stderr);
    writeFileSync(join(home.home, 'proxy.gitconfig'), config.stdout);
    assert.equal((await runGit(['config', '--global', '--add', 'include.path', join(home.home, 'proxy.gitconfig')], { home: home.home })).code, 0);
    const dest = join(dir, 'clone');
    const cloned = await runGit(['clone', '--quiet', `https://${git.hostKey}/org/repo.git`, dest], { home: home.home });
    assert.equal(cloned.code, 0, `${cloned.stderr}\n${proxy.output()}`);
    assert.ok(git.requests.some((q) => q.authorized), 'the git host got the token, inside the tunnel');
    assert.ok(egress.records.some((x) => x.requestLine === `CONNECT ${git.hostKey} HTTP/1.1` && x.opened), targets(egress).join(', '));
    assertNoCredentialReachedEgress(egress);
  } finally {
    home.cleanup();
  }
});

test('egress: the credential fetches (a Google token endpoint, STS web identity) go through the tunnel, and what they mint is used', async () => {
  assert.equal((await send(proxy.ports.model!, 'POST', '/v1/chat/completions', CHAT('gemini-test'))).status, 200);
  assert.match(String(model.requests.at(-1)!.headers.authorization), /^Bearer ya29\.fake-\d+$/);
  assert.equal((await send(proxy.ports.model!, 'POST', '/v1/chat/completions', CHAT('eks-test'))).status, 200);
  assert.match(String(model.requests.at(-1)!.headers.authorization), /^AWS4-HMAC-SHA256 Credential=ASIAEGRESS\//);
  const seen = targets(egress);
  assert.ok(seen.includes(new URL(tokens.uri).host), `the token endpoint through the egress proxy: ${seen.join(', ')}`);
  assert.ok(seen.includes(`127.0.0.1:${stsPort}`), `STS through the egress proxy: ${seen.join(', ')}`);
  assertNoCredentialReachedEgress(egress);
});

test('egress: the listening lines name the egress proxy each host and provider is reached through; the egress credential is never logged', async () => {
  const gitLine = await proxy.waitForRecord((r) => r.event === 'listening' && r.listener === 'git');
  assert.deepEqual((gitLine.hosts as { host: string; egress: string }[]).map((h) => [h.host, h.egress]), [[git.hostKey, `127.0.0.1:${egress.port}`]]);
  const modelLine = await proxy.waitForRecord((r) => r.event === 'listening' && r.listener === 'model');
  assert.deepEqual((modelLine.providers as { egress: string }[]).map((p) => p.egress), Array(3).fill(`127.0.0.1:${egress.port}`));
  assertNoSecrets(proxy.output(), [EGRESS_AUTH, EGRESS_AUTH.slice(6), API_KEY, GIT_TOKEN], 'the proxy log');
});

test('egress: NO_PROXY with a port sends that upstream direct and leaves the others to the egress proxy', async () => {
  const own = await startConnectProxy({ kind: 'tunnel' });
  try {
    const p = await startEgressProxy({ https_proxy: own.url, no_proxy: `localhost, ${git.hostKey}` });
    const gitLine = await p.waitForRecord((r) => r.event === 'listening' && r.listener === 'git');
    assert.equal((gitLine.hosts as { egress: string }[])[0]!.egress, 'direct');
    const refs = await send(p.ports.git!, 'GET', `/${git.hostKey}/org/repo.git/info/refs?service=git-upload-pack`);
    assert.equal(refs.status, 200);
    assert.equal((await send(p.ports.model!, 'POST', '/v1/chat/completions', CHAT('gpt-test'))).status, 200);
    const seen = targets(own);
    assert.ok(seen.includes(`127.0.0.1:${model.port}`), `the provider through the egress proxy: ${seen.join(', ')}`);
    assert.ok(!seen.includes(git.hostKey), `the git host direct: ${seen.join(', ')}`);
  } finally {
    await own.close();
  }
});

test('egress refuses: a 403 to CONNECT is a 502 egress_proxy_failed naming the egress proxy and its status, on both listeners; nothing reaches the upstream', async () => {
  const refusing = await startConnectProxy({ kind: 'refuse', status: 403 });
  try {
    const p = await startEgressProxy({ HTTPS_PROXY: refusing.url });
    const modelBefore = model.requests.length;
    const r = await send(p.ports.model!, 'POST', '/v1/chat/completions', CHAT('gpt-test'));
    assert.equal(r.status, 502);
    const error = (JSON.parse(r.body.toString()) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, 'egress_proxy_failed');
    assert.equal(error.message, `the egress proxy 127.0.0.1:${refusing.port} answered 403 to CONNECT 127.0.0.1:${model.port}; the operator must check the egress proxy`);
    assert.equal(model.requests.length, modelBefore);
    const gitBefore = git.requests.length;
    const refs = await send(p.ports.git!, 'GET', `/${git.hostKey}/org/repo.git/info/refs?service=git-upload-pack`);
    assert.equal(refs.status, 502);
    assert.equal(refs.body.toString(), `git-auth-proxy: the egress proxy 127.0.0.1:${refusing.port} answered 403 to CONNECT ${git.hostKey}; the operator must check the egress proxy\n`);
    assert.equal(git.requests.length, gitBefore);
    const rec = await p.waitForRecord((x) => x.event === 'request' && x.listener === 'model' && x.status === 502);
    assert.equal(rec.error, 'egress');
    assertNoCredentialReachedEgress(refusing);
  } finally {
    await refusing.close();
  }
});

test('egress auth file: without it an egress proxy that wants a credential answers 407, which the 502 names with the flag to set', async () => {
  const p = await startEgressProxy({ HTTPS_PROXY: egress.url });
  const r = await send(p.ports.model!, 'POST', '/v1/chat/completions', CHAT('gpt-test'));
  assert.equal(r.status, 502);
  assert.match((JSON.parse(r.body.toString()) as { error: { message: string } }).error.message, /answered 407 to CONNECT .* \(it wants a credential: --egress-proxy-auth-file\)/);
  assert.ok(egress.records.some((x) => !x.opened && !x.headers.some(([n]) => n === 'proxy-authorization')), 'the CONNECT went without a credential');
});

test('a CONNECT answer is framed before the tunnel is used: bytes after the egress proxy\'s 200 are never taken as TLS; the call is a 502 naming them', async () => {
  const chatty = await startConnectProxy({ kind: 'extra-bytes' });
  try {
    const p = await startEgressProxy({ HTTPS_PROXY: chatty.url });
    const before = model.requests.length;
    const r = await send(p.ports.model!, 'POST', '/v1/chat/completions', CHAT('gpt-test'));
    assert.equal(r.status, 502);
    const error = (JSON.parse(r.body.toString()) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, 'egress_proxy_failed');
    assert.match(error.message, /sent 19 bytes after its 200 answer to CONNECT .*; the tunnel was not used$/);
    assert.equal(model.requests.length, before);
    assertNoCredentialReachedEgress(chatty);
  } finally {
    await chatty.close();
  }
});

test('a malformed HTTPS_PROXY stops start-up naming the variable; an egress credential file with CR/LF stops it naming the flag, never showing the value', async () => {
  const base = ['--git-auth-listen', '127.0.0.1:0', '--metrics-listen', 'off'];
  const env = { GIT_HOST_A: git.hostKey, GIT_HOST_A_TOKEN: GIT_TOKEN };
  const bad = await runCommandInProcess(base, { ...env, HTTPS_PROXY: 'http://user:pw@proxy.corp:3128' });
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /HTTPS_PROXY: a user name or password in the URL is not accepted; write http:\/\/HOST:PORT/);
  const noProxy = await runCommandInProcess(base, { ...env, HTTPS_PROXY: egress.url, NO_PROXY: '10.0.0.1-10.0.0.9' });
  assert.equal(noProxy.code, 1);
  assert.match(noProxy.stderr, /NO_PROXY: "10\.0\.0\.1-10\.0\.0\.9" is not an entry this proxy understands/);
  const injected = join(dir, 'egress-auth-crlf');
  writeFileSync(injected, 'Basic abc\r\nX-Injected: yes\n');
  const crlf = await runCommandInProcess([...base, '--egress-proxy-auth-file', injected], { ...env, HTTPS_PROXY: egress.url });
  assert.equal(crlf.code, 1);
  assert.match(crlf.stderr, /--egress-proxy-auth-file: .* holds CR, LF or another character a header cannot carry/);
  assert.ok(!crlf.stderr.includes('abc') && !crlf.stderr.includes('X-Injected'), crlf.stderr);
  const orphan = await runCommandInProcess([...base, '--egress-proxy-auth-file', authFile], env);
  assert.equal(orphan.code, 1);
  assert.match(orphan.stderr, /--egress-proxy-auth-file: there is no egress proxy to send it to; set HTTPS_PROXY/);
});
