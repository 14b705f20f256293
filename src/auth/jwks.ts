// A JSON Web Key Set (RFC 7517) as the service-account verifier uses it: the public keys an issuer
// (a Kubernetes API server, at /openid/v1/jwks) signs its tokens with, by key id. Pure: bytes in,
// key objects out.
//
// Only two kinds of key are taken: RSA with a modulus of 2048 bits or more, for RS256, and EC on
// P-256, for ES256 (what Kubernetes signs with). Each key fixes its algorithm: its `alg`, when
// given, must be that one, and a token must name it (service-account.ts). A key another use is
// declared for (`use` other than "sig", `key_ops` without "verify"), or of another kind (an Ed25519
// key, RSA-PSS, another curve), is left out and listed, so that a token naming it is refused as an
// unknown key, while the keys beside it keep working. What cannot be a public signing key of
// ours stops the whole set: a key without a kid, two keys with one kid (which would verify?), a
// symmetric key, private key material (a leaked key is no key to trust), a malformed or weak RSA
// or EC key. The document and the number of keys are capped before anything is decoded.
import { createPublicKey, type KeyObject } from 'node:crypto';
import { isObject } from '../json/keys.ts';
import { parseStrictJson } from '../json/strict.ts';
import { decodeSegment } from './compact-token.ts';

/** The algorithms a service-account token may be signed with: the key decides which. */
export type JwkAlgorithm = 'RS256' | 'ES256';

export interface JwkKey {
  readonly kid: string;
  readonly alg: JwkAlgorithm;
  /** A public key object (RSA or P-256). */
  readonly key: KeyObject;
}

export interface JwkSet {
  readonly keys: ReadonlyMap<string, JwkKey>;
  /** The keys left out and why (`kid "x": use is "enc"`), for the log. */
  readonly skipped: readonly string[];
}

export type ParsedJwks = { readonly ok: true; readonly set: JwkSet } | { readonly ok: false; readonly reason: string };

/** A cluster publishes one to three keys (a rotation overlaps two); a few KiB at most. */
export const MAX_JWKS_BYTES = 64 * 1024;
export const MAX_JWKS_KEYS = 32;
const MIN_RSA_BITS = 2048;
/** Larger moduli cost more to verify with and nobody issues them for tokens. */
const MAX_RSA_BITS = 8192;
/** 65537 (AQAB): the exponent every issuer uses; a small one is the classic forgery risk with a lax padding check. */
const RSA_EXPONENT = 'AQAB';
/** Printable ASCII, bounded: a kid becomes a log field. */
export const JWK_KEY_ID = /^[\x21-\x7e]{1,128}$/;
/** Members that only a private or symmetric key has. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/** Pure: the key set in `bytes`, or why none of it can be trusted (a fixed phrase with the key id where there is one). */
export function parseJwks(bytes: Buffer | string): ParsedJwks {
  const size = typeof bytes === 'string' ? Buffer.byteLength(bytes) : bytes.length;
  if (size > MAX_JWKS_BYTES) return jwksRefusal(`the key set is larger than ${MAX_JWKS_BYTES / 1024} KiB`);
  const parsed = parseStrictJson(bytes);
  if (!parsed.ok) return jwksRefusal(parsed.reason === 'invalid' ? 'the key set is not JSON' : `the key set has a duplicate key (${parsed.reason})`);
  if (!isObject(parsed.value) || !Array.isArray(parsed.value.keys)) return jwksRefusal('the key set is not {"keys": [...]}');
  const raw: unknown[] = parsed.value.keys;
  if (raw.length > MAX_JWKS_KEYS) return jwksRefusal(`the key set holds more than ${MAX_JWKS_KEYS} keys`);
  const keys = new Map<string, JwkKey>();
  const skipped: string[] = [];
  const seen = new Set<string>();
  for (const [i, jwk] of raw.entries()) {
    const read = readJwk(jwk);
    if (read.kind === 'refused') return jwksRefusal(`keys[${i}]: ${read.reason}`);
    if (seen.has(read.kid)) return jwksRefusal(`keys[${i}]: the key id "${read.kid}" is used twice`);
    seen.add(read.kid);
    if (read.kind === 'skipped') skipped.push(`kid "${read.kid}": ${read.reason}`);
    else keys.set(read.kid, read.key);
  }
  return { ok: true, set: { keys, skipped } };
}

type ReadJwk = { readonly kind: 'key'; readonly kid: string; readonly key: JwkKey } | { readonly kind: 'skipped'; readonly kid: string; readonly reason: string } | { readonly kind: 'refused'; readonly reason: string };

/** Pure: one JWK as a verification key, left out (another use or kind), or refused (the set is then untrusted). */
function readJwk(jwk: unknown): ReadJwk {
  if (!isObject(jwk)) return { kind: 'refused', reason: 'not an object' };
  const { kid, kty, use, alg } = jwk;
  if (typeof kid !== 'string') return { kind: 'refused', reason: 'no key id (kid): every key must have one' };
  if (!JWK_KEY_ID.test(kid)) return { kind: 'refused', reason: 'the key id is not 1 to 128 printable ASCII characters' };
  const refused = (reason: string): ReadJwk => ({ kind: 'refused', reason: `kid "${kid}": ${reason}` });
  const skipped = (reason: string): ReadJwk => ({ kind: 'skipped', kid, reason });
  if (PRIVATE_MEMBERS.some((m) => Object.hasOwn(jwk, m))) return refused('holds private or symmetric key material; publish public keys only');
  if (use !== undefined && use !== 'sig') return skipped(`use is ${JSON.stringify(use)}, not "sig"`);
  const ops = jwk.key_ops;
  if (ops !== undefined && !(Array.isArray(ops) && ops.includes('verify'))) return skipped('key_ops does not include "verify"');
  if (kty === 'RSA') {
    if (alg !== undefined && alg !== 'RS256') return skipped(`alg ${JSON.stringify(alg)} is not RS256`);
    const key = rsaKey(jwk);
    return typeof key === 'string' ? refused(key) : { kind: 'key', kid, key: { kid, alg: 'RS256', key } };
  }
  if (kty === 'EC') {
    if (jwk.crv !== 'P-256') return skipped(`curve ${JSON.stringify(jwk.crv)} is not P-256`);
    if (alg !== undefined && alg !== 'ES256') return skipped(`alg ${JSON.stringify(alg)} is not ES256`);
    const key = ecKey(jwk);
    return typeof key === 'string' ? refused(key) : { kind: 'key', kid, key: { kid, alg: 'ES256', key } };
  }
  if (kty === 'oct') return refused('a symmetric key has no place in a public key set');
  return skipped(`key type ${JSON.stringify(kty)} is not RSA or EC`);
}

/** Pure: an RSA public key from `n` and `e`, each canonical base64url, or why not. */
function rsaKey(jwk: Record<string, unknown>): KeyObject | string {
  const n = typeof jwk.n === 'string' ? decodeSegment(jwk.n) : null;
  if (n === null || typeof jwk.e !== 'string' || decodeSegment(jwk.e) === null) return 'n and e must be base64url without padding';
  if (jwk.e !== RSA_EXPONENT) return 'the RSA exponent must be 65537 (AQAB)';
  // A leading zero byte would be a second spelling of the same modulus (RFC 7518 6.3.1.1).
  if (n[0] === 0) return 'the modulus has a leading zero byte';
  const bits = n.length * 8 - Math.clz32(n[0]!) + 24;
  if (bits < MIN_RSA_BITS) return `the RSA modulus has ${bits} bits; at least ${MIN_RSA_BITS} are required`;
  if (bits > MAX_RSA_BITS) return `the RSA modulus has ${bits} bits; at most ${MAX_RSA_BITS} are taken`;
  return publicKeyOf({ kty: 'RSA', n: jwk.n as string, e: jwk.e }, 'not a valid RSA public key');
}

/** Pure: a P-256 public key from `x` and `y` (32 bytes each, a point on the curve), or why not. */
function ecKey(jwk: Record<string, unknown>): KeyObject | string {
  const x = typeof jwk.x === 'string' ? decodeSegment(jwk.x) : null;
  const y = typeof jwk.y === 'string' ? decodeSegment(jwk.y) : null;
  if (x === null || y === null || x.length !== 32 || y.length !== 32) return 'x and y must be 32 bytes each, base64url without padding';
  // OpenSSL refuses a point that is not on the curve.
  return publicKeyOf({ kty: 'EC', crv: 'P-256', x: jwk.x as string, y: jwk.y as string }, 'not a point on P-256');
}

function publicKeyOf(jwk: Record<string, string>, problem: string): KeyObject | string {
  try {
    return createPublicKey({ key: jwk, format: 'jwk' });
  } catch {
    return problem;
  }
}

function jwksRefusal(reason: string): ParsedJwks {
  return { ok: false, reason };
}
