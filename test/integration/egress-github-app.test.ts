// The GitHub App token exchange through the egress proxy (HTTPS_PROXY), in the proxy as `serve` starts it: the
// app's JWT goes to the API, and the installation token to the git host, each inside a CONNECT
// tunnel whose bytes the recording egress proxy (test/support/connect-proxy.ts) shows hold none
// of them. The egress rules themselves: test/integration/egress-proxy.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startConnectProxy, type ConnectProxy } from '../support/connect-proxy.ts';
import { startGitHubAppFake, type GitHubAppFake } from '../support/github-app-fake.ts';
import { startGitServer, type GitServer } from '../support/git-server.ts';
import { send } from '../support/http-client.ts';
import { assertNoSecrets, type ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { rsaKeyPair } from '../support/test-keys.ts';

const APP = rsaKeyPair(2048);
const PEM = APP.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const tokenOf = (authorization: string | undefined) => /^Basic (.+)$/.exec(authorization ?? '') && Buffer.from(authorization!.slice(6), 'base64').toString().replace(/^x-access-token:/, '');

let pki: TestPki;
let api: GitHubAppFake;
let git: GitServer;
let egress: ConnectProxy;
let proxy: ProxyProcess;
let dir: string;
const tokensSeen: string[] = [];

before(async () => {
  pki = makeTestPki();
  dir = mkdtempSync(join(tmpdir(), 'egress-github-app-'));
  api = await startGitHubAppFake({ pki, publicKey: APP.publicKey, issuer: 4711, installationId: 99, grantedRepositories: ['repo'], grantedPermissions: { contents: 'read' } });
  git = await startGitServer({
    pki,
    auth: { type: 'check', accepts: (authorization) => { const token = tokenOf(authorization); if (token) tokensSeen.push(token); return token !== null && api.isValid(token); } },
  });
  git.createBareRepo('org/repo.git');
  egress = await startConnectProxy({ kind: 'tunnel' });
  writeFileSync(join(dir, 'app.pem'), PEM);
  writeFileSync(join(dir, 'hosts.json'), JSON.stringify({ hosts: [{ host: git.hostKey, auth: 'github-app', githubApp: { appId: 4711, installationId: 99, privateKeyFile: join(dir, 'app.pem'), apiUrl: api.apiUrl } }] }));
  proxy = await startServe({ env: { NODE_EXTRA_CA_CERTS: pki.caFile, HTTPS_PROXY: egress.url }, args: ['--git-auth-listen', '127.0.0.1:0', '--git-hosts', join(dir, 'hosts.json')] });
});

after(async () => {
  await proxy?.stop();
  await Promise.all([api?.close(), git?.close(), egress?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('egress: the GitHub App token exchange and the git requests with its token go through CONNECT tunnels; no JWT, token or key reaches the egress proxy', async () => {
  const refs = await send(proxy.ports.git!, 'GET', `/${git.hostKey}/org/repo.git/info/refs?service=git-upload-pack`);
  assert.equal(refs.status, 200, `${refs.body.toString()}\n${proxy.output()}`);
  assert.ok(api.exchanges.length >= 1, 'the API issued a token');
  const targets = egress.records.map((r) => r.requestLine.split(' ')[1]);
  assert.ok(targets.includes(new URL(api.apiUrl).host), `the API through the egress proxy: ${targets.join(', ')}`);
  assert.ok(targets.includes(git.hostKey), `the git host through the egress proxy: ${targets.join(', ')}`);
  const secrets = [...tokensSeen, PEM.split('\n')[1]!];
  assert.ok(tokensSeen.length >= 1);
  for (const r of egress.records) assertNoSecrets(Buffer.concat([Buffer.from(r.rawHead, 'latin1'), ...r.tunnelled]).toString('latin1'), secrets, `the bytes the egress proxy received (${r.requestLine})`);
});
