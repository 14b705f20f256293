// A compact JWS (RFC 7515) as every token the listeners verify arrives: read apart before its key
// is chosen (readCompactToken: bounded, three canonical base64url segments, a strict header),
// and its one form. An ES256 signature (r, s) verifies exactly when its twin (r, n - s) does, so
// every ES256 token has a second string for the same claims (security review 2026-11-29,
// finding 3). Neither form is refused, because real signers emit both: the Kubernetes API server
// signs service-account tokens through go-jose (asymmetric.go: ecdsa.Sign, r and s padded as
// they come) with Go's crypto/ecdsa, whose s = k^-1 (e + r d) mod n is never normalised, and
// OpenSSL, under Node's crypto.sign and so under jose, does the same: about half of their
// tokens have s > n/2. Refusing a high s would refuse half of a cluster's valid tokens; instead a
// token has one form inside the proxy, the low-s one, wherever it is a key (tokenCacheKey), and
// is verified in that form. mint-token signs low-s only (jwt.ts). Pure.
import { isObject } from '../json/keys.ts';
import { parseStrictJson } from '../json/strict.ts';

/** Checked before any decoding, so hostile input costs little. Real tokens are a few hundred chars. */
const MAX_TOKEN_LENGTH = 4096;
/** Unpadded base64url only: no '=', '+' or '/'. */
const BASE64URL_SEGMENT = /^[A-Za-z0-9_-]+$/;

/** A compact JWS taken apart: its header read, its payload and signature still bytes. */
export type ReadToken =
  | { readonly ok: true; readonly header: Record<string, unknown>; readonly signingInput: string; readonly payloadBytes: Buffer; readonly signature: Buffer }
  | { readonly ok: false; readonly reason: string };

/**
 * Pure: the checks every token we verify passes before its key is chosen (ours and a service
 * account's alike): bounded length, three base64url segments, a header that is one JSON object
 * without duplicate keys, `typ` JWT when present, and no `crit` (RFC 7515 section 4.1.11: we
 * understand no extension, so a token that needs one is refused). The header is read before the
 * signature is checked so that the caller can make the algorithm its key's, never the token's.
 */
export function readCompactToken(token: string): ReadToken {
  if (token.length > MAX_TOKEN_LENGTH) return { ok: false, reason: 'token too long' };
  const segments = token.split('.');
  if (segments.length !== 3) return { ok: false, reason: 'malformed token' };
  const [headerSegment, payloadSegment, signatureSegment] = segments as [string, string, string];
  const headerBytes = decodeSegment(headerSegment);
  const payloadBytes = decodeSegment(payloadSegment);
  const signature = decodeSegment(signatureSegment);
  if (headerBytes === null || payloadBytes === null || signature === null) return { ok: false, reason: 'malformed token' };
  const header = parseClaimsObject(headerBytes);
  if (header === 'duplicate') return { ok: false, reason: 'duplicate key in header' };
  if (header === null) return { ok: false, reason: 'malformed header' };
  if (Object.hasOwn(header, 'typ') && header.typ !== 'JWT') return { ok: false, reason: 'unsupported token type' };
  if (Object.hasOwn(header, 'crit')) return { ok: false, reason: 'unsupported critical header' };
  return { ok: true, header, signingInput: `${headerSegment}.${payloadSegment}`, payloadBytes, signature };
}

/**
 * Decodes one unpadded base64url segment. Node's decoder silently skips invalid characters and
 * ignores unused trailing bits, so the segment must also be exactly the canonical encoding of its
 * bytes; otherwise several spellings of one signature would all verify.
 */
export function decodeSegment(segment: string): Buffer | null {
  if (!BASE64URL_SEGMENT.test(segment)) return null;
  const bytes = Buffer.from(segment, 'base64url');
  return bytes.toString('base64url') === segment ? bytes : null;
}

/**
 * An object, or 'duplicate' when a key repeats (exactly or but for case): another JWT library
 * reading the first of two `exp` (or `alg`, or `EXP`) claims must never see a different token
 * than the one verified here.
 */
export function parseClaimsObject(bytes: Buffer): Record<string, unknown> | 'duplicate' | null {
  const parsed = parseStrictJson(bytes);
  if (!parsed.ok) return parsed.reason === 'duplicate_key' || parsed.reason === 'case_variant_key' ? 'duplicate' : null;
  return isObject(parsed.value) ? parsed.value : null;
}

/** The order n of P-256's group, and (n - 1) / 2, as 32 big-endian bytes: an ES256 signature's r and s are numbers in [1, n - 1]. */
const P256_ORDER = Buffer.from('ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551', 'hex');
const P256_HALF_ORDER = Buffer.from('7fffffff800000007fffffffffffffffde737d56d38bcf4279dce5617e3192a8', 'hex');
/** An ES256 signature's base64url length (64 bytes; an Ed25519 signature has it too). */
const R_S_SIGNATURE_CHARS = 86;

/** Pure: whether a 64-byte r||s signature's s is high: above (n - 1) / 2 and below n (s >= n is no signature). */
function highS(signature: Buffer): boolean {
  if (signature.length !== 64) return false;
  const s = signature.subarray(32);
  return s.compare(P256_HALF_ORDER) > 0 && s.compare(P256_ORDER) < 0;
}

/**
 * Pure: an r||s signature with its s in the lower half ([1, (n - 1) / 2]): a high s becomes
 * n - s (subtracted byte by byte, from the last); a signature of another length, or with s = 0 or
 * s >= n (no ECDSA signature: verification refuses it), is returned as it is.
 */
export function lowS(signature: Buffer): Buffer {
  if (!highS(signature)) return signature;
  const low = Buffer.from(signature);
  let borrow = 0;
  for (let i = 31; i >= 0; i--) {
    const digit = P256_ORDER[i]! - signature[32 + i]! - borrow;
    low[32 + i] = digit & 0xff;
    borrow = digit < 0 ? 1 : 0;
  }
  return low;
}

/**
 * Pure: the one form of a token inside the proxy: an ES256 token (its header names ES256) with a
 * high s is its low-s twin; any other token is returned as it is.
 */
export function oneTokenForm(token: string): string {
  const last = token.lastIndexOf('.');
  if (token.length > MAX_TOKEN_LENGTH || token.length - last - 1 !== R_S_SIGNATURE_CHARS) return token;
  // A lenient decode only to look: a token is rewritten only when its segments are canonical.
  if (!highS(Buffer.from(token.slice(last + 1), 'base64url'))) return token;
  const signature = decodeSegment(token.slice(last + 1));
  // Only now, for a high s, is the header read (an Ed25519 signature is 64 bytes too).
  const headerBytes = decodeSegment(token.slice(0, token.indexOf('.')));
  const header = headerBytes === null ? null : parseClaimsObject(headerBytes);
  if (signature === null || header === null || header === 'duplicate' || header.alg !== 'ES256') return token;
  return `${token.slice(0, last + 1)}${lowS(signature).toString('base64url')}`;
}

/**
 * Pure: the string a verified token is remembered by in `cache` (the per-token caches of
 * src/auth/verifier.ts and src/auth/service-account-source.ts, which store one form only): the
 * token as presented when the cache holds it, so that a token already in its one form costs one
 * lookup, else its one form (oneTokenForm), which the caller also verifies.
 */
export function tokenCacheKey(cache: ReadonlyMap<string, unknown>, token: string): string {
  return cache.has(token) ? token : oneTokenForm(token);
}
