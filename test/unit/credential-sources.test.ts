// The model gateway's credential sources: a Google service account (the RS256 assertion, the
// cached token, one refresh in flight, refreshed ahead of expiry, a failed refresh serving the
// current token until it expires, a rotated key file picked up) and AWS SigV4 over the exact
// bytes sent.
import assert from 'node:assert/strict';
import { verify } from 'node:crypto';
import { test } from 'node:test';
import { awsWebIdentitySource, parseAssumeRoleAnswer, sigV4Headers } from '../../src/gateway/credentials/aws.ts';
import { assertionJwt, googleMetadataSource, googleServiceAccountSource, parseServiceAccountKey, type TokenExchange } from '../../src/gateway/credentials/google.ts';
import { mintedAction as tokenAction } from '../../src/gateway/credentials/minted.ts';
import { canonicalRequest, sha256Hex } from '../../src/gateway/credentials/sigv4.ts';
import { rsaKeyPair } from '../support/test-keys.ts';
import { reveal } from '../../src/http/secret-value.ts';
import { revealed } from '../support/secrets.ts';

const { privateKey, publicKey } = rsaKeyPair(2048);
const PEM = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const keyFile = (email = 'bot@proj.iam.gserviceaccount.com', tokenUri = 'https://oauth2.example/token') =>
  JSON.stringify({ type: 'service_account', project_id: 'proj', private_key_id: 'kid-1', private_key: PEM, client_email: email, token_uri: tokenUri });
const CALL = { method: 'POST', target: '/v1/chat/completions', host: 'api.example', contentType: 'application/json', body: Buffer.from('{"model":"m"}') };

test('google: the assertion is an RS256 JWT the service account signed: iss, scope, aud = token_uri, iat, exp one hour later (assertionJwt)', () => {
  const key = parseServiceAccountKey(keyFile());
  assert.ok(!('error' in key));
  const jwt = assertionJwt(key, 'https://www.googleapis.com/auth/cloud-platform', 1_700_000_000);
  const [h, p, s] = jwt.split('.') as [string, string, string];
  assert.ok(verify('RSA-SHA256', Buffer.from(`${h}.${p}`), publicKey, Buffer.from(s, 'base64url')), 'verified with the public key');
  assert.deepEqual(JSON.parse(Buffer.from(h, 'base64url').toString()), { alg: 'RS256', typ: 'JWT', kid: 'kid-1' });
  assert.deepEqual(JSON.parse(Buffer.from(p, 'base64url').toString()), { iss: 'bot@proj.iam.gserviceaccount.com', scope: 'https://www.googleapis.com/auth/cloud-platform', aud: 'https://oauth2.example/token', iat: 1_700_000_000, exp: 1_700_003_600 });
});

test('google: a key file that is not a service account, lacks a field or names a non-https token endpoint is refused, naming what (parseServiceAccountKey)', () => {
  assert.deepEqual(parseServiceAccountKey('{"type":"authorized_user"}'), { error: '"type" must be "service_account"' });
  assert.deepEqual(parseServiceAccountKey(JSON.stringify({ type: 'service_account', private_key: PEM })), { error: '"client_email" is missing' });
  assert.deepEqual(parseServiceAccountKey(keyFile('a@b', 'http://oauth2.example/token')), { error: '"token_uri" must be an https URL' });
  assert.deepEqual(parseServiceAccountKey('not json'), { error: 'is not a JSON object' });
});

test('google: a token is used until five minutes before it expires, then used while a refresh runs, and waited for once expired (mintedAction)', () => {
  const held = { value: 't', expiresAtMs: 3_600_000 };
  assert.equal(tokenAction(undefined, 0), 'wait');
  assert.equal(tokenAction(held, 0), 'use');
  assert.equal(tokenAction(held, 3_600_000 - 5 * 60_000), 'use_and_refresh');
  assert.equal(tokenAction(held, 3_600_000 - 30_000), 'wait', 'too close to its expiry to send');
});

type FakeExchange = TokenExchange & { calls: number; fail: boolean; release?: () => void; gate?: Promise<void> };

function fakeExchange(): FakeExchange {
  const state = { calls: 0, fail: false } as Omit<FakeExchange, never>;
  const exchange: TokenExchange = async () => {
    f.calls++;
    if (f.gate) await f.gate;
    if (f.fail) throw new Error('the token endpoint answered 400: invalid_grant');
    return { accessToken: `ya29.token-${f.calls}`, expiresInSec: 3600 };
  };
  const f = Object.assign(exchange, state) as FakeExchange;
  return f;
}

test('google: concurrent calls wait on one refresh in flight, and the token then serves every call without another exchange', async () => {
  const exchange = fakeExchange();
  exchange.gate = new Promise((r) => (exchange.release = r));
  const refreshes: boolean[] = [];
  const source = googleServiceAccountSource({ readKeyFile: () => keyFile(), scope: 's', exchange, onRefresh: (o) => refreshes.push(o.ok) });
  const calls = Array.from({ length: 5 }, () => source.authenticate(CALL, 0));
  exchange.release!();
  for (const r of await Promise.all(calls)) assert.deepEqual(revealed(r), { ok: true, headers: { authorization: 'Bearer ya29.token-1' }, secrets: ['ya29.token-1'] });
  assert.equal(exchange.calls, 1);
  await source.authenticate(CALL, 60_000);
  assert.equal(exchange.calls, 1);
  assert.deepEqual(refreshes, [true]);
});

test('google: ahead of expiry a call still gets the current token while one refresh fetches the next; a failed refresh keeps the current token until it expires, then the call is refused 502 naming why', async () => {
  const exchange = fakeExchange();
  const source = googleServiceAccountSource({ readKeyFile: () => keyFile(), scope: 's', exchange, onRefresh: () => {} });
  await source.refresh(0);
  exchange.fail = true;
  const ahead = await source.authenticate(CALL, 3_600_000 - 4 * 60_000);
  assert.deepEqual(ahead.ok && revealed(ahead.headers), { authorization: 'Bearer ya29.token-1' }, 'served at once, not after the refresh');
  await source.refreshIfDue(3_600_000 - 4 * 60_000);
  const stillValid = await source.authenticate(CALL, 3_600_000 - 60_000);
  assert.deepEqual(stillValid.ok && revealed(stillValid.headers), { authorization: 'Bearer ya29.token-1' }, 'the refresh failed: the current token serves until it expires');
  const expired = await source.authenticate(CALL, 3_600_000);
  assert.equal(expired.ok, false);
  assert.ok(!expired.ok && expired.error.code === 'upstream_credential_failed' && /invalid_grant/.test(expired.reason), JSON.stringify(expired));
  exchange.fail = false;
  const recovered = await source.authenticate(CALL, 3_600_001);
  assert.ok(recovered.ok, 'the next call refreshes again and recovers without a restart');
});

test('google: the key file is read again at every refresh, so a rotated key (another service account) is used from the next token on', async () => {
  let file = keyFile('first@proj.iam.gserviceaccount.com');
  const issuers: string[] = [];
  const exchange: TokenExchange = async (_uri, assertion) => {
    issuers.push((JSON.parse(Buffer.from(assertion.split('.')[1]!, 'base64url').toString()) as { iss: string }).iss);
    return { accessToken: `tok-${issuers.length}`, expiresInSec: 3600 };
  };
  const source = googleServiceAccountSource({ readKeyFile: () => file, scope: 's', exchange, onRefresh: () => {} });
  await source.refresh(0);
  file = keyFile('second@proj.iam.gserviceaccount.com');
  await source.refresh(3_600_000);
  assert.deepEqual(issuers, ['first@proj.iam.gserviceaccount.com', 'second@proj.iam.gserviceaccount.com']);
});

test('aws: the signature covers method, path, query, host, content type, date, session token and the SHA-256 of the exact body (sigV4Headers)', () => {
  const creds = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', sessionToken: 'session-token' };
  const at = Date.UTC(2026, 10, 24, 12, 0, 0);
  const h = sigV4Headers({ ...CALL, target: '/model/us.anthropic.claude-haiku-4-5-20251001-v1%3A0/invoke?x=1' }, at, 'us-east-1', 'bedrock', creds);
  assert.equal(h['x-amz-date'], '20261124T120000Z');
  assert.equal(h['x-amz-content-sha256'], sha256Hex(CALL.body));
  assert.equal(h['x-amz-security-token'], 'session-token');
  assert.match(h.authorization!, /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/20261124\/us-east-1\/bedrock\/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=[0-9a-f]{64}$/);
  // A different body, path or content type is a different signature.
  const other = (over: Partial<typeof CALL>) => sigV4Headers({ ...CALL, target: '/model/us.anthropic.claude-haiku-4-5-20251001-v1%3A0/invoke?x=1', ...over }, at, 'us-east-1', 'bedrock', creds).authorization;
  for (const over of [{ body: Buffer.from('{"model":"n"}') }, { target: '/model/other/invoke?x=1' }, { contentType: 'text/plain' }]) assert.notEqual(other(over), h.authorization, JSON.stringify(over));
  assert.match(canonicalRequest({ method: 'POST', path: '/model/a%3A0/invoke', query: '', headers: [['host', 'h']], payloadHash: '' }), /\/model\/a%253A0\/invoke/);
});

test('aws web identity: STS\'s AssumeRoleWithWebIdentity answer gives the temporary credentials and their expiry; an error answer gives STS\'s code only (parseAssumeRoleAnswer)', () => {
  const ok = '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIATEMP</AccessKeyId><SecretAccessKey>temp/secret+key</SecretAccessKey><SessionToken>FwoGZXIvYXdzEtoken</SessionToken><Expiration>2026-11-24T15:00:00Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>';
  assert.deepEqual(parseAssumeRoleAnswer(ok, 200), { value: { accessKeyId: 'ASIATEMP', secretAccessKey: 'temp/secret+key', sessionToken: 'FwoGZXIvYXdzEtoken' }, expiresAtMs: Date.parse('2026-11-24T15:00:00Z') });
  assert.throws(() => parseAssumeRoleAnswer('<ErrorResponse><Error><Code>InvalidIdentityToken</Code><Message>token eyJhbGciOi expired</Message></Error></ErrorResponse>', 400), (e: Error) => e.message === 'STS answered 400: InvalidIdentityToken');
  assert.throws(() => parseAssumeRoleAnswer('<x/>', 200), /without credentials/);
});

test('aws web identity: the projected token (re-read at each refresh) is traded once for credentials that sign every call (awsWebIdentitySource)', async () => {
  let tokenFile = 'projected-token-1';
  const forms: Record<string, string>[] = [];
  const source = awsWebIdentitySource({
    roleArn: 'arn:aws:iam::123456789012:role/gateway',
    readTokenFile: () => `${tokenFile}\n`,
    stsEndpoint: 'https://sts.example/',
    region: 'us-east-1',
    service: 'bedrock',
    assume: async (_url, form) => {
      forms.push(form);
      const expiry = new Date(Date.UTC(2026, 10, 24, 13)).toISOString();
      return { status: 200, body: Buffer.from(`<Credentials><AccessKeyId>ASIA${forms.length}</AccessKeyId><SecretAccessKey>s${forms.length}</SecretAccessKey><SessionToken>t${forms.length}</SessionToken><Expiration>${expiry}</Expiration></Credentials>`) };
    },
    onRefresh: () => {},
  });
  const at = Date.UTC(2026, 10, 24, 12);
  const a = await source.authenticate(CALL, at);
  const b = await source.authenticate(CALL, at + 1000);
  assert.ok(a.ok && b.ok);
  assert.equal(forms.length, 1);
  assert.deepEqual({ ...forms[0], WebIdentityToken: forms[0]!.WebIdentityToken }, { Action: 'AssumeRoleWithWebIdentity', Version: '2011-06-15', RoleArn: 'arn:aws:iam::123456789012:role/gateway', RoleSessionName: 'credential-proxy', DurationSeconds: '3600', WebIdentityToken: 'projected-token-1' });
  assert.match(reveal(a.headers.authorization!), /Credential=ASIA1\//);
  assert.equal(reveal(a.headers['x-amz-security-token']!), 't1');
  assert.deepEqual(a.secrets.map(reveal), ['s1', 't1']);
  tokenFile = 'projected-token-2';
  await source.refresh(at + 2000);
  assert.equal(forms[1]!.WebIdentityToken, 'projected-token-2', 'the rotated projected token is read at the refresh');
});

test('google metadata: the token comes from the metadata server with Metadata-Flavor: Google, and is kept (googleMetadataSource)', async () => {
  const asked: [string, Record<string, string>][] = [];
  const source = googleMetadataSource({ metadataHost: '169.254.169.254', fetchJson: async (url, headers) => (asked.push([url, headers]), { access_token: 'ya29.md', expires_in: 3599, token_type: 'Bearer' }), onRefresh: () => {} });
  const r = await source.authenticate(CALL, 0);
  await source.authenticate(CALL, 1000);
  assert.deepEqual(r.ok && revealed(r.headers), { authorization: 'Bearer ya29.md' });
  assert.deepEqual(asked, [['http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token', { 'metadata-flavor': 'Google' }]]);
  const broken = googleMetadataSource({ metadataHost: 'x', fetchJson: async () => ({ error: 'no' }), onRefresh: () => {} });
  const refused = await broken.authenticate(CALL, 0);
  assert.ok(!refused.ok && /without access_token/.test(refused.reason));
});
