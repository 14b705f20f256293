// Mutual TLS through the proxy as `serve` starts it, with the flags as an operator
// gives them: both listeners serve TLS and require a client certificate; the model gateway serves
// the certificate's account as the policy grants it (a chat completion recorded under its
// identity) and refuses an account the policy lacks with 403 in its JSON error; the git listener
// serves a clone by the real git with its certificate. The listening lines say `tls: mutual-tls`.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { makeGitHome, runGit } from '../support/git-client.ts';
import { startGitServer, type GitServer } from '../support/git-server.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { serveResponsesSocket } from '../support/responses-socket-upstream.ts';
import { openSocket } from '../support/ws-client.ts';
import { makeMtlsPki, TRUST_DOMAIN, type ClientPair, type MtlsPki } from '../support/mtls-pki.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const MODEL = 'gpt-mtls';
let pki: MtlsPki;
let upstreamPki: TestPki;
let upstream: ModelUpstream;
let gitServer: GitServer;
let proxy: ProxyProcess;
let work: string;

before(async () => {
  pki = makeMtlsPki();
  upstreamPki = makeTestPki();
  upstream = await startModelUpstream(upstreamPki);
  serveResponsesSocket(upstream.server, upstream.requests);
  gitServer = await startGitServer({ pki: upstreamPki, auth: { type: 'bearer', token: 'ghp_mtls_serve_0123456789' } });
  gitServer.createBareRepo('acme/widgets.git');
  work = mkdtempSync(join(tmpdir(), 'test-mtls-serve-'));
  const policy = join(work, 'policy.json');
  writeFileSync(policy, JSON.stringify({ serviceAccounts: { 'agents/triage-bot': { git: [`${gitServer.hostKey}/acme/*:read`], models: true, workflow: 'triage' } } }));
  proxy = await startServe({
    env: {
      UPSTREAM_BASE_URL: upstream.baseUrl,
      UPSTREAM_API_KEY: 'sk-upstream-mtls-0123456789',
      UPSTREAM_ALLOWED_MODELS: MODEL,
      UPSTREAM_CA_FILE: upstreamPki.caFile,
      UPSTREAM_WEBSOCKET: 'true',
      GIT_HOST_A: gitServer.hostKey,
      GIT_HOST_A_TOKEN: 'ghp_mtls_serve_0123456789',
      NODE_EXTRA_CA_CERTS: upstreamPki.caFile,
    },
    args: [
      '--git-auth-listen', '127.0.0.1:0', '--model-gateway-listen', '127.0.0.1:0',
      '--tls-cert', pki.serverCertFile, '--tls-key', pki.serverKeyFile, '--tls-client-ca', pki.caFile,
      '--spiffe-trust-domain', TRUST_DOMAIN, '--workload-policy', policy,
    ],
    listeners: ['git', 'model'],
  });
});

after(async () => {
  await proxy?.stop();
  await Promise.all([upstream?.close(), gitServer?.close()]);
  pki?.cleanup();
  upstreamPki?.cleanup();
  if (work) rmSync(work, { recursive: true, force: true });
});

function chat(client: ClientPair): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
    const req = request({ host: '127.0.0.1', port: proxy.ports.model!, method: 'POST', path: '/v1/chat/completions', ca: pki.caPem, servername: 'localhost', cert: client.cert, key: client.key, agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('mutual TLS (bundle): both listening lines say tls mutual-tls', () => {
  const lines = proxy.records().filter((r) => r.event === 'listening');
  assert.deepEqual(lines.filter((r) => r.listener === 'git' || r.listener === 'model').map((r) => r.tls).sort(), ['mutual-tls', 'mutual-tls']);
});

test('mutual TLS (bundle): without a signing key the listening lines say the clients are authenticated by mutual-tls, not network-policy (workload_auth, bot_auth)', () => {
  const lines = proxy.records().filter((r) => r.event === 'listening');
  assert.equal(lines.find((r) => r.listener === 'git')?.workload_auth, 'mutual-tls');
  assert.equal(lines.find((r) => r.listener === 'model')?.bot_auth, 'mutual-tls');
});

test('mutual TLS (bundle): without a signing key, no start-up warning says the listeners are unauthenticated (the certificate authenticates)', () => {
  const warnings = proxy.records().filter((r) => r.event === 'warning' && /SIGNING_KEY is not set/.test(String(r.message)));
  assert.deepEqual(warnings, []);
});

test('mutual TLS (bundle): the gateway serves a mapped certificate with no token, recorded as its account and the policy\'s workflow', async () => {
  const r = await chat(pki.clients.good);
  assert.equal(r.status, 200, r.body);
  const rec = await proxy.waitForRecord((x) => x.event === 'request' && x.listener === 'model' && x.status === 200, 'the served call');
  assert.equal(rec.instance_id, 'agents/triage-bot');
  assert.equal(rec.workflow, 'triage');
});

test('mutual TLS (bundle): the gateway refuses an account the policy lacks with 403 and a JSON error naming it', async () => {
  const r = await chat(pki.clients.otherAccount);
  assert.equal(r.status, 403, r.body);
  const error = (JSON.parse(r.body) as { error: { code: string; message: string } }).error;
  assert.equal(error.code, 'client_certificate_refused');
  assert.match(error.message, /the service account billing\/reporter is not in the workload policy/);
});

test('mutual TLS (bundle): a Responses WebSocket authenticates at its upgrade by the client certificate, as HTTP does: a mapped account is switched and its turn recorded under its identity; an account the policy lacks is refused 403 over HTTP before any upgrade', async () => {
  const tls = (client: ClientPair) => ({ ca: pki.caPem, servername: 'localhost', cert: client.cert, key: client.key });
  const refused = await openSocket(proxy.ports.model!, '/v1/responses', {}, undefined, tls(pki.clients.otherAccount));
  assert.equal(refused.status, 403, refused.body);
  assert.match(refused.body, /client_certificate_refused/);
  const opened = await openSocket(proxy.ports.model!, '/v1/responses', {}, undefined, tls(pki.clients.good));
  assert.equal(opened.status, 101, opened.body);
  const client = opened.client!;
  client.sendTurn({ model: MODEL, input: 'hi', store: false });
  assert.equal((await client.eventsUntil('response.completed')).at(-1)!.type, 'response.completed');
  client.close();
  await client.gone();
  const turn = await proxy.waitForRecord((x) => x.event === 'request' && x.method === 'WS', 'the turn');
  assert.deepEqual([turn.status, turn.instance_id, turn.workflow], [200, 'agents/triage-bot', 'triage']);
});

test('mutual TLS (bundle): the real git clones through the git listener with its certificate and no token', async () => {
  const home = makeGitHome();
  try {
    const r = await runGit(['-c', `http.sslCert=${pki.clients.good.certFile}`, '-c', `http.sslKey=${pki.clients.good.keyFile}`, '-c', `http.sslCAInfo=${pki.caFile}`, 'clone', `https://localhost:${proxy.ports.git!}/${gitServer.hostKey}/acme/widgets.git`, join(work, 'clone')], { home: home.home });
    assert.equal(r.code, 0, `${r.stderr}\n${proxy.output()}`);
  } finally {
    home.cleanup();
  }
});

test('mutual TLS (bundle): client certificates are verified identities for --limits: a gateway whose only identities are certificates starts with --limits, and the policy entry\'s limits apply to the certificate\'s account (unenforcedPolicyLimits, openLimits)', async () => {
  const policy = join(work, 'limits-policy.json');
  writeFileSync(policy, JSON.stringify({ serviceAccounts: { 'agents/triage-bot': { models: true, workflow: 'triage', limits: { max_concurrent: 4 } } } }));
  writeFileSync(join(work, 'limits.json'), '{}');
  const args = ['--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off', '--tls-cert', pki.serverCertFile, '--tls-key', pki.serverKeyFile, '--tls-client-ca', pki.caFile, '--spiffe-trust-domain', TRUST_DOMAIN, '--workload-policy', policy];
  const env = { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-upstream-mtls-0123456789', UPSTREAM_ALLOWED_MODELS: MODEL, UPSTREAM_CA_FILE: upstreamPki.caFile, NODE_EXTRA_CA_CERTS: upstreamPki.caFile };
  const without = await runCommandInProcess(args, env);
  assert.equal(without.code, 1);
  assert.match(without.stderr, /the entry "agents\/triage-bot" set limits, which only a gateway started with --limits enforces/);
  const limited = await startServe({ env, args: [...args, '--limits', join(work, 'limits.json')], listeners: ['model'] });
  try {
    const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
    const r = await new Promise<number>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: limited.ports.model!, method: 'POST', path: '/v1/chat/completions', ca: pki.caPem, servername: 'localhost', cert: pki.clients.good.cert, key: pki.clients.good.key, agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(r, 200);
    const rec = await limited.waitForRecord((x) => x.event === 'request' && x.listener === 'model', 'the call\'s record');
    assert.deepEqual([rec.instance_id, rec.charge_basis], ['agents/triage-bot', 'usage'], 'admitted and charged under --limits');
  } finally {
    await limited.stop();
  }
});

test('mutual TLS (bundle): --tls-client-ca without --workload-policy stops start-up with a message naming the flag', async () => {
  const r = await runCommandInProcess(['--git-auth-listen', '127.0.0.1:0', '--metrics-listen', 'off', '--tls-cert', pki.serverCertFile, '--tls-key', pki.serverKeyFile, '--tls-client-ca', pki.caFile, '--spiffe-trust-domain', TRUST_DOMAIN], { GIT_HOST_A: gitServer.hostKey, GIT_HOST_A_TOKEN: 'ghp_x_0123456789' });
  assert.notEqual(r.code, 0);
  assert.match(r.stderr + r.stdout, /--tls-client-ca needs --workload-policy/);
});
