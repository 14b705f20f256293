// A GitHub App host's installation tokens, against a fake GitHub API over HTTPS that verifies the
// app's JWT with its public key (node:crypto) at its own clock. The clock is injected: the fake's
// and the one the tokens are asked at move together, so refresh ahead of expiry, a failed refresh
// and expiry are tested without waiting.
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { globalAgent } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { hostCredential, installationTokenCredential } from '../../src/git/credentials.ts';
import type { GitHubAppConfig } from '../../src/git/github-app-config.ts';
import { exchangeAtGitHub, installationTokens, privateKeyFileSource, type InstallationTokens } from '../../src/git/github-app.ts';
import { startGitHubAppFake, type GitHubAppFake } from '../support/github-app-fake.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { rsaKeyPair } from '../support/test-keys.ts';
import { reveal } from '../../src/http/secret-value.ts';

const MIN = 60_000;
const T0 = Date.parse('2026-11-26T04:00:00Z');
const keyPair = () => rsaKeyPair(2048);
const pemOf = (k: ReturnType<typeof keyPair>) => k.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const APP = keyPair();

let pki: TestPki;
let dir: string;
let counter = 0;

before(() => {
  pki = makeTestPki();
  // The exchange uses Node's global agent, as in production (public roots); here it trusts the
  // test CA, as NODE_EXTRA_CA_CERTS makes the bundle do.
  globalAgent.options.ca = pki.caPem; // put back in after(): files share a process (scripts/test.mjs)
  dir = mkdtempSync(join(tmpdir(), 'github-app-tokens-'));
});
after(() => {
  delete globalAgent.options.ca;
  pki.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

interface Setup {
  fake: GitHubAppFake;
  tokens: InstallationTokens;
  refreshes: ({ ok: true } | { ok: false; reason: string })[];
  /** Moves both clocks (the fake's and the one tokens are asked at). */
  at(ms: number): void;
  now(): number;
  keyFile: string;
}

async function setup(t: { after(fn: () => Promise<void>): void }, overrides: Partial<GitHubAppConfig> = {}, fakeOverrides: { installationId?: number } = {}): Promise<Setup> {
  const keyFile = join(dir, `app-${++counter}.pem`);
  writeFileSync(keyFile, pemOf(APP));
  const fake = await startGitHubAppFake({
    pki,
    publicKey: APP.publicKey,
    issuer: 'Iv23liTokens',
    installationId: fakeOverrides.installationId ?? 4242,
    grantedRepositories: ['widgets', 'gadgets'],
    grantedPermissions: { contents: 'write', metadata: 'read' },
    basePath: '/api/v3',
  });
  t.after(() => fake.close());
  let clock = T0;
  fake.now = () => clock;
  const config: GitHubAppConfig = { issuer: 'Iv23liTokens', installationId: 4242, privateKeyFile: keyFile, apiUrl: fake.apiUrl, repositories: undefined, permissions: undefined, ...overrides };
  const refreshes: Setup['refreshes'] = [];
  const tokens = installationTokens({ config, privateKey: privateKeyFileSource(keyFile), exchange: exchangeAtGitHub, basic: installationTokenCredential, onRefresh: (o) => refreshes.push(o) });
  return { fake, tokens, refreshes, keyFile, at: (ms) => void (clock = ms), now: () => clock };
}

const tokenOf = (authorization: string) => Buffer.from(authorization.replace(/^Basic /, ''), 'base64').toString().replace(/^x-access-token:/, '');

async function tokenAt(s: Setup, ms: number): Promise<string> {
  s.at(ms);
  const got = await s.tokens.authorization(ms);
  assert.ok(got.ok, `a token at +${(ms - T0) / MIN} min: ${got.ok ? '' : got.reason}`);
  return tokenOf(reveal(got.authorization));
}

test('github app tokens: the fake verifies the JWT for real (RS256 with the app key, iss, iat/exp window) and the token goes upstream as Basic x-access-token with its secrets', async (t) => {
  const s = await setup(t);
  const got = await s.tokens.authorization(T0);
  assert.ok(got.ok);
  const [exchange] = s.fake.exchanges;
  assert.equal(exchange!.status, 201, `refused: ${exchange!.refused}`);
  assert.equal(exchange!.url, '/api/v3/app/installations/4242/access_tokens');
  assert.deepEqual(exchange!.jwtHeader, { alg: 'RS256', typ: 'JWT' });
  assert.deepEqual(exchange!.claims, { iat: T0 / 1000 - 60, exp: T0 / 1000 + 540, iss: 'Iv23liTokens' });
  assert.equal(exchange!.headers['x-github-api-version'], '2022-11-28');
  assert.equal(exchange!.headers.accept, 'application/vnd.github+json');
  const token = exchange!.token!;
  const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
  assert.equal(reveal(got.authorization), `Basic ${basic}`);
  assert.deepEqual(got.secrets.map(reveal), [token, basic]);
});

test('github app tokens: the narrowing is sent as configured (repositories and permissions), and none when none is configured', async (t) => {
  const narrowed = await setup(t, { repositories: ['widgets'], permissions: { contents: 'read', metadata: 'read' } });
  assert.ok((await narrowed.tokens.authorization(T0)).ok);
  assert.deepEqual(narrowed.fake.exchanges[0]!.body, { repositories: ['widgets'], permissions: { contents: 'read', metadata: 'read' } });
  const plain = await setup(t);
  assert.ok((await plain.tokens.authorization(T0)).ok);
  assert.deepEqual(plain.fake.exchanges[0]!.body, {});
});

test('github app tokens: concurrent requests share one exchange', async (t) => {
  const s = await setup(t);
  const release = s.fake.hold();
  const waiting = Array.from({ length: 20 }, () => s.tokens.authorization(T0));
  // Every request is waiting on the one exchange the first started.
  await new Promise((resolve) => setImmediate(resolve));
  release();
  const got = await Promise.all(waiting);
  assert.ok(got.every((g) => g.ok));
  assert.equal(new Set(got.map((g) => (g.ok ? reveal(g.authorization) : ''))).size, 1);
  assert.equal(s.fake.exchanges.length, 1);
});

test('github app tokens: the token is refreshed five minutes before it expires (clock injected), the current one served meanwhile', async (t) => {
  const s = await setup(t);
  const first = await tokenAt(s, T0);
  assert.equal(await tokenAt(s, T0 + 54 * MIN), first, 'used as is until five minutes before expiry');
  assert.equal(s.fake.exchanges.length, 1);
  // Inside the five minutes: this request still gets the current token, and starts the refresh.
  assert.equal(await tokenAt(s, T0 + 55 * MIN + 1000), first);
  await s.tokens.minted.refreshIfDue(s.now());
  assert.equal(s.fake.exchanges.length, 2);
  const second = await tokenAt(s, T0 + 56 * MIN);
  assert.notEqual(second, first);
  assert.ok(s.fake.isValid(second));
  assert.deepEqual(s.refreshes, [{ ok: true }, { ok: true }]);
});

test('github app tokens: a failed refresh keeps serving the current token until it expires, then fails closed with a 502 naming the host and what failed', async (t) => {
  const s = await setup(t);
  const first = await tokenAt(s, T0);
  s.fake.failNext(...Array.from({ length: 5 }, () => ({ status: 500, body: '{"message":"Server Error"}' })));
  assert.equal(await tokenAt(s, T0 + 56 * MIN), first);
  await s.tokens.minted.refreshIfDue(s.now());
  assert.deepEqual(s.refreshes.at(-1), { ok: false, reason: `the GitHub API at ${s.fake.apiUrl} answered 500` });
  assert.equal(await tokenAt(s, T0 + 59 * MIN), first, 'still valid: still served');
  // Within 30 s of its expiry a token is not sent; the refresh fails again: refused.
  s.at(T0 + 59 * MIN + 31_000);
  const refused = await hostCredential('github.example', { authType: 'github-app', token: undefined, username: undefined, installation: s.tokens }, s.now());
  assert.ok(!refused.ok);
  assert.equal(refused.error.status, 502);
  assert.equal(refused.error.code, 'git_app_token_failed');
  assert.equal(
    refused.error.message,
    `the proxy could not obtain the GitHub App installation token for git host github.example (no valid GitHub App installation token (the GitHub API at ${s.fake.apiUrl} answered 500)); the operator must fix its githubApp settings`,
  );
});

test('github app tokens: a JWT the API refuses (another app key), an unknown installation and a narrowing not granted each fail closed with their reason', async (t) => {
  const wrongKey = await setup(t);
  wrongKey.fake.publicKeys = [keyPair().publicKey];
  const a = await wrongKey.tokens.authorization(T0);
  assert.ok(!a.ok);
  assert.match(a.reason, /answered 401: it refused the app's JWT; check appId or clientId, the private key file and this machine's clock/);
  assert.equal(wrongKey.fake.exchanges[0]!.refused, 'bad signature');

  const noInstallation = await setup(t, {}, { installationId: 999 });
  const b = await noInstallation.tokens.authorization(T0);
  assert.ok(!b.ok);
  assert.match(b.reason, /answered 404: this app has no installation 4242; check installationId/);

  const notGranted = await setup(t, { repositories: ['secret-repo'] });
  const c = await notGranted.tokens.authorization(T0);
  assert.ok(!c.ok);
  assert.match(c.reason, /answered 422: a repository or permission asked for is not granted/);
});

test('github app tokens: the fake refuses a JWT outside its window, so the proxy\'s iat/exp hold against a clock that drifts a little (fake clock 50 s behind)', async (t) => {
  const s = await setup(t);
  s.fake.now = () => T0 - 50_000;
  assert.ok((await s.tokens.authorization(T0)).ok, `refused: ${s.fake.exchanges[0]?.refused}`);
  const far = await setup(t);
  far.fake.now = () => T0 + 10 * MIN;
  assert.ok(!(await far.tokens.authorization(T0)).ok);
  assert.equal(far.fake.exchanges[0]!.refused, 'expired');
});

test('github app tokens: the private key file is re-read when it is replaced (a rotated app key signs the next exchange)', async (t) => {
  const s = await setup(t);
  await tokenAt(s, T0);
  const rotated = keyPair();
  const next = `${s.keyFile}.new`;
  writeFileSync(next, pemOf(rotated));
  renameSync(next, s.keyFile);
  s.fake.publicKeys = [rotated.publicKey];
  await tokenAt(s, T0 + 56 * MIN);
  await s.tokens.minted.refreshIfDue(s.now());
  assert.equal(s.fake.exchanges.length, 2);
  assert.equal(s.fake.exchanges[1]!.status, 201, `refused: ${s.fake.exchanges[1]!.refused}`);
  rmSync(s.keyFile);
  await s.tokens.minted.refresh(T0 + 57 * MIN);
  assert.deepEqual(s.refreshes.at(-1), { ok: false, reason: `the private key file ${s.keyFile} cannot be read` });
});

test('github app tokens: a minted token that is not a valid header value is never kept or sent (mintedValueProblem)', async (t) => {
  const s = await setup(t);
  s.fake.issueNext('ghs_bad\r\nx-injected: 1');
  const got = await s.tokens.authorization(T0);
  assert.ok(!got.ok);
  assert.match(got.reason, /token in the answer is not visible ASCII/);
  assert.ok(!got.reason.includes('ghs_bad'));
});

test('github app tokens: a token wider than the narrowing asked is refused (narrowingProblem)', async (t) => {
  const s = await setup(t, { repositories: ['widgets'] });
  s.fake.failNext({ status: 201, body: JSON.stringify({ token: 'ghs_wide', expires_at: new Date(T0 + 60 * MIN).toISOString(), repository_selection: 'all' }) });
  const got = await s.tokens.authorization(T0);
  assert.ok(!got.ok);
  assert.match(got.reason, /the token issued is for all repositories, not the 1 asked for: refused/);
});
