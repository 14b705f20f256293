import assert from 'node:assert/strict';
import { createHmac, generateKeyPairSync, sign } from 'node:crypto';
import { test } from 'node:test';
import { parseJwks, type JwkKey } from '../../src/auth/jwks.ts';
import { verifyServiceAccountToken, type ServiceAccountOptions } from '../../src/auth/service-account.ts';
import { ecSigner, jwksOf, POD_UID, rsaSigner, saPayload, SA_UID, signSaToken, TEST_AUDIENCE, TEST_ISSUER, type SaSigner } from '../support/service-accounts.ts';

const NOW = 1_800_000_000;
const rsa = rsaSigner('rsa-1');
const ec = ecSigner('ec-1');
const parsed = parseJwks(JSON.stringify(jwksOf(rsa, ec)));
assert.ok(parsed.ok);
const KEYS: ReadonlyMap<string, JwkKey> = parsed.set.keys;
const OPTS: ServiceAccountOptions = { issuer: TEST_ISSUER, audience: TEST_AUDIENCE, nowSec: NOW, maxLifetimeSec: 86_400 };
const WHO = { namespace: 'agents', serviceAccount: 'triage', pod: 'triage-7f9c-x2' };

const verify = (token: string, opts: Partial<ServiceAccountOptions> = {}) => verifyServiceAccountToken(token, KEYS, { ...OPTS, ...opts });
const reasonOf = (token: string, opts: Partial<ServiceAccountOptions> = {}) => {
  const result = verify(token, opts);
  return result.ok ? 'accepted' : result.reason;
};
const tokenWith = (over: Record<string, unknown>, signer: SaSigner = rsa) => signSaToken(signer, saPayload(WHO, NOW, 3600, over));
const k8sWith = (over: Record<string, unknown>) => tokenWith({ 'kubernetes.io': { ...(saPayload(WHO, NOW)['kubernetes.io'] as object), ...over } });

test('service account: an RS256 and an ES256 projected token are accepted, naming namespace, service account, pod and the token id', () => {
  for (const signer of [rsa, ec]) {
    const result = verify(tokenWith({}, signer));
    assert.ok(result.ok, signer.alg);
    assert.deepEqual(result.claims, {
      namespace: 'agents',
      serviceAccount: { name: 'triage', uid: SA_UID },
      pod: { name: 'triage-7f9c-x2', uid: POD_UID },
      jti: '7a3a9b3e-5bd9-4a4f-a7a5-8b2d1c0f9e11',
      iat: NOW,
      exp: NOW + 3600,
    });
    assert.equal(result.key.kid, signer.kid);
  }
  // Before Kubernetes 1.29 there is no jti.
  const { jti: _j, ...older } = saPayload(WHO, NOW);
  const result = verify(signSaToken(ec, older));
  assert.ok(result.ok);
  assert.equal(result.claims.jti, undefined);
});

test('service account algorithm from the key: alg none, HS256 keyed with the public key, and another algorithm than the key\'s are refused', () => {
  const payload = saPayload(WHO, NOW);
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  assert.equal(reasonOf(`${b64({ alg: 'none', kid: 'rsa-1' })}.${b64(payload)}.`), 'malformed token');
  assert.equal(reasonOf(`${b64({ alg: 'none', kid: 'rsa-1' })}.${b64(payload)}.AA`), 'algorithm not allowed for this key');
  // Key confusion: an HMAC whose secret is the RSA public key's bytes (PEM, and the JWK's modulus).
  for (const secret of [rsa.privateKey.export({ format: 'pem', type: 'pkcs1' }), KEYS.get('rsa-1')!.key.export({ format: 'pem', type: 'spki' }), Buffer.from(rsa.jwk.n as string, 'base64url')]) {
    const input = `${b64({ alg: 'HS256', kid: 'rsa-1' })}.${b64(payload)}`;
    assert.equal(reasonOf(`${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`), 'algorithm not allowed for this key');
  }
  // ES256 named over the RSA key's kid, and RS256 over the EC key's.
  assert.equal(reasonOf(signSaToken(ec, payload, { alg: 'ES256', kid: 'rsa-1' })), 'algorithm not allowed for this key');
  assert.equal(reasonOf(signSaToken(rsa, payload, { alg: 'RS256', kid: 'ec-1' })), 'algorithm not allowed for this key');
  assert.equal(reasonOf(signSaToken(rsa, payload, { alg: 'PS256', kid: 'rsa-1' })), 'algorithm not allowed for this key');
});

test('service account signature: a token signed by another key under a known kid, or altered after signing, is refused', () => {
  assert.equal(reasonOf(signSaToken({ ...rsaSigner('rsa-1'), kid: 'rsa-1' }, saPayload(WHO, NOW))), 'bad signature');
  const token = tokenWith({});
  const [h, , s] = token.split('.');
  const other = Buffer.from(JSON.stringify(saPayload({ ...WHO, serviceAccount: 'admin' }, NOW))).toString('base64url');
  assert.equal(reasonOf(`${h}.${other}.${s}`), 'bad signature');
  // An ES256 signature in DER, as OpenSSL writes it, is not the JOSE form.
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const input = token.split('.').slice(0, 2).join('.');
  assert.equal(reasonOf(`${input.replace(h!, Buffer.from(JSON.stringify({ alg: 'ES256', kid: 'ec-1' })).toString('base64url'))}.${sign('sha256', Buffer.from(input), privateKey).toString('base64url')}`), 'bad signature');
});

test('service account kid required: a token without a kid is refused, one naming an unknown kid says which (so the key set may be fetched again)', () => {
  assert.equal(reasonOf(signSaToken(rsa, saPayload(WHO, NOW), { alg: 'RS256' })), 'token has no key id');
  assert.equal(reasonOf(signSaToken(rsa, saPayload(WHO, NOW), { alg: 'RS256', kid: 7 })), 'invalid key id');
  const unknown = verify(signSaToken({ ...rsa, kid: 'rotated-in' }, saPayload(WHO, NOW)));
  assert.deepEqual(unknown, { ok: false, reason: 'unknown key id', unknownKid: 'rotated-in' });
});

test('service account issuer exact: another issuer, or the same with a trailing slash, is refused', () => {
  assert.equal(reasonOf(tokenWith({ iss: 'https://other.example' })), 'wrong issuer');
  assert.equal(reasonOf(tokenWith({ iss: `${TEST_ISSUER}/` })), 'wrong issuer');
  assert.equal(reasonOf(tokenWith({ iss: undefined })), 'missing claim iss');
});

test('service account audience required: aud must hold the configured audience, as a string or in a list', () => {
  assert.equal(reasonOf(tokenWith({ aud: TEST_AUDIENCE })), 'accepted');
  assert.equal(reasonOf(tokenWith({ aud: ['https://kubernetes.default.svc', TEST_AUDIENCE] })), 'accepted');
  assert.equal(reasonOf(tokenWith({ aud: ['https://kubernetes.default.svc'] })), 'wrong audience');
  assert.equal(reasonOf(tokenWith({ aud: undefined })), 'missing claim aud');
  assert.equal(reasonOf(tokenWith({ aud: [] })), 'invalid claim aud');
  assert.equal(reasonOf(tokenWith({ aud: [TEST_AUDIENCE, 7] })), 'invalid claim aud');
});

test('service account clock skew bounded: expired, not yet valid and issued in the future are refused past 30 s, accepted within', () => {
  const at = (nowSec: number, over: Record<string, unknown> = {}) => reasonOf(signSaToken(ec, { ...saPayload(WHO, NOW, 600), ...over }), { nowSec });
  assert.equal(at(NOW + 600 + 29), 'accepted');
  assert.equal(at(NOW + 600 + 30), 'expired');
  assert.equal(at(NOW - 30), 'accepted');
  assert.equal(at(NOW - 31), 'issued in the future');
  assert.equal(at(NOW, { nbf: NOW + 31 }), 'not yet valid');
  assert.equal(at(NOW, { exp: undefined }), 'missing claim exp');
  assert.equal(at(NOW, { iat: undefined }), 'missing claim iat');
  assert.equal(at(NOW, { exp: `${NOW + 60}` }), 'invalid claim exp');
  assert.equal(at(NOW, { nbf: 1.5 }), 'invalid claim nbf');
  assert.equal(at(NOW, { exp: NOW }), 'exp not after iat');
});

test('service account lifetime bounded: exp - iat above --max-token-lifetime is refused', () => {
  assert.equal(reasonOf(signSaToken(rsa, saPayload(WHO, NOW, 3600)), { maxLifetimeSec: 3600 }), 'accepted');
  assert.equal(reasonOf(signSaToken(rsa, saPayload(WHO, NOW, 3601)), { maxLifetimeSec: 3600 }), 'lifetime too long');
  // The kube-api-access default token Kubernetes extends to a year.
  assert.equal(reasonOf(signSaToken(rsa, saPayload(WHO, NOW, 365 * 86_400))), 'lifetime too long');
});

test('service account kubernetes.io claims validated with a closed alphabet: namespace, service account and pod names and UIDs', () => {
  assert.equal(reasonOf(tokenWith({ 'kubernetes.io': undefined })), 'missing claim kubernetes.io');
  assert.equal(reasonOf(k8sWith({ namespace: 'Agents' })), 'invalid claim kubernetes.io.namespace');
  assert.equal(reasonOf(k8sWith({ namespace: 'a'.repeat(64) })), 'invalid claim kubernetes.io.namespace');
  assert.equal(reasonOf(k8sWith({ serviceaccount: { name: 'tri age', uid: SA_UID } })), 'invalid claim kubernetes.io.serviceaccount');
  assert.equal(reasonOf(k8sWith({ serviceaccount: { name: 'triage', uid: 'x' } })), 'invalid claim kubernetes.io.serviceaccount');
  assert.equal(reasonOf(k8sWith({ pod: { name: 'p\nq', uid: POD_UID } })), 'invalid claim kubernetes.io.pod');
  assert.equal(reasonOf(k8sWith({ pod: undefined, secret: { name: 'triage-token', uid: POD_UID } })), 'token not bound to a pod');
  assert.equal(reasonOf(tokenWith({ sub: 'system:serviceaccount:agents:admin' })), 'sub does not name the service account');
  assert.equal(reasonOf(tokenWith({ jti: 'has space' })), 'invalid claim jti');
});

test('service account token shape: too long, not three segments, padded base64, duplicate claims, typ and crit are refused', () => {
  assert.equal(reasonOf('a'.repeat(5000)), 'token too long');
  assert.equal(reasonOf('a.b'), 'malformed token');
  assert.equal(reasonOf(`${tokenWith({})}=`), 'malformed token');
  const dup = `{"aud":["${TEST_AUDIENCE}"],${JSON.stringify(saPayload(WHO, NOW)).slice(1)}`;
  assert.equal(reasonOf(signSaToken(rsa, dup)), 'duplicate key in payload');
  assert.equal(reasonOf(signSaToken(rsa, saPayload(WHO, NOW), { alg: 'RS256', kid: 'rsa-1', typ: 'at+jwt' })), 'unsupported token type');
  assert.equal(reasonOf(signSaToken(rsa, saPayload(WHO, NOW), { alg: 'RS256', kid: 'rsa-1', crit: ['exp'] })), 'unsupported critical header');
  assert.equal(reasonOf(signSaToken(rsa, saPayload(WHO, NOW), { alg: 'RS256', kid: 'rsa-1', typ: 'JWT' })), 'accepted');
});
