// Token keys from files (src/auth/keys.ts) and the key ring that chooses one by kid and lets the
// key, never the token, fix the algorithm (src/auth/jwt.ts): every refusal, named after it.
import assert from 'node:assert/strict';
import { createHmac, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { test } from 'node:test';
import { keyRing, signBotToken, verifySignedToken, type BotClaims, type KeyRing, type VerificationKey } from '../../src/auth/jwt.ts';
import { KEY_ID, secretFromFile, signingKeyFile, verificationKeyFile } from '../../src/auth/keys.ts';
import { rsaKeyPair } from '../support/test-keys.ts';

const NOW = 1_700_000_000;
const OPTS = { nowSec: NOW, maxLifetimeSec: 3600 };
const CLAIMS: BotClaims = { sub: 'bot-1', workflow: 'wf', run_id: 'run-1', iat: NOW - 10, exp: NOW + 600 };
const SECRET = Buffer.from('0123456789abcdef0123456789abcdef-keys-test');

const ed = generateKeyPairSync('ed25519');
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const pem = (k: KeyObject) => Buffer.from(k.export({ type: k.type === 'public' ? 'spki' : 'pkcs8', format: 'pem' }).toString());
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

const ED_PUBLIC = verificationKeyFile('ed-2026.pem', pem(ed.publicKey));
const EC_PUBLIC = verificationKeyFile('ec-2026.pem', pem(ec.publicKey));
const ED_SIGNER = signingKeyFile('ed-2026.pem', pem(ed.privateKey));
const EC_SIGNER = signingKeyFile('ec-2026.pem', pem(ec.privateKey));

function reason(token: string, ring: KeyRing): string {
  const r = verifySignedToken(token, ring, OPTS);
  return r.ok ? 'accepted' : r.reason;
}

/** A token with this header, signed over its signing input by `signer` (HMAC secret, or an asymmetric key). */
function forge(header: Record<string, unknown>, signer: { hmac: Buffer } | { alg: 'EdDSA' | 'ES256'; key: KeyObject }, claims: object = CLAIMS): string {
  const input = `${b64(header)}.${b64(claims)}`;
  const sig = 'hmac' in signer ? createHmac('sha256', signer.hmac).update(input).digest() : signer.alg === 'EdDSA' ? sign(null, Buffer.from(input), signer.key) : sign('sha256', Buffer.from(input), { key: signer.key, dsaEncoding: 'ieee-p1363' });
  return `${input}.${sig.toString('base64url')}`;
}

test('key files: KID.pem holds an Ed25519 (EdDSA) or P-256 (ES256) public key, KID.hs256 an HS256 secret; the kid is the file name without its extension', () => {
  assert.deepEqual([ED_PUBLIC.kid, ED_PUBLIC.alg, (ED_PUBLIC.key as KeyObject).type], ['ed-2026', 'EdDSA', 'public']);
  assert.deepEqual([EC_PUBLIC.kid, EC_PUBLIC.alg, (EC_PUBLIC.key as KeyObject).type], ['ec-2026', 'ES256', 'public']);
  const secret = verificationKeyFile('shared_1.hs256', Buffer.concat([SECRET, Buffer.from('\n')]));
  assert.deepEqual([secret.kid, secret.alg, secret.key], ['shared_1', 'HS256', SECRET], 'one trailing newline is dropped');
  assert.deepEqual(secretFromFile('f', Buffer.concat([SECRET, Buffer.from('\r\n')])), SECRET);
  assert.deepEqual(secretFromFile('f', Buffer.concat([SECRET, Buffer.from('\n\n')])), Buffer.concat([SECRET, Buffer.from('\n')]), 'only one newline');
});

test('bad key file: a name that is no key file, a kid outside the alphabet, a short secret, garbage, an RSA or P-384 key: each refused naming the file and what to fix', () => {
  assert.throws(() => verificationKeyFile('README.md', Buffer.from('x')), /^Error: README\.md: not a key file: name it KID\.pem .* or KID\.hs256/);
  assert.throws(() => verificationKeyFile('key.PEM', pem(ed.publicKey)), /not a key file/);
  for (const bad of ['.pem', '-a.pem', 'a b.pem', 'ü.pem', `${'k'.repeat(65)}.pem`, 'a/b.pem']) {
    assert.throws(() => verificationKeyFile(bad, pem(ed.publicKey)), /the key id .* must be 1 to 64 letters, digits, '\.', '_' or '-'.*rename the file/, bad);
  }
  assert.ok(KEY_ID.test('k'.repeat(64)) && KEY_ID.test('2026-11.rotated_a'));
  assert.throws(() => verificationKeyFile('short.hs256', Buffer.alloc(31, 1)), /^Error: short\.hs256: an HS256 secret must be at least 32 bytes \(e\.g\. openssl rand -hex 32 > FILE\)$/);
  assert.throws(() => verificationKeyFile('junk.pem', Buffer.from('-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n')), /^Error: junk\.pem: not a PEM public key/);
  const rsa = rsaKeyPair(2048);
  assert.throws(() => verificationKeyFile('rsa.pem', pem(rsa.publicKey)), /^Error: rsa\.pem: a rsa key; a token key must be Ed25519 .* or P-256/);
  const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' });
  assert.throws(() => verificationKeyFile('p384.pem', pem(p384.publicKey)), /^Error: p384\.pem: an EC key on secp384r1; a token key must be Ed25519/);
});

test('private key refused by the listeners: a private key file given to verify names the openssl command that gives the public key; mint-token refuses a public key', () => {
  for (const k of [ed.privateKey, ec.privateKey]) {
    assert.throws(() => verificationKeyFile('mine.pem', pem(k)), /^Error: mine\.pem: a private key; the proxy verifies with the public key only, so that it cannot mint tokens: give it the public key \(openssl pkey -in mine\.pem -pubout\)/);
  }
  const sec1 = Buffer.from(ec.privateKey.export({ type: 'sec1', format: 'pem' }).toString());
  assert.throws(() => verificationKeyFile('sec1.pem', sec1), /a private key/);
  assert.equal(signingKeyFile('sec1.pem', sec1).alg, 'ES256', 'mint-token takes an EC PRIVATE KEY too');
  assert.throws(() => signingKeyFile('pub.pem', pem(ed.publicKey)), /^Error: pub\.pem: mint-token signs with a private key/);
  // A key object of the wrong kind cannot enter a ring either.
  assert.throws(() => keyRing([{ kid: 'x', alg: 'EdDSA', key: ed.privateKey }]), /an EdDSA key for verification must be a public key/);
  assert.throws(() => keyRing([{ kid: 'x', alg: 'ES256', key: ed.publicKey }]), /an ES256 key must be a P-256/);
});

test('two keys same kid: a ring refuses them (and two keys without kid)', () => {
  assert.throws(() => keyRing([ED_PUBLIC, { ...EC_PUBLIC, kid: 'ed-2026' }]), /^Error: two keys with the key id "ed-2026": each key needs a name of its own$/);
  assert.throws(() => keyRing([{ kid: undefined, alg: 'HS256', key: SECRET }, { kid: undefined, alg: 'HS256', key: SECRET }]), /two keys without a key id/);
});

test('asymmetric tokens: Ed25519 and ES256 (r||s, 64 bytes) round-trip with their kid in the header; the proxy verifies them with public keys only', () => {
  const ring = keyRing([ED_PUBLIC, EC_PUBLIC]);
  for (const signer of [ED_SIGNER, EC_SIGNER]) {
    const token = signBotToken(CLAIMS, signer);
    const [header, , signature] = token.split('.') as [string, string, string];
    assert.deepEqual(JSON.parse(Buffer.from(header, 'base64url').toString()), { alg: signer.alg, typ: 'JWT', kid: signer.kid });
    assert.equal(Buffer.from(signature, 'base64url').length, 64, 'JOSE form, not DER');
    const r = verifySignedToken(token, ring, OPTS);
    assert.ok(r.ok);
    assert.deepEqual(r.claims, CLAIMS);
  }
});

test('unknown kid: a token naming a key the ring does not hold is refused (unknown key id), and one naming no kid when every key has one (token has no key id)', () => {
  const ring = keyRing([ED_PUBLIC]);
  assert.equal(reason(signBotToken(CLAIMS, { ...ED_SIGNER, kid: 'ed-2025' }), ring), 'unknown key id');
  assert.equal(reason(signBotToken(CLAIMS, { ...ED_SIGNER, kid: undefined }), ring), 'token has no key id');
  assert.equal(reason(forge({ alg: 'EdDSA', kid: 7 }, { alg: 'EdDSA', key: ed.privateKey }), ring), 'invalid key id');
  // Beside file keys, the environment's key (no kid) takes the tokens without kid, and only those.
  const mixed = keyRing([ED_PUBLIC, { kid: undefined, alg: 'HS256', key: SECRET }]);
  assert.equal(reason(signBotToken(CLAIMS, SECRET), mixed), 'accepted');
  assert.equal(reason(forge({ alg: 'HS256', kid: 'gone' }, { hmac: SECRET }), mixed), 'unknown key id');
  // The environment's key alone reads no kid, as before key files: any kid, or none, is the same token.
  assert.equal(reason(forge({ alg: 'HS256', kid: 'anything' }, { hmac: SECRET }), keyRing([{ kid: undefined, alg: 'HS256', key: SECRET }])), 'accepted');
});

test('algorithm fixed by key: a token whose alg is not its key\'s is refused (alg mismatch), and an alg we do not implement is unsupported', () => {
  const ring = keyRing([ED_PUBLIC, EC_PUBLIC]);
  // ES256-signed, claiming the Ed25519 key's kid: the kid's key allows EdDSA only.
  assert.equal(reason(forge({ alg: 'ES256', kid: 'ed-2026' }, { alg: 'ES256', key: ec.privateKey }), ring), 'algorithm not allowed for this key');
  assert.equal(reason(forge({ alg: 'EdDSA', kid: 'ec-2026' }, { alg: 'EdDSA', key: ed.privateKey }), ring), 'algorithm not allowed for this key');
  assert.equal(reason(forge({ alg: 'HS256', kid: 'ed-2026' }, { hmac: SECRET }), ring), 'algorithm not allowed for this key');
  for (const alg of ['none', 'RS256', 'HS512', 'ES384', 'eddsa', 'Ed25519']) {
    assert.equal(reason(forge({ alg, kid: 'ed-2026' }, { alg: 'EdDSA', key: ed.privateKey }), ring), 'unsupported algorithm', alg);
  }
  assert.equal(reason(forge({ kid: 'ed-2026' }, { alg: 'EdDSA', key: ed.privateKey }), ring), 'unsupported algorithm', 'no alg');
});

test('key confusion refused: an HS256 token keyed with a public key (its PEM, its DER, its raw bytes) never verifies against that key', () => {
  const spkiPem = pem(ed.publicKey);
  const spkiDer = ed.publicKey.export({ type: 'spki', format: 'der' });
  const raw = spkiDer.subarray(-32);
  // Alone, or beside an HS256 key, the public key's kid allows EdDSA only.
  for (const ring of [keyRing([ED_PUBLIC]), keyRing([ED_PUBLIC, { kid: 'shared', alg: 'HS256', key: SECRET }])]) {
    for (const hmac of [spkiPem, spkiDer, raw]) assert.equal(reason(forge({ alg: 'HS256', kid: 'ed-2026' }, { hmac }), ring), 'algorithm not allowed for this key');
  }
});

test('asymmetric signatures: a DER-encoded ES256 signature, a truncated one, and one by another key under the same kid are bad signatures', () => {
  const ring = keyRing([ED_PUBLIC, EC_PUBLIC]);
  const input = `${b64({ alg: 'ES256', typ: 'JWT', kid: 'ec-2026' })}.${b64(CLAIMS)}`;
  const der = sign('sha256', Buffer.from(input), ec.privateKey);
  assert.equal(reason(`${input}.${der.toString('base64url')}`, ring), 'bad signature');
  const good = signBotToken(CLAIMS, EC_SIGNER);
  assert.equal(reason(good.slice(0, good.lastIndexOf('.') + 1) + Buffer.alloc(63).toString('base64url'), ring), 'bad signature');
  const other = generateKeyPairSync('ed25519');
  assert.equal(reason(signBotToken(CLAIMS, { kid: 'ed-2026', alg: 'EdDSA', key: other.privateKey }), ring), 'bad signature');
  assert.equal(reason(forge({ alg: 'EdDSA', kid: 'ed-2026' }, { alg: 'EdDSA', key: ed.privateKey }, { ...CLAIMS, exp: NOW - 31 }), ring), 'expired', 'the claims are checked as for HS256');
});

test('no verification key: a ring left empty (every key file removed) refuses every token', () => {
  assert.equal(reason(signBotToken(CLAIMS, ED_SIGNER), keyRing([])), 'no verification key');
  assert.equal(reason(signBotToken(CLAIMS, SECRET), keyRing([])), 'no verification key');
});

test('an HS256 key file signs and verifies with its kid; without kid the header is the one it always was', () => {
  const keyFile: VerificationKey = verificationKeyFile('k1.hs256', SECRET);
  const token = signBotToken(CLAIMS, signingKeyFile('k1.hs256', SECRET));
  assert.deepEqual(JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()), { alg: 'HS256', typ: 'JWT', kid: 'k1' });
  assert.equal(reason(token, keyRing([keyFile])), 'accepted');
  assert.equal(signBotToken(CLAIMS, SECRET).split('.')[0], 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9');
});
