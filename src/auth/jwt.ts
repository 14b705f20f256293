/**
 * HS256 JSON Web Tokens (RFC 7519) that workloads present: to the model gateway (bot tokens) and,
 * with a git scope, to the git proxy (workload tokens).
 *
 * Verification fails closed: anything not exactly as issued by signBotToken is rejected. Failure
 * reasons are fixed phrases and never echo token content, because they end up in logs.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { isObject } from '../json/keys.ts';
import { parseStrictJson } from '../json/strict.ts';

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
export type GitVerifyResult = { ok: true; claims: BotClaims & { git: readonly string[] } } | { ok: false; reason: string };

export interface VerifyOptions {
  readonly nowSec: number;
  readonly maxLifetimeSec: number;
}

/** Clock skew tolerated between the signer (mint-token) and the verifying listener. */
const TOKEN_LEEWAY_SEC = 30;
/** Checked before any decoding, so hostile input costs little. Real tokens are a few hundred chars. */
const MAX_TOKEN_LENGTH = 4096;
/** RFC 7518 section 3.2: an HS256 key must be at least as long as the hash output. */
export const MIN_SIGNING_KEY_BYTES = 32;
const HEADER_SEGMENT = base64urlJson({ alg: 'HS256', typ: 'JWT' });
/** Unpadded base64url only: no '=', '+' or '/'. */
const BASE64URL_SEGMENT = /^[A-Za-z0-9_-]+$/;
/**
 * The identity claims (sub, workflow, run_id) become log fields and metric labels: a closed,
 * boring alphabet. The same rule for identity headers in network-policy mode and for mint-token.
 */
export const IDENTITY_VALUE = /^[A-Za-z0-9._:@/-]{1,128}$/;
const STRING_CLAIMS = ['sub', 'workflow', 'run_id'] as const;
/** Git scope entries: visible ASCII, bounded; their syntax is checked by the git proxy (src/git/scope.ts). */
const GIT_SCOPE_ENTRY = /^[\x21-\x7e]{1,300}$/;
const MAX_GIT_SCOPE_ENTRIES = 64;

/** An HS256 key from an environment variable: unset or empty is undefined; a short key stops start-up naming the variable. */
export function parseSigningKey(variable: string, value: string | undefined): Buffer | undefined {
  if (!value) return undefined;
  const key = Buffer.from(value, 'utf8');
  if (key.length < MIN_SIGNING_KEY_BYTES) throw new Error(`${variable}: must be at least ${MIN_SIGNING_KEY_BYTES} bytes (e.g. openssl rand -hex 32)`);
  return key;
}

/**
 * A token's own id (the `jti` that `revoke --token-id` names), from random bytes: lowercase hex,
 * so it never begins with '-' and is never read as a flag on the revoke command line (base64url
 * would, one id in 64).
 */
export function tokenIdFrom(random: Buffer): string {
  return random.toString('hex');
}

export function signBotToken(claims: BotClaims, key: Buffer): string {
  requireStrongKey(key);
  // Copy the known claims only, so nothing else the caller's object carries gets signed.
  const { sub, workflow, run_id, iat, exp, git, limits, jti } = claims;
  const payload: Record<string, unknown> = git === undefined ? { sub, workflow, run_id, iat, exp } : { sub, workflow, run_id, iat, exp, git: [...git] };
  if (limits !== undefined) payload.limits = { ...limits };
  if (jti !== undefined) payload.jti = jti;
  const signingInput = `${HEADER_SEGMENT}.${base64urlJson(payload)}`;
  return `${signingInput}.${hmacSha256(signingInput, key).toString('base64url')}`;
}

/** A bot token for the model gateway: a token that carries a git scope is refused. */
export function verifyBotToken(token: string, key: Buffer, opts: VerifyOptions): VerifyResult {
  const verified = verifyToken(token, key, opts);
  if (verified.ok && verified.claims.git !== undefined) return reject('meant for the git proxy');
  // Signed with another key (the git proxy's, as recommended): the reason says which kind of
  // token it is. Read from the unverified payload only to word the refusal, never to accept;
  // whoever holds the token can read its payload anyway.
  if (!verified.ok && verified.reason === 'bad signature' && unverifiedGitScope(token) === true) return reject('meant for the git proxy');
  return verified;
}

/** Pure: whether a token's payload, unverified, carries a git scope (undefined: unreadable). */
function unverifiedGitScope(token: string): boolean | undefined {
  const bytes = decodeSegment(token.split('.')[1] ?? '');
  const payload = bytes === null ? null : parseClaimsObject(bytes);
  return payload === null || payload === 'duplicate' ? undefined : payload.git !== undefined;
}

/** A workload token for the git proxy: a token without a git scope (a gateway bot token) is refused. */
export function verifyGitToken(token: string, key: Buffer, opts: VerifyOptions): GitVerifyResult {
  const verified = verifyToken(token, key, opts);
  if (!verified.ok) return verified.reason === 'bad signature' && unverifiedGitScope(token) === false ? reject('no git scope') : verified;
  const { git } = verified.claims;
  if (git === undefined) return reject('no git scope');
  return { ok: true, claims: { ...verified.claims, git } };
}

/** Everything both kinds of token must satisfy; the git claim is checked for shape only. */
function verifyToken(token: string, key: Buffer, opts: VerifyOptions): VerifyResult {
  requireStrongKey(key);
  if (token.length > MAX_TOKEN_LENGTH) return reject('token too long');
  const segments = token.split('.');
  if (segments.length !== 3) return reject('malformed token');
  const [headerSegment, payloadSegment, signatureSegment] = segments;
  const headerBytes = decodeSegment(headerSegment);
  const payloadBytes = decodeSegment(payloadSegment);
  const signature = decodeSegment(signatureSegment);
  if (headerBytes === null || payloadBytes === null || signature === null) return reject('malformed token');

  // The header is read before the signature is checked so that the algorithm is ours, never the
  // token's choice: anything but HS256 (e.g. 'none') is refused.
  const header = parseClaimsObject(headerBytes);
  if (header === 'duplicate') return reject('duplicate key in header');
  if (header === null) return reject('malformed header');
  if (header.alg !== 'HS256') return reject('unsupported algorithm');
  if (Object.hasOwn(header, 'typ') && header.typ !== 'JWT') return reject('unsupported token type');
  // We understand no extensions, and RFC 7515 section 4.1.11 requires rejecting tokens that need one.
  if (Object.hasOwn(header, 'crit')) return reject('unsupported critical header');

  const expectedSignature = hmacSha256(`${headerSegment}.${payloadSegment}`, key);
  // timingSafeEqual throws on a length mismatch, and the length of an HMAC is no secret.
  if (signature.length !== expectedSignature.length || !timingSafeEqual(signature, expectedSignature)) {
    return reject('bad signature');
  }

  const payload = parseClaimsObject(payloadBytes);
  if (payload === 'duplicate') return reject('duplicate key in payload');
  if (payload === null) return reject('malformed payload');
  const { exp, iat, nbf } = payload;
  if (exp === undefined) return reject('missing claim exp');
  if (!isInteger(exp)) return reject('invalid claim exp');
  if (iat === undefined) return reject('missing claim iat');
  if (!isInteger(iat)) return reject('invalid claim iat');
  if (exp <= opts.nowSec - TOKEN_LEEWAY_SEC) return reject('expired');
  if (iat > opts.nowSec + TOKEN_LEEWAY_SEC) return reject('issued in the future');
  if (exp <= iat) return reject('exp not after iat');
  if (exp - iat > opts.maxLifetimeSec) return reject('lifetime too long');
  if (nbf !== undefined) {
    if (!isInteger(nbf)) return reject('invalid claim nbf');
    if (nbf > opts.nowSec + TOKEN_LEEWAY_SEC) return reject('not yet valid');
  }

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
  if (git === undefined) return { ok: true, claims: base };
  if (!Array.isArray(git) || git.length === 0 || git.length > MAX_GIT_SCOPE_ENTRIES) return reject('invalid claim git');
  if (!git.every((entry: unknown) => typeof entry === 'string' && GIT_SCOPE_ENTRY.test(entry))) return reject('invalid claim git');
  return { ok: true, claims: { ...base, git: git as string[] } };
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

function reject(reason: string): { ok: false; reason: string } {
  return { ok: false, reason };
}

function hmacSha256(signingInput: string, key: Buffer): Buffer {
  return createHmac('sha256', key).update(signingInput).digest();
}

function base64urlJson(value: object): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

/**
 * Decodes one unpadded base64url segment. Node's decoder silently skips invalid characters and
 * ignores unused trailing bits, so the segment must also be exactly the canonical encoding of its
 * bytes; otherwise several spellings of one signature would all verify.
 */
function decodeSegment(segment: string): Buffer | null {
  if (!BASE64URL_SEGMENT.test(segment)) return null;
  const bytes = Buffer.from(segment, 'base64url');
  return bytes.toString('base64url') === segment ? bytes : null;
}

/**
 * An object, or 'duplicate' when a key repeats (exactly or but for case): another JWT library
 * reading the first of two `exp` (or `alg`, or `EXP`) claims must never see a different token
 * than the one verified here.
 */
function parseClaimsObject(bytes: Buffer): Record<string, unknown> | 'duplicate' | null {
  const parsed = parseStrictJson(bytes);
  if (!parsed.ok) return parsed.reason === 'duplicate_key' || parsed.reason === 'case_variant_key' ? 'duplicate' : null;
  return isObject(parsed.value) ? parsed.value : null;
}

function isInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value);
}
