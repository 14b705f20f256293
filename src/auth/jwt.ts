/**
 * JSON Web Tokens (RFC 7519) that workloads present: to the model gateway (bot tokens) and, with a
 * git scope, to the git proxy (workload tokens). Signed with HS256 (a shared secret), EdDSA
 * (Ed25519) or ES256 (P-256); the key fixes the algorithm, never the token (see KeyRing).
 *
 * Verification fails closed: anything not exactly as issued by signBotToken is rejected. Failure
 * reasons are fixed phrases and never echo token content, because they end up in logs.
 */
import { createHmac, sign as cryptoSign, timingSafeEqual, verify as cryptoVerify, type KeyObject } from 'node:crypto';
import { isObject } from '../json/keys.ts';
import { decodeSegment, lowS, parseClaimsObject, readCompactToken } from './compact-token.ts';

export interface BotClaims {
  sub: string;
  workflow: string;
  run_id: string;
  iat: number;
  exp: number;
  /**
   * The git scope (`host/path:read|write` entries, parsed by src/git/scope.ts). Present only in
   * tokens for the git proxy, and it is what tells the two kinds apart: the gateway refuses a
   * token that has it and the git proxy one that lacks it, so that one signing secret may serve
   * both listeners without either accepting the other's tokens.
   */
  git?: readonly string[];
  /** Limits the orchestrator lowered for this run (never above --limits: the gateway takes the lower). */
  limits?: RunLimits;
  /** The token's own id (mint-token sets one), for revoking this token alone. */
  jti?: string;
}

export interface RunLimits {
  readonly budget_usd?: number;
  readonly max_concurrent?: number;
  readonly requests_per_minute?: number;
  readonly tokens_per_minute?: number;
}

export type VerifyResult = { ok: true; claims: BotClaims } | { ok: false; reason: string };
/** A token whose signature and claims held, and the key that verified it (for the cache of src/auth/verifier.ts). */
export type SignedResult = { ok: true; claims: BotClaims; key: VerificationKey } | { ok: false; reason: string };
export type GitVerifyResult = { ok: true; claims: BotClaims & { git: readonly string[] } } | { ok: false; reason: string };

export interface VerifyOptions {
  readonly nowSec: number;
  readonly maxLifetimeSec: number;
}

/** Clock skew tolerated between the signer (mint-token) and the verifying listener. */
export const TOKEN_LEEWAY_SEC = 30;
/** RFC 7518 section 3.2: an HS256 key must be at least as long as the hash output. */
export const MIN_SIGNING_KEY_BYTES = 32;
const HEADER_SEGMENT = base64urlJson({ alg: 'HS256', typ: 'JWT' });
/**
 * The identity claims (sub, workflow, run_id) become log fields and metric labels: a closed,
 * boring alphabet. The same rule for identity headers in network-policy mode and for mint-token.
 */
export const IDENTITY_VALUE = /^[A-Za-z0-9._:@/-]{1,128}$/;
const STRING_CLAIMS = ['sub', 'workflow', 'run_id'] as const;
/** Git scope entries: visible ASCII, bounded; their syntax is checked by the git proxy (src/git/scope.ts). */
const GIT_SCOPE_ENTRY = /^[\x21-\x7e]{1,300}$/;
const MAX_GIT_SCOPE_ENTRIES = 64;

/** The algorithms a key may fix: HS256 (a shared secret), EdDSA (Ed25519) and ES256 (P-256, r||s signatures). */
export type TokenAlgorithm = 'HS256' | 'EdDSA' | 'ES256';
const TOKEN_ALGORITHMS: ReadonlySet<string> = new Set<TokenAlgorithm>(['HS256', 'EdDSA', 'ES256']);

/**
 * A key the listeners verify with. Its algorithm comes with the key (from its file's type), so a
 * token cannot choose one: no `none`, and no HS256 "signed" with a public key as its secret.
 */
export interface VerificationKey {
  /** The key id tokens name in their header; undefined for the key of MODEL_PROXY_SIGNING_KEY / GIT_PROXY_SIGNING_KEY. */
  readonly kid: string | undefined;
  readonly alg: TokenAlgorithm;
  /** HS256: the secret's bytes; EdDSA and ES256: a public key. */
  readonly key: Buffer | KeyObject;
}

/** The key mint-token signs with: an HS256 secret, or an Ed25519 / P-256 private key. */
export interface SigningKey {
  readonly kid: string | undefined;
  readonly alg: TokenAlgorithm;
  readonly key: Buffer | KeyObject;
}

/**
 * The keys a listener verifies with, chosen by the token header's `kid`. A ring holding only the
 * key without kid (the environment's, as before key files) does not read `kid` at all. Once any
 * key has a kid, a token naming a kid gets that key and no other, and a token naming none gets
 * the key without kid, if there is one.
 */
export interface KeyRing {
  readonly byKid: ReadonlyMap<string, VerificationKey>;
  readonly unnamed: VerificationKey | undefined;
}

/** Pure: the ring of `keys`; two keys with one kid, two without, or a key unfit for its algorithm is an error. */
export function keyRing(keys: readonly VerificationKey[]): KeyRing {
  const byKid = new Map<string, VerificationKey>();
  let unnamed: VerificationKey | undefined;
  for (const k of keys) {
    requireFitKey(k, 'public');
    if (k.kid === undefined) {
      if (unnamed) throw new Error('two keys without a key id: only one environment key per listener');
      unnamed = k;
    } else {
      if (byKid.has(k.kid)) throw new Error(`two keys with the key id "${k.kid}": each key needs a name of its own`);
      byKid.set(k.kid, k);
    }
  }
  return { byKid, unnamed };
}

/** Pure: whether `key` is still in `ring` (a key removed, or replaced under its kid, is not). */
export function ringHolds(ring: KeyRing, key: VerificationKey): boolean {
  return (key.kid === undefined ? ring.unnamed : ring.byKid.get(key.kid)) === key;
}

/** An HS256 key from an environment variable: unset or empty is undefined; a short key stops start-up naming the variable. */
export function parseSigningKey(variable: string, value: string | undefined): Buffer | undefined {
  if (!value) return undefined;
  return hs256Secret(variable, Buffer.from(value, 'utf8'), 'openssl rand -hex 32');
}

/**
 * Pure: `key` as an HS256 secret, or the error naming `what` that says why it is none: a key's
 * text (publicKeyAsSecretProblem), or shorter than MIN_SIGNING_KEY_BYTES (`example` makes one).
 * The one check of every HS256 secret, from a variable or a key file.
 */
export function hs256Secret(what: string, key: Buffer, example: string): Buffer {
  const notSecret = publicKeyAsSecretProblem(what, key);
  if (notSecret !== undefined) throw new Error(notSecret);
  if (key.length < MIN_SIGNING_KEY_BYTES) throw new Error(`${what}: an HS256 secret must be at least ${MIN_SIGNING_KEY_BYTES} bytes (e.g. ${example})`);
  return key;
}

/**
 * Pure: why bytes meant as an HS256 secret are a key's text instead (PEM, a JWK, an SSH public
 * key), or undefined. Such text is usually public (a KID.pem beside the secrets, a JWKS, an
 * authorized_keys line), and an HMAC keyed with public bytes lets whoever reads them mint any
 * token: key confusion moved into configuration. A secret made as the docs say (openssl rand -hex
 * 32, or base64) never looks like one of these.
 */
function publicKeyAsSecretProblem(what: string, bytes: Buffer): string | undefined {
  const text = bytes.toString('latin1').trim();
  const kind = text.includes('-----BEGIN') ? 'PEM text (a key or certificate)' : text.startsWith('{') && text.includes('"kty"') ? 'a JWK (JSON with "kty")' : /^(?:ssh-|ecdsa-)/.test(text) ? 'an SSH public key' : undefined;
  if (kind === undefined) return undefined;
  return `${what}: holds ${kind}, not an HS256 secret; used as one, whoever has that key could mint tokens. A public key goes in a file named KID.pem (--bot-keys, --git-keys); an HS256 secret is random bytes (openssl rand -hex 32)`;
}

/**
 * A token's own id (the `jti` that `revoke --token-id` names), from random bytes: lowercase hex,
 * so it never begins with '-' and is never read as a flag on the revoke command line (base64url
 * would, one id in 64).
 */
export function tokenIdFrom(random: Buffer): string {
  return random.toString('hex');
}

/** A signed token; a bare Buffer is an HS256 secret without kid (the environment's key). */
export function signBotToken(claims: BotClaims, signer: Buffer | SigningKey): string {
  const key: SigningKey = Buffer.isBuffer(signer) ? { kid: undefined, alg: 'HS256', key: signer } : signer;
  requireFitKey(key, 'private');
  // Copy the known claims only, so nothing else the caller's object carries gets signed.
  const { sub, workflow, run_id, iat, exp, git, limits, jti } = claims;
  const payload: Record<string, unknown> = git === undefined ? { sub, workflow, run_id, iat, exp } : { sub, workflow, run_id, iat, exp, git: [...git] };
  if (limits !== undefined) payload.limits = { ...limits };
  if (jti !== undefined) payload.jti = jti;
  // Without a kid, an HS256 token's header is the one it always was, byte for byte.
  const header = key.kid === undefined && key.alg === 'HS256' ? HEADER_SEGMENT : base64urlJson(key.kid === undefined ? { alg: key.alg, typ: 'JWT' } : { alg: key.alg, typ: 'JWT', kid: key.kid });
  const signingInput = `${header}.${base64urlJson(payload)}`;
  return `${signingInput}.${signatureOf(key, signingInput).toString('base64url')}`;
}

/** Pure: the signature of `signingInput` (JOSE form: ES256 as r||s, 64 bytes, not DER, and low-s: see compact-token.ts). */
function signatureOf(key: SigningKey, signingInput: string): Buffer {
  const data = Buffer.from(signingInput, 'utf8');
  if (key.alg === 'HS256') return hmacSha256(signingInput, key.key as Buffer);
  if (key.alg === 'EdDSA') return cryptoSign(null, data, key.key as KeyObject);
  return lowS(cryptoSign('sha256', data, { key: key.key as KeyObject, dsaEncoding: 'ieee-p1363' }));
}

/** Pure: whether `signature` is `key`'s over `signingInput`; constant-time for HS256. */
function signatureHolds(key: VerificationKey, signingInput: string, signature: Buffer): boolean {
  if (key.alg === 'HS256') {
    const expected = hmacSha256(signingInput, key.key as Buffer);
    // timingSafeEqual throws on a length mismatch, and the length of an HMAC is no secret.
    return signature.length === expected.length && timingSafeEqual(signature, expected);
  }
  // Both signatures are 64 bytes (Ed25519; P-256's r||s); any other length is no signature.
  if (signature.length !== 64) return false;
  const data = Buffer.from(signingInput, 'utf8');
  try {
    return key.alg === 'EdDSA' ? cryptoVerify(null, data, key.key as KeyObject, signature) : cryptoVerify('sha256', data, { key: key.key as KeyObject, dsaEncoding: 'ieee-p1363' }, signature);
  } catch {
    return false;
  }
}

/** Pure: a verified token as the gateway takes it (a bot token): one with a git scope is refused. */
export function asBotToken(token: string, verified: SignedResult): VerifyResult {
  if (verified.ok && verified.claims.git !== undefined) return reject('meant for the git proxy');
  // Signed with another key (the git proxy's, as recommended): the reason says which kind of
  // token it is. Read from the unverified payload only to word the refusal, never to accept;
  // whoever holds the token can read its payload anyway.
  if (!verified.ok && verified.reason === 'bad signature' && unverifiedGitScope(token) === true) return reject('meant for the git proxy');
  return verified.ok ? { ok: true, claims: verified.claims } : verified;
}

/** Pure: whether a token's payload, unverified, carries a git scope (undefined: unreadable). */
function unverifiedGitScope(token: string): boolean | undefined {
  const bytes = decodeSegment(token.split('.')[1] ?? '');
  const payload = bytes === null ? null : parseClaimsObject(bytes);
  return payload === null || payload === 'duplicate' ? undefined : payload.git !== undefined;
}

/** Pure: a verified token as the git proxy takes it (a workload token): one without a git scope (a gateway bot token) is refused. */
export function asGitToken(token: string, verified: SignedResult): GitVerifyResult {
  if (!verified.ok) return verified.reason === 'bad signature' && unverifiedGitScope(token) === false ? reject('no git scope') : verified;
  const { git } = verified.claims;
  if (git === undefined) return reject('no git scope');
  return { ok: true, claims: { ...verified.claims, git } };
}

/**
 * Pure: the time claims every token must carry: `exp` and `iat` whole numbers, `nbf` one when
 * present; not expired, not issued or valid only in the future (each with TOKEN_LEEWAY_SEC of
 * skew), `exp` after `iat`, and the lifetime within the listener's longest. A fixed phrase, or
 * undefined when they hold.
 */
export function timeClaimsProblem(payload: Record<string, unknown>, nowSec: number, maxLifetimeSec: number): string | undefined {
  const { exp, iat, nbf } = payload;
  if (exp === undefined) return 'missing claim exp';
  if (!isInteger(exp)) return 'invalid claim exp';
  if (iat === undefined) return 'missing claim iat';
  if (!isInteger(iat)) return 'invalid claim iat';
  if (nbf !== undefined && !isInteger(nbf)) return 'invalid claim nbf';
  if (exp <= nowSec - TOKEN_LEEWAY_SEC) return 'expired';
  if (iat > nowSec + TOKEN_LEEWAY_SEC) return 'issued in the future';
  if (nbf !== undefined && (nbf as number) > nowSec + TOKEN_LEEWAY_SEC) return 'not yet valid';
  if (exp <= iat) return 'exp not after iat';
  if (exp - iat > maxLifetimeSec) return 'lifetime too long';
  return undefined;
}

/** Everything both kinds of token must satisfy; the git claim is checked for shape only. */
export function verifySignedToken(token: string, ring: KeyRing, opts: VerifyOptions): SignedResult {
  const read = readCompactToken(token);
  if (!read.ok) return reject(read.reason);
  const { header, signingInput, payloadBytes, signature } = read;
  // One we do not implement (e.g. 'none') is refused, and so is one that is not the chosen key's
  // own (key confusion: HS256 keyed with a public key, say).
  if (typeof header.alg !== 'string' || !TOKEN_ALGORITHMS.has(header.alg)) return reject('unsupported algorithm');
  const key = keyFor(header, ring);
  if (typeof key === 'string') return reject(key);
  if (header.alg !== key.alg) return reject('algorithm not allowed for this key');

  if (!signatureHolds(key, signingInput, signature)) return reject('bad signature');

  const payload = parseClaimsObject(payloadBytes);
  if (payload === 'duplicate') return reject('duplicate key in payload');
  if (payload === null) return reject('malformed payload');
  const timing = timeClaimsProblem(payload, opts.nowSec, opts.maxLifetimeSec);
  if (timing) return reject(timing);
  const { exp, iat } = payload as { exp: number; iat: number };

  for (const name of STRING_CLAIMS) {
    const value = payload[name];
    if (value === undefined) return reject(`missing claim ${name}`);
    if (typeof value !== 'string' || !IDENTITY_VALUE.test(value)) return reject(`invalid claim ${name}`);
  }
  // The loop above has checked that these are strings.
  const { sub, workflow, run_id } = payload as Record<(typeof STRING_CLAIMS)[number], string>;
  const limits = parseRunLimits(payload.limits);
  if (limits === 'invalid') return reject('invalid claim limits');
  const { jti } = payload;
  if (jti !== undefined && (typeof jti !== 'string' || !IDENTITY_VALUE.test(jti))) return reject('invalid claim jti');
  const base: BotClaims = { sub, workflow, run_id, iat, exp, ...(limits === undefined ? {} : { limits }), ...(jti === undefined ? {} : { jti: jti as string }) };
  const { git } = payload;
  if (git === undefined) return { ok: true, claims: base, key };
  if (!Array.isArray(git) || git.length === 0 || git.length > MAX_GIT_SCOPE_ENTRIES) return reject('invalid claim git');
  if (!git.every((entry: unknown) => typeof entry === 'string' && GIT_SCOPE_ENTRY.test(entry))) return reject('invalid claim git');
  return { ok: true, claims: { ...base, git: git as string[] }, key };
}

/** Pure: the key the header names, or why there is none (a fixed phrase). */
function keyFor(header: Record<string, unknown>, ring: KeyRing): VerificationKey | string {
  // The environment's one key alone: the header's kid is not read, as before key files.
  if (ring.byKid.size === 0) return ring.unnamed ?? 'no verification key';
  if (!Object.hasOwn(header, 'kid')) return ring.unnamed ?? 'token has no key id';
  if (typeof header.kid !== 'string') return 'invalid key id';
  return ring.byKid.get(header.kid) ?? 'unknown key id';
}

/** Pure: the `limits` claim: an object of `budget_usd` (> 0), `max_concurrent`, `requests_per_minute` and `tokens_per_minute` (whole numbers ≥ 1), nothing else. */
function parseRunLimits(value: unknown): RunLimits | undefined | 'invalid' {
  if (value === undefined) return undefined;
  if (!isObject(value)) return 'invalid';
  const out: { -readonly [K in keyof RunLimits]: RunLimits[K] } = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === 'budget_usd' && typeof v === 'number' && Number.isFinite(v) && v > 0) out.budget_usd = v;
    else if ((k === 'max_concurrent' || k === 'requests_per_minute' || k === 'tokens_per_minute') && Number.isSafeInteger(v) && (v as number) >= 1) out[k] = v as number;
    else return 'invalid';
  }
  return out;
}

function requireStrongKey(key: Buffer): void {
  if (key.length < MIN_SIGNING_KEY_BYTES) throw new RangeError(`HS256 key must be at least ${MIN_SIGNING_KEY_BYTES} bytes`);
}

/**
 * A key fit for its algorithm, or a RangeError: an HS256 secret of 32 bytes or more; an Ed25519
 * or P-256 key object of the kind the use needs (a verifying listener holds public keys only).
 */
function requireFitKey(k: VerificationKey | SigningKey, use: 'public' | 'private'): void {
  if (k.alg === 'HS256') {
    if (!Buffer.isBuffer(k.key)) throw new RangeError('an HS256 key is a secret of bytes');
    requireStrongKey(k.key);
    return;
  }
  const key = k.key as KeyObject;
  const type = Buffer.isBuffer(key) ? undefined : key.asymmetricKeyType;
  const fits = k.alg === 'EdDSA' ? type === 'ed25519' : type === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1';
  if (!fits) throw new RangeError(`an ${k.alg} key must be ${k.alg === 'EdDSA' ? 'an Ed25519' : 'a P-256 (prime256v1)'} key`);
  if (key.type !== use) throw new RangeError(`an ${k.alg} key for ${use === 'public' ? 'verification must be a public' : 'signing must be a private'} key`);
}

function reject(reason: string): { ok: false; reason: string } {
  return { ok: false, reason };
}

function hmacSha256(signingInput: string, key: Buffer): Buffer {
  return createHmac('sha256', key).update(signingInput).digest();
}

function base64urlJson(value: object): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

function isInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value);
}
