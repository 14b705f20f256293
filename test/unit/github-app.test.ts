// GitHub App credentials, the pure parts: the hosts-file entry (every refusal from its own fixture
// file), the API URL, the app's key, the JWT, the token request and the reading of its answer.
import assert from 'node:assert/strict';
import { generateKeyPairSync, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { installationTokenCredential } from '../../src/git/credentials.ts';
import { parseApiUrl, type GitHubAppConfig } from '../../src/git/github-app-config.ts';
import { appJwt, appPrivateKey, installationTokenRequest, narrowingProblem, parseInstallationToken } from '../../src/git/github-app.ts';
import { parseHostsFile } from '../../src/git/hosts.ts';
import { rsaKeyPair } from '../support/test-keys.ts';
import { reveal } from '../../src/http/secret-value.ts';

const FIXTURES = join(__dirname, '..', 'fixtures', 'github-app');
const { privateKey, publicKey } = rsaKeyPair(2048);
const PEM = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

const CONFIG: GitHubAppConfig = { issuer: 'Iv23liTest0123', installationId: 4242, privateKeyFile: '/k.pem', apiUrl: 'https://ghe.example/api/v3', repositories: undefined, permissions: undefined };
const answer = (status: number, doc: unknown) => ({ status, body: Buffer.from(JSON.stringify(doc)) });
const NOW = Date.parse('2026-11-26T04:00:00Z');

test('github app hosts file: an entry with auth github-app and its githubApp parses; apiUrl defaults to https://api.github.com and loses a trailing slash', () => {
  const [a, b] = parseHostsFile(
    JSON.stringify({
      hosts: [
        { host: 'github.com', auth: 'github-app', githubApp: { clientId: 'Iv23liAbCdEf0123', installationId: 4242, privateKeyFile: '/etc/app.pem', repositories: ['widgets', 'gadgets'], permissions: { contents: 'write', metadata: 'read' } }, repos: ['acme/*'] },
        { host: 'ghe.example', auth: 'github-app', githubApp: { appId: 17, installationId: 9, privateKeyFile: '/etc/ghe.pem', apiUrl: 'https://ghe.example/api/v3/' } },
      ],
    }),
    'hosts.json',
  );
  assert.equal(a!.authType, 'github-app');
  assert.equal(a!.token, undefined);
  assert.equal(a!.username, undefined);
  assert.deepEqual(a!.githubApp, { issuer: 'Iv23liAbCdEf0123', installationId: 4242, privateKeyFile: '/etc/app.pem', apiUrl: 'https://api.github.com', repositories: ['widgets', 'gadgets'], permissions: { contents: 'write', metadata: 'read' } });
  assert.deepEqual(b!.githubApp, { issuer: 17, installationId: 9, privateKeyFile: '/etc/ghe.pem', apiUrl: 'https://ghe.example/api/v3', repositories: undefined, permissions: undefined });
});

test('github app hosts file: each malformed githubApp entry is refused naming the field and what to fix', () => {
  const cases: [string, string][] = [
    ['missing-github-app', 'hosts[0].githubApp: is required with "auth": "github-app"'],
    ['github-app-not-object', 'hosts[0].githubApp: must be an object'],
    ['github-app-with-token', 'hosts[0].tokenEnv: a github-app host takes no token: the proxy mints it from githubApp'],
    ['github-app-on-bearer', 'hosts[0].githubApp: is only for "auth": "github-app"'],
    ['username-on-github-app', 'hosts[0].username: a github-app host takes no username'],
    ['app-id-and-client-id', 'hosts[0].githubApp.appId: exactly one of appId (a number) and clientId'],
    ['no-app-id', 'hosts[0].githubApp.appId: exactly one of appId (a number) and clientId'],
    ['app-id-string', 'hosts[0].githubApp.appId: must be a positive whole number'],
    ['app-id-fraction', 'hosts[0].githubApp.appId: must be a positive whole number'],
    ['client-id-bad', 'hosts[0].githubApp.clientId: must be the client ID'],
    ['installation-missing', 'hosts[0].githubApp.installationId: is required: a positive whole number'],
    ['installation-zero', 'hosts[0].githubApp.installationId: is required: a positive whole number'],
    ['key-file-missing', 'hosts[0].githubApp.privateKeyFile: is required'],
    ['api-url-http', 'hosts[0].githubApp.apiUrl: must be an https URL'],
    ['api-url-userinfo', 'hosts[0].githubApp.apiUrl: must be a plain https URL'],
    ['api-url-query', 'hosts[0].githubApp.apiUrl: must be a plain https URL'],
    ['api-url-not-url', 'hosts[0].githubApp.apiUrl: is not a URL'],
    ['repositories-empty', 'hosts[0].githubApp.repositories: must be a non-empty array'],
    ['repositories-with-owner', 'hosts[0].githubApp.repositories[0]: "acme/widgets": give the name without its owner ("widgets")'],
    ['repositories-twice', 'hosts[0].githubApp.repositories[1]: "Widgets" is listed twice'],
    ['repositories-bad-name', 'hosts[0].githubApp.repositories[0]: must be a repository name'],
    ['repositories-not-string', 'hosts[0].githubApp.repositories[0]: must be a string'],
    ['permissions-empty', 'hosts[0].githubApp.permissions: must be a non-empty object'],
    ['permissions-bad-level', 'hosts[0].githubApp.permissions.contents: must be "read", "write" or "admin"'],
    ['permissions-bad-name', 'hosts[0].githubApp.permissions.Pull-Requests: is not a GitHub App permission name'],
    ['permissions-without-contents', 'hosts[0].githubApp.permissions.contents: is required when permissions are given'],
    ['unknown-field', 'hosts[0].githubApp.installationID: unknown field (did you mean installationId?)'],
  ];
  for (const [name, fieldAndWhy] of cases) {
    const file = join(FIXTURES, `${name}.json`);
    assert.throws(
      () => parseHostsFile(readFileSync(file, 'utf8'), file),
      (err: Error) => {
        assert.ok(err.message.startsWith(`${file}: ${fieldAndWhy}`), `${name}: got "${err.message}"`);
        return true;
      },
    );
  }
});

test('github app apiUrl: https only, no user, query or fragment; the path is kept (parseApiUrl)', () => {
  assert.deepEqual(parseApiUrl('https://api.github.com'), { ok: true, value: 'https://api.github.com' });
  assert.deepEqual(parseApiUrl('https://GHE.example:8443/api/v3/'), { ok: true, value: 'https://ghe.example:8443/api/v3' });
  for (const bad of ['http://api.github.com', 'https://u@api.github.com', 'https://api.github.com/#x', 'https://api.github.com?x', 'ftp://x', 'api.github.com', 'https://api.github.com/a b']) {
    assert.equal(parseApiUrl(bad).ok, false, bad);
  }
});

test('github app key: an RSA key of 2048 bits or more is taken; another kind, a short one or garbage is refused without repeating the file (appPrivateKey)', () => {
  assert.ok(!('error' in appPrivateKey(PEM)));
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  assert.match((appPrivateKey(ec) as { error: string }).error, /holds a ec key; a GitHub App signs with RSA/);
  const short = rsaKeyPair(1024).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  assert.match((appPrivateKey(short) as { error: string }).error, /shorter than 2048 bits/);
  const garbage = '-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWxvb2tpbmctdGV4dA==\n-----END PRIVATE KEY-----\n';
  const refused = appPrivateKey(garbage) as { error: string };
  assert.match(refused.error, /is not a PEM private key/);
  assert.ok(!refused.error.includes('c2VjcmV0'));
});

test('github app JWT: RS256 signed by the app key, iss the client or app ID as configured, iat a minute back, exp ten minutes after iat (appJwt)', () => {
  const nowSec = 1_800_000_000;
  for (const issuer of ['Iv23liTest0123', 123456] as const) {
    const jwt = appJwt(issuer, appPrivateKey(PEM) as never, nowSec);
    const [h, p, s] = jwt.split('.') as [string, string, string];
    assert.deepEqual(JSON.parse(Buffer.from(h, 'base64url').toString()), { alg: 'RS256', typ: 'JWT' });
    assert.deepEqual(JSON.parse(Buffer.from(p, 'base64url').toString()), { iat: nowSec - 60, exp: nowSec + 540, iss: issuer });
    assert.ok(verify('RSA-SHA256', Buffer.from(`${h}.${p}`), publicKey, Buffer.from(s, 'base64url')));
  }
});

test('github app token request: POST to {apiUrl}/app/installations/{id}/access_tokens with GitHub\'s Accept and API version, the JWT as Bearer, the narrowing as configured (installationTokenRequest)', () => {
  const plain = installationTokenRequest(CONFIG, 'h.p.s');
  assert.equal(plain.url, 'https://ghe.example/api/v3/app/installations/4242/access_tokens');
  assert.deepEqual(plain.headers, { accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28', authorization: 'Bearer h.p.s', 'user-agent': 'git-auth-proxy' });
  assert.equal(plain.json, '{}');
  assert.equal(plain.maxBytes, 64 * 1024);
  const narrowed = installationTokenRequest({ ...CONFIG, repositories: ['widgets', 'gadgets'], permissions: { contents: 'read' } }, 'h.p.s');
  assert.deepEqual(JSON.parse(narrowed.json), { repositories: ['widgets', 'gadgets'], permissions: { contents: 'read' } });
  assert.equal(narrowed.maxBytes, 64 * 1024 + 2 * 16 * 1024, 'room for GitHub repeating each repository');
});

test('github app token answer: a 201 gives the token until expires_at, never longer than an hour (parseInstallationToken)', () => {
  const ok = parseInstallationToken(answer(201, { token: 'ghs_abc', expires_at: '2026-11-26T05:00:00Z', permissions: { contents: 'read' }, repository_selection: 'all' }), NOW, CONFIG);
  assert.deepEqual(ok, { value: 'ghs_abc', expiresAtMs: Date.parse('2026-11-26T05:00:00Z') });
  const far = parseInstallationToken(answer(201, { token: 'ghs_abc', expires_at: '2027-01-01T00:00:00Z' }), NOW, CONFIG);
  assert.equal(far.expiresAtMs, NOW + 3600_000);
});

test('github app token answer: each refusal says what to check, by status, and never repeats what GitHub wrote (parseInstallationToken)', () => {
  const reason = (status: number) => {
    try {
      parseInstallationToken(answer(status, { message: 'secret-looking upstream text' }), NOW, CONFIG);
    } catch (err) {
      return (err as Error).message;
    }
    return 'no error';
  };
  assert.match(reason(401), /^the GitHub API at https:\/\/ghe\.example\/api\/v3 answered 401: it refused the app's JWT; check appId or clientId, the private key file and this machine's clock$/);
  assert.match(reason(404), /answered 404: this app has no installation 4242; check installationId/);
  assert.match(reason(422), /answered 422: a repository or permission asked for is not granted to the installation/);
  assert.match(reason(403), /answered 403: the installation may be suspended/);
  assert.match(reason(500), /answered 500$/);
  for (const status of [401, 403, 404, 422, 500]) assert.ok(!reason(status).includes('secret-looking'));
  assert.throws(() => parseInstallationToken({ status: 201, body: Buffer.from('not json') }, NOW, CONFIG), /answered 201 without a JSON object/);
  assert.throws(() => parseInstallationToken(answer(201, { expires_at: '2026-11-26T05:00:00Z' }), NOW, CONFIG), /no "token" string/);
  assert.throws(() => parseInstallationToken(answer(201, { token: 't', expires_at: 'tomorrow' }), NOW, CONFIG), /no "expires_at" time/);
  assert.throws(() => parseInstallationToken(answer(201, { token: 't', expires_at: '2026-11-26T03:59:59Z' }), NOW, CONFIG), /already expired by this machine's clock/);
});

test('github app token answer: a token wider than asked (all repositories, or one not asked, when narrowed; a permission not asked, or above the one asked) is refused (narrowingProblem)', () => {
  const narrowed: GitHubAppConfig = { ...CONFIG, repositories: ['widgets', 'Gadgets'], permissions: { contents: 'read' } };
  const repos = (...names: string[]) => names.map((name, i) => ({ id: i, name, full_name: `acme/${name}` }));
  // What GitHub answers when asked for two repositories and contents:read (metadata:read it adds itself).
  assert.equal(narrowingProblem({ repository_selection: 'selected', repositories: repos('widgets', 'gadgets'), permissions: { contents: 'read', metadata: 'read' } }, narrowed), undefined);
  assert.equal(narrowingProblem({ repository_selection: 'selected', repositories: repos('Widgets'), permissions: { contents: 'read' } }, narrowed), undefined, 'fewer, and names without case');
  assert.match(narrowingProblem({ repository_selection: 'all', permissions: { contents: 'read' } }, narrowed)!, /for all repositories, not the 2 asked for/);
  // The review's answer: a repository not asked for, and permissions not asked for.
  assert.match(narrowingProblem({ repository_selection: 'selected', repositories: repos('payroll'), permissions: { contents: 'read' } }, narrowed)!, /for the repository "payroll", which was not asked for/);
  assert.match(narrowingProblem({ repository_selection: 'selected', repositories: repos('widgets', 'payroll'), permissions: { contents: 'read' } }, narrowed)!, /"payroll"/);
  assert.match(narrowingProblem({ repository_selection: 'selected', repositories: repos('widgets'), permissions: { contents: 'read', administration: 'write' } }, narrowed)!, /holds administration, which was not asked for/);
  assert.match(narrowingProblem({ repository_selection: 'selected', repositories: repos('widgets'), permissions: { contents: 'read', secrets: 'read' } }, narrowed)!, /holds secrets, which was not asked for/);
  assert.match(narrowingProblem({ repository_selection: 'selected', repositories: repos('widgets'), permissions: { contents: 'read', metadata: 'write' } }, narrowed)!, /holds metadata above "read"/);
  assert.match(narrowingProblem({ repository_selection: 'selected', repositories: repos('widgets'), permissions: { contents: 'write' } }, narrowed)!, /holds contents above "read"/);
  assert.match(narrowingProblem({ repository_selection: 'selected', repositories: repos('widgets'), permissions: { contents: 'owner' } }, narrowed)!, /holds contents above "read"/);
  assert.match(narrowingProblem({ repository_selection: 'selected', repositories: repos('widgets'), permissions: { constructor: 'read' } }, narrowed)!, /holds constructor, which was not asked for/);
  // An answer that does not say what the token holds is taken as wider.
  assert.match(narrowingProblem({ repository_selection: 'selected', permissions: { contents: 'read' } }, narrowed)!, /does not list the repositories/);
  assert.match(narrowingProblem({ repository_selection: 'selected', repositories: [{ id: 1 }], permissions: { contents: 'read' } }, narrowed)!, /a repository without a name/);
  assert.match(narrowingProblem({ repository_selection: 'selected', repositories: repos('widgets') }, narrowed)!, /does not list the permissions/);
  assert.throws(() => parseInstallationToken(answer(201, { token: 't', expires_at: '2026-11-26T05:00:00Z', repository_selection: 'all' }), NOW, narrowed), /not the 2 asked for: refused/);
  // Repositories alone narrowed: any permission of the app is kept; permissions alone: any repository.
  assert.equal(narrowingProblem({ repository_selection: 'selected', repositories: repos('widgets'), permissions: { contents: 'write', administration: 'write' } }, { ...CONFIG, repositories: ['widgets'] }), undefined);
  assert.equal(narrowingProblem({ repository_selection: 'all', permissions: { contents: 'read', metadata: 'read' } }, { ...CONFIG, permissions: { contents: 'read' } }), undefined);
});

test('github app token answer: with no narrowing configured the token keeps the installation\'s whole reach, as documented (narrowingProblem)', () => {
  assert.equal(narrowingProblem({ repository_selection: 'all', permissions: { contents: 'admin', administration: 'write' } }, CONFIG), undefined);
});

test('github app upstream credential: git gets the installation token as Basic x-access-token, and both the token and the Basic value are secrets to redact (installationTokenCredential)', () => {
  const made = installationTokenCredential('ghs_0123456789abcdef');
  const basic = Buffer.from('x-access-token:ghs_0123456789abcdef').toString('base64');
  assert.equal(reveal(made.authorization), `Basic ${basic}`);
  assert.deepEqual(made.secrets.map(reveal), ['ghs_0123456789abcdef', basic]);
});
