import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { MAX_JWKS_BYTES, MAX_JWKS_KEYS, parseJwks, type ParsedJwks } from '../../src/auth/jwks.ts';
import { ecSigner, jwksOf, rsaSigner } from '../support/service-accounts.ts';

const rsa = rsaSigner('rsa-1');
const ec = ecSigner('ec-1');
const parse = (doc: unknown): ParsedJwks => parseJwks(Buffer.from(JSON.stringify(doc)));
const reasonOf = (parsed: ParsedJwks) => (parsed.ok ? 'accepted' : parsed.reason);

test('jwks: RSA and P-256 keys are read by kid, each fixing its algorithm (RS256, ES256)', () => {
  const parsed = parse(jwksOf(rsa, ec));
  assert.ok(parsed.ok);
  assert.deepEqual([...parsed.set.keys.keys()], ['rsa-1', 'ec-1']);
  assert.equal(parsed.set.keys.get('rsa-1')!.alg, 'RS256');
  assert.equal(parsed.set.keys.get('ec-1')!.alg, 'ES256');
  assert.equal(parsed.set.keys.get('ec-1')!.key.type, 'public');
  // A key without alg or use (Kubernetes writes both; others may not) takes its kind's algorithm.
  const { alg: _a, use: _u, ...bare } = rsa.jwk;
  assert.ok(parse({ keys: [bare] }).ok);
});

test('jwks kid required and unique: a key without kid, or two keys with one kid, stop the whole set', () => {
  const { kid: _k, ...noKid } = rsa.jwk;
  assert.match(reasonOf(parse({ keys: [ec.jwk, noKid] })), /^keys\[1\]: no key id \(kid\)/);
  assert.match(reasonOf(parse({ keys: [rsa.jwk, { ...ec.jwk, kid: 'rsa-1' }] })), /the key id "rsa-1" is used twice/);
  assert.match(reasonOf(parse({ keys: [{ ...rsa.jwk, kid: '' }] })), /not 1 to 128 printable ASCII/);
});

test('jwks RSA modulus at least 2048 bits: a 1024-bit key stops the set, naming its size', () => {
  assert.match(reasonOf(parse(jwksOf(rsaSigner('weak', 1024)))), /kid "weak": the RSA modulus has 1024 bits; at least 2048 are required/);
  assert.ok(parse(jwksOf(rsaSigner('big', 3072))).ok);
});

test('jwks RSA exponent 65537 only, modulus without a leading zero byte', () => {
  assert.match(reasonOf(parse({ keys: [{ ...rsa.jwk, e: 'Aw' }] })), /the RSA exponent must be 65537/);
  const n = Buffer.concat([Buffer.from([0]), Buffer.from(rsa.jwk.n as string, 'base64url')]).toString('base64url');
  assert.match(reasonOf(parse({ keys: [{ ...rsa.jwk, n }] })), /leading zero byte/);
  assert.match(reasonOf(parse({ keys: [{ ...rsa.jwk, n: `${rsa.jwk.n as string}=` }] })), /base64url without padding/);
});

test('jwks EC point on P-256: a point off the curve or of the wrong length stops the set', () => {
  assert.match(reasonOf(parse({ keys: [{ ...ec.jwk, y: ec.jwk.x }] })), /kid "ec-1": not a point on P-256/);
  assert.match(reasonOf(parse({ keys: [{ ...ec.jwk, x: 'AAAA' }] })), /x and y must be 32 bytes each/);
});

test('jwks private key material is refused: a set that publishes d (or a symmetric k) is not trusted at all', () => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  assert.match(reasonOf(parse({ keys: [{ kid: 'leak', use: 'sig', ...privateKey.export({ format: 'jwk' }) }] })), /kid "leak": holds private or symmetric key material/);
  assert.match(reasonOf(parse({ keys: [{ kid: 'hmac', kty: 'oct', k: 'c2VjcmV0' }] })), /kid "hmac": holds private or symmetric key material/);
  assert.match(reasonOf(parse({ keys: [{ kid: 'hmac', kty: 'oct' }] })), /kid "hmac": a symmetric key has no place/);
});

test('jwks use=sig and alg consistent: a key for encryption, for another algorithm or of another kind is left out and listed; the others work', () => {
  const ed = generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' });
  const parsed = parse({
    keys: [
      rsa.jwk,
      { ...ec.jwk, kid: 'enc', use: 'enc' },
      { ...ec.jwk, kid: 'ops', key_ops: ['encrypt'] },
      { ...rsaSigner('pss').jwk, alg: 'PS256' },
      { ...ec.jwk, kid: 'mixed', alg: 'RS256' },
      { kid: 'ed', ...ed },
      { ...ec.jwk, kid: 'p384', crv: 'P-384' },
    ],
  });
  assert.ok(parsed.ok);
  assert.deepEqual([...parsed.set.keys.keys()], ['rsa-1']);
  assert.deepEqual(parsed.set.skipped, [
    'kid "enc": use is "enc", not "sig"',
    'kid "ops": key_ops does not include "verify"',
    'kid "pss": alg "PS256" is not RS256',
    'kid "mixed": alg "RS256" is not ES256',
    'kid "ed": key type "OKP" is not RSA or EC',
    'kid "p384": curve "P-384" is not P-256',
  ]);
});

test('jwks caps: a document over 64 KiB or with more than 32 keys is refused before its keys are read', () => {
  assert.match(reasonOf(parseJwks(Buffer.alloc(MAX_JWKS_BYTES + 1, 0x20))), /larger than 64 KiB/);
  assert.match(reasonOf(parse({ keys: Array.from({ length: MAX_JWKS_KEYS + 1 }, (_, i) => ({ ...ec.jwk, kid: `k${i}` })) })), /more than 32 keys/);
  assert.ok(parse({ keys: Array.from({ length: MAX_JWKS_KEYS }, (_, i) => ({ ...ec.jwk, kid: `k${i}` })) }).ok);
});

test('jwks strict JSON: garbage, a non-set and duplicate members are refused', () => {
  assert.equal(reasonOf(parseJwks('<html>')), 'the key set is not JSON');
  assert.equal(reasonOf(parse({ key: [] })), 'the key set is not {"keys": [...]}');
  assert.match(reasonOf(parseJwks(`{"keys":[${JSON.stringify(ec.jwk).replace('{', '{"kid":"other",')}]}`)), /duplicate key/);
});
