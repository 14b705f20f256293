// The service-account key set behind a corporate egress proxy, through the proxy as `serve` starts it: with
// HTTPS_PROXY set, --sa-jwks-discovery and --sa-jwks-url fetch the issuer's discovery document and
// key set through a CONNECT tunnel (test/support/connect-proxy.ts records every byte), with
// --sa-ca-file's verification inside it, as every other HTTPS connection the proxy opens; NO_PROXY
// naming the issuer sends them direct; an egress proxy that refuses is a sa_keys_failed line
// naming it, and until a set loads every service-account token is refused.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startConnectProxy, type ConnectProxy, type ConnectRecord } from '../support/connect-proxy.ts';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { startFakeIssuer, type FakeIssuer } from '../support/oidc-issuer.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { ecSigner, saPayload, signSaToken, TEST_AUDIENCE } from '../support/service-accounts.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const clusterKey = ecSigner('cluster-ec');
let pki: TestPki;
let issuer: FakeIssuer;
let model: ModelUpstream;
let dir: string;
let policy: string;
const started: { stop(): Promise<unknown> }[] = [];

before(async () => {
  pki = makeTestPki();
  [issuer, model] = await Promise.all([startFakeIssuer(pki, clusterKey), startModelUpstream(pki)]);
  dir = mkdtempSync(join(tmpdir(), 'egress-sa-keys-'));
  policy = join(dir, 'policy.json');
  writeFileSync(policy, JSON.stringify({ serviceAccounts: { 'agents/*': { models: true } } }));
});

after(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await Promise.all([issuer?.close(), model?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const issuerTarget = () => new URL(issuer.issuer).host;
const targets = (e: ConnectProxy) => e.records.map((r) => r.requestLine.split(' ')[1]);
const bytesOf = (r: ConnectRecord) => Buffer.concat([Buffer.from(r.rawHead, 'latin1'), ...r.tunnelled]).toString('latin1');

async function startEgress(mode: Parameters<typeof startConnectProxy>[0]): Promise<ConnectProxy> {
  const egress = await startConnectProxy(mode);
  started.push({ stop: () => egress.close() });
  return egress;
}

/** The proxy's model gateway accepting the fake issuer's tokens, with the keys from `keys` and the environment given. */
async function startSaProxy(env: Record<string, string>, keys: string[] = ['--sa-jwks-discovery']): Promise<ProxyProcess> {
  const p = await startServe({
    env: { UPSTREAM_BASE_URL: model.baseUrl, UPSTREAM_API_KEY: 'sk-upstream', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile, ...env },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--sa-issuer', issuer.issuer, '--sa-audience', TEST_AUDIENCE, ...keys, '--sa-ca-file', pki.caFile, '--workload-policy', policy],
    listeners: ['model'],
  });
  started.push(p);
  return p;
}

const chat = (p: ProxyProcess) => {
  const token = signSaToken(clusterKey, saPayload({ namespace: 'agents', serviceAccount: 'triage', pod: 'triage-0' }, Math.floor(Date.now() / 1000), 3600, { iss: issuer.issuer }));
  return send(p.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
};

test('egress: the service-account key set (--sa-jwks-discovery) is fetched through a CONNECT tunnel to the issuer, verified with --sa-ca-file inside it; a projected token is then served', async () => {
  const egress = await startEgress({ kind: 'tunnel' });
  const before = { ...issuer.fetches };
  const p = await startSaProxy({ HTTPS_PROXY: egress.url });
  const loaded = await p.waitForRecord((r) => r.event === 'sa_keys_loaded', 'the key set loaded');
  assert.deepEqual(loaded.kids, ['cluster-ec']);
  assert.deepEqual(targets(egress), [issuerTarget(), issuerTarget()], 'a tunnel to the issuer for the discovery document, and one for the key set');
  assert.deepEqual([issuer.fetches.discovery - before.discovery, issuer.fetches.jwks - before.jwks], [1, 1]);
  // TLS end to end: the egress proxy never sees the paths or the key set in the clear.
  for (const r of egress.records) assert.doesNotMatch(bytesOf(r), /openid-configuration|openid\/v1\/jwks|cluster-ec/);
  const res = await chat(p);
  assert.equal(res.status, 200, res.body.toString());
});

test('egress: the service-account key set by --sa-jwks-url goes through the egress proxy too; NO_PROXY naming the issuer sends it direct', async () => {
  const egress = await startEgress({ kind: 'tunnel' });
  const tunnelled = await startSaProxy({ HTTPS_PROXY: egress.url }, ['--sa-jwks-url', issuer.jwksUrl]);
  await tunnelled.waitForRecord((r) => r.event === 'sa_keys_loaded', 'the key set loaded');
  assert.deepEqual(targets(egress), [issuerTarget()], 'one tunnel, to the issuer (the model upstream is not called yet)');
  const direct = await startEgress({ kind: 'tunnel' });
  const p = await startSaProxy({ HTTPS_PROXY: direct.url, NO_PROXY: issuerTarget() });
  await p.waitForRecord((r) => r.event === 'sa_keys_loaded', 'the key set loaded');
  assert.deepEqual(targets(direct), [], 'NO_PROXY: the issuer reached directly');
});

test('egress: an egress proxy refusing the key-set fetch is a sa_keys_failed line naming it and its status; every service-account token is refused until a set loads', async () => {
  const egress = await startEgress({ kind: 'refuse', status: 403 });
  const p = await startSaProxy({ HTTPS_PROXY: egress.url });
  const failed = await p.waitForRecord((r) => r.event === 'sa_keys_failed', 'the key-set fetch failed');
  assert.match(String(failed.message), new RegExp(`the egress proxy 127\\.0\\.0\\.1:${egress.port} answered 403 to CONNECT ${issuerTarget().replaceAll('.', '\\.')}`));
  const res = await chat(p);
  assert.equal(res.status, 401, res.body.toString());
  assert.match(res.body.toString(), /unknown key id/);
});
