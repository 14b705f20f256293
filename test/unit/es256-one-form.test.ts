// One string per token (security review 2026-11-29, finding 3): an ECDSA signature (r, s) verifies
// exactly when its twin (r, n - s) does, and real signers (Go's crypto/ecdsa under Kubernetes,
// OpenSSL under Node's crypto.sign and jose) emit a high s about half of the time, so the proxy
// refuses neither form: it reads an ES256 token with a high s as its low-s twin (oneTokenForm)
// wherever a token is a cache key (tokenCacheKey) and verifies it in that form, and mint-token signs
// low-s only. Vectors with a chosen s (the key made to fit it) pin the boundary at (n - 1) / 2 and
// the values that are no signature.
import assert from 'node:assert/strict';
import { createECDH, createHash, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { test } from 'node:test';
import { parseJwks } from '../../src/auth/jwks.ts';
import { oneTokenForm } from '../../src/auth/compact-token.ts';
import { keyRing, signBotToken, verifySignedToken, type BotClaims, type VerificationKey } from '../../src/auth/jwt.ts';
import { serviceAccountSource } from '../../src/auth/service-account-source.ts';
import { verifyServiceAccountToken } from '../../src/auth/service-account.ts';
import { composeVerifier, keyRingSource, type Verification } from '../../src/auth/verifier.ts';
import { parseWorkloadPolicy } from '../../src/auth/workload-policy.ts';
import { canonicalScope } from '../../src/git/scope.ts';
import { ecSigner, jwksOf, saPayload, signSaToken, TEST_AUDIENCE, TEST_ISSUER } from '../support/service-accounts.ts';

const N = BigInt('0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551');
const HALF = (N - 1n) / 2n;
const NOW = 1_800_000_000;
const CLAIMS: BotClaims = { sub: 'bot-1', workflow: 'wf', run_id: 'run-1', iat: NOW - 10, exp: NOW + 600 };

const hex32 = (v: bigint) => Buffer.from(v.toString(16).padStart(64, '0'), 'hex');
const toInt = (b: Buffer) => BigInt(`0x${b.toString('hex')}`);
const sOf = (token: string) => toInt(Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url').subarray(32));
const withS = (token: string, s: bigint) => {
  const sig = Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url');
  return `${token.slice(0, token.lastIndexOf('.') + 1)}${Buffer.concat([sig.subarray(0, 32), hex32(s)]).toString('base64url')}`;
};
const b64 = (v: object) => Buffer.from(JSON.stringify(v)).toString('base64url');
const powMod = (b: bigint, e: bigint, m: bigint): bigint => {
  let r = 1n;
  for (b %= m; e > 0n; e >>= 1n, b = (b * b) % m) if (e & 1n) r = (r * b) % m;
  return r;
};
/** The P-256 point d·G, as a public key (through ECDH, which multiplies the generator). */
const pointOf = (d: bigint) => {
  const ecdh = createECDH('prime256v1');
  ecdh.setPrivateKey(hex32(d));
  return ecdh.getPublicKey();
};

/**
 * A valid ES256 signature over `input` with exactly the s asked for: a random nonce k gives
 * r = (k·G).x mod n, and the private key is the one that makes s = k⁻¹(e + r·d) hold,
 * d = (s·k - e)·r⁻¹ mod n. Returns the public key and the r||s signature.
 */
function signatureWithS(input: string, s: bigint): { publicKey: KeyObject; signature: Buffer } {
  const e = toInt(createHash('sha256').update(input).digest());
  for (;;) {
    const k = (toInt(randomBytes(32)) % (N - 1n)) + 1n;
    const r = toInt(pointOf(k).subarray(1, 33)) % N;
    const d = ((((s * k - e) % N) + N) % N) * powMod(r, N - 2n, N) % N;
    if (r === 0n || d === 0n) continue;
    const q = pointOf(d);
    const publicKey = createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: q.subarray(1, 33).toString('base64url'), y: q.subarray(33).toString('base64url') }, format: 'jwk' });
    return { publicKey, signature: Buffer.concat([hex32(r), hex32(s)]) };
  }
}

/** A bot token and a service-account token over one chosen-s signature each, with the verifiers that check them. */
function vectors(s: bigint) {
  const botInput = `${b64({ alg: 'ES256', typ: 'JWT', kid: 'ec' })}.${b64(CLAIMS)}`;
  const bot = signatureWithS(botInput, s);
  const ring = keyRing([{ kid: 'ec', alg: 'ES256', key: bot.publicKey }]);
  const saInput = `${b64({ alg: 'ES256', kid: 'sa-ec' })}.${b64(saPayload({ namespace: 'agents', serviceAccount: 'triage', pod: 'triage-0' }, NOW))}`;
  const sa = signatureWithS(saInput, s);
  const keys = new Map([['sa-ec', { kid: 'sa-ec', alg: 'ES256' as const, key: sa.publicKey }]]);
  return {
    bot: `${botInput}.${bot.signature.toString('base64url')}`,
    sa: `${saInput}.${sa.signature.toString('base64url')}`,
    botReason: (token: string) => { const v = verifySignedToken(token, ring, { nowSec: NOW, maxLifetimeSec: 3600 }); return v.ok ? 'accepted' : v.reason; },
    saReason: (token: string) => { const v = verifyServiceAccountToken(token, keys, { issuer: TEST_ISSUER, audience: TEST_AUDIENCE, nowSec: NOW, maxLifetimeSec: 86_400 }); return v.ok ? 'accepted' : v.reason; },
  };
}

test('one string per token: at the boundary, s = (n - 1) / 2 is the low form and stays; its twin s = (n + 1) / 2 is read as it; both verify, bot and service-account tokens (oneTokenForm)', () => {
  const v = vectors(HALF);
  for (const [token, reason] of [[v.bot, v.botReason], [v.sa, v.saReason]] as const) {
    const twin = withS(token, HALF + 1n);
    assert.equal(reason(token), 'accepted');
    assert.equal(reason(twin), 'accepted', 'the twin is a valid ECDSA signature: every P-256 verifier takes it');
    assert.equal(oneTokenForm(token), token, 's = (n - 1) / 2 is low');
    assert.equal(oneTokenForm(twin), token, 's = (n + 1) / 2 is high: read as n - s = (n - 1) / 2');
  }
});

test('one string per token: s = 0, s = n, s = n + 5 (a valid s = 5 plus n) and s = 2^256 - 1 are no signature: refused, and left as they are (oneTokenForm)', () => {
  const v = vectors(5n);
  for (const [token, reason] of [[v.bot, v.botReason], [v.sa, v.saReason]] as const) {
    assert.equal(reason(token), 'accepted', 'the control: s = 5 is valid for this key');
    for (const s of [0n, N, N + 5n, 2n ** 256n - 1n]) {
      const forged = withS(token, s);
      assert.equal(reason(forged), 'bad signature', `s = ${s.toString(16)}`);
      assert.equal(oneTokenForm(forged), forged, `s = ${s.toString(16)} is not read as another token`);
    }
  }
});

test('one string per token: a high-s token signed by node:crypto (as jose signs on Node) is read as its low-s twin; an Ed25519 token, an HS256 token and an ES256 header over a 64-byte EdDSA signature are left as they are (oneTokenForm)', () => {
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const input = `${b64({ alg: 'ES256', kid: 'ec' })}.${b64(CLAIMS)}`;
  // About half of all signatures have a high s: 64 tries miss one with chance 2^-64.
  const signatures = Array.from({ length: 64 }, () => sign('sha256', Buffer.from(input), { key: ec.privateKey, dsaEncoding: 'ieee-p1363' }));
  const high = signatures.find((sig) => toInt(sig.subarray(32)) > HALF)!;
  const token = `${input}.${high.toString('base64url')}`;
  const low = oneTokenForm(token);
  assert.notEqual(low, token);
  assert.equal(low, withS(token, N - sOf(token)));
  assert.ok(sOf(low) <= HALF);
  assert.equal(oneTokenForm(low), low, 'the low form is its own');

  const ed = generateKeyPairSync('ed25519');
  // Ed25519 signs deterministically: other headers give other signatures, about half of them "high" read as r||s.
  const edTokens = Array.from({ length: 64 }, (_, i) => {
    const edInput = `${b64({ alg: 'EdDSA', kid: 'ed', n: i })}.${b64(CLAIMS)}`;
    return `${edInput}.${sign(null, Buffer.from(edInput), ed.privateKey).toString('base64url')}`;
  });
  const edHigh = edTokens.find((t) => sOf(t) > HALF && sOf(t) < N)!;
  const edRing = keyRing([{ kid: 'ed', alg: 'EdDSA', key: ed.publicKey }]);
  assert.ok(verifySignedToken(edHigh, edRing, { nowSec: NOW, maxLifetimeSec: 3600 }).ok);
  assert.equal(oneTokenForm(edHigh), edHigh, 'an Ed25519 signature is 64 bytes too, but not r||s');
  const confused = `${b64({ alg: 'ES256', kid: 'ed' })}.${edHigh.split('.')[1]}.${edHigh.split('.')[2]}`;
  assert.notEqual(oneTokenForm(confused), confused, 'the header decides; the key then refuses the algorithm');
  assert.equal((verifySignedToken(oneTokenForm(confused), edRing, { nowSec: NOW, maxLifetimeSec: 3600 }) as { reason: string }).reason, 'algorithm not allowed for this key');
  const hs = signBotToken(CLAIMS, Buffer.from('s'.repeat(32)));
  assert.equal(oneTokenForm(hs), hs);
});

test('one string per token: mint-token signs ES256 low-s only (signBotToken, 200 tokens)', () => {
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const key = { kid: 'ec', alg: 'ES256' as const, key: ec.privateKey };
  const ring = keyRing([{ kid: 'ec', alg: 'ES256', key: ec.publicKey } satisfies VerificationKey]);
  for (let i = 0; i < 200; i++) {
    const token = signBotToken({ ...CLAIMS, run_id: `run-${i}` }, key);
    assert.ok(sOf(token) <= HALF, `token ${i} has a high s`);
    assert.ok(verifySignedToken(token, ring, { nowSec: NOW, maxLifetimeSec: 3600 }).ok);
  }
});

const why = (v: Verification | undefined) => (v === undefined ? 'passed' : v.ok ? `accepted ${v.claims.sub}` : v.reason);

test('one string per token: the high-s twin of a verified token is the same cache entry, for our keys and a service account: served from the cache where a second verification would refuse it (tokenCacheKey)', async () => {
  // A cached token is checked again against exp only; a fresh verification also refuses a token
  // issued in the future. So at a clock before iat, only the cache can accept.
  const early = NOW - 3600;
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const mintKey = { kid: 'ec', alg: 'ES256' as const, key: ec.privateKey };
  const ring = keyRing([{ kid: 'ec', alg: 'ES256', key: ec.publicKey }]);
  const sa = ecSigner('sa-ec');
  const parsed = parseJwks(JSON.stringify(jwksOf(sa)));
  assert.ok(parsed.ok);
  const saKeys = { current: () => parsed.set.keys, refresh: async () => parsed.set.keys, close: () => undefined };
  const policy = parseWorkloadPolicy(JSON.stringify({ serviceAccounts: { 'agents/*': { models: true } } }), 'policy.json', canonicalScope);
  const verifier = composeVerifier([serviceAccountSource({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, maxLifetimeSec: 86_400, keys: saKeys, policy: () => policy }), keyRingSource(() => ring, 3600)]);
  const ask = async (token: string, nowSec: number) => why(await verifier.verify('bot', { token }, nowSec));

  const botToken = signBotToken(CLAIMS, mintKey);
  const saToken = signSaToken(sa, saPayload({ namespace: 'agents', serviceAccount: 'triage', pod: 'triage-0' }, NOW));
  const saLow = oneTokenForm(saToken);
  for (const [low, who] of [[botToken, 'bot-1'], [saLow, 'agents/triage-0']] as const) {
    const high = withS(low, N - sOf(low));
    assert.ok(sOf(high) > HALF);
    assert.equal(await ask(high, early), 'issued in the future', 'the control: not yet cached, the twin is verified, and refused at this clock');
    assert.equal(await ask(high, NOW), `accepted ${who}`, 'verified (as the low form) and remembered');
    assert.equal(await ask(low, early), `accepted ${who}`, 'the low form is the entry the twin made');
    assert.equal(await ask(high, early), `accepted ${who}`, 'and the twin finds it again');
  }
});
