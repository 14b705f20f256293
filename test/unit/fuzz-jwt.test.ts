// Fuzzes bot token verification. Without the signing key no change to a token makes it verify:
// flipped, inserted, deleted or case-flipped characters, truncations, extra segments,
// whitespace, unicode, non-canonical base64url, and rebuilt headers and payloads signed with the
// old signature or a wrong key. With the key, a token whose header or claims break a rule
// (alg none/None/HS384/RS256/'', a bad typ, crit, exp in the past or too far ahead, iat in the
// future, non-integer times, missing or malformed claims, a duplicate key whose last value is
// bad) is still refused. Deterministic: the seed is in the test names.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { test } from 'node:test';
import { signBotToken, type BotClaims, type VerifyResult } from '../../src/auth/jwt.ts';
import { verifyBotToken } from '../support/tokens.ts';
import { fuzzSeed, mulberry32, type Rng } from '../support/prng.ts';

const SEED = fuzzSeed(0x6a77_7431);
const ITERATIONS = 5000;

const KEY = Buffer.from('0123456789abcdef0123456789abcdef-fuzz-signing-key');
// Not included: the key followed by zero bytes, which HMAC pads to the same block (RFC 2104).
const WRONG_KEYS = [
  Buffer.from('fedcba9876543210fedcba9876543210-fuzz-signing-key'),
  Buffer.concat([KEY.subarray(0, KEY.length - 1), Buffer.from('Y')]),
  KEY.subarray(0, 32),
  Buffer.concat([KEY, Buffer.from('x')]),
  Buffer.from(KEY.toString().toUpperCase()),
];
const NOW = 1_700_000_000;
const OPTS = { nowSec: NOW, maxLifetimeSec: 3600 };
const CLAIMS: BotClaims = { sub: 'bot:fuzz', workflow: 'acme/widgets/.github/workflows/ci.yml', run_id: '987654321', iat: NOW - 60, exp: NOW + 600 };
const ORIGINAL = signBotToken(CLAIMS, KEY);
const [ORIGINAL_HEADER, ORIGINAL_PAYLOAD, ORIGINAL_SIGNATURE] = ORIGINAL.split('.') as [string, string, string];

const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const STRAY = ['.', '=', '+', '/', ' ', '\t', '\n', '\r', '\0', '"', 'é', '\u200b', '\uff21', '\u2024', '🌍', '%2e'];

const verify = (token: string): VerifyResult => verifyBotToken(token, KEY, OPTS);

/** Reasons are fixed phrases that end up in logs: they never echo token content. */
function badReason(result: VerifyResult): string | undefined {
  if (result.ok) return 'accepted';
  return /^[a-z_ ]{4,40}$/.test(result.reason) ? undefined : `reason ${JSON.stringify(result.reason)} is not a fixed phrase`;
}

function hmac(signingInput: string, key: Buffer): string {
  return createHmac('sha256', key).update(signingInput).digest('base64url');
}

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64url');

const STRING_MUTATIONS: readonly ((t: string, rng: Rng) => string)[] = [
  // replace a character by another base64url character, anywhere or in the signature
  (t, rng) => { const i = rng.int(t.length); return t.slice(0, i) + B64URL[(B64URL.indexOf(t[i]!) + 1 + rng.int(63)) % 64] + t.slice(i + 1); },
  (t, rng) => { const s = t.lastIndexOf('.') + 1; const i = s + rng.int(Math.max(1, t.length - s)); return t.slice(0, i) + B64URL[(B64URL.indexOf(t[i] ?? 'A') + 1 + rng.int(63)) % 64] + t.slice(i + 1); },
  // the last signature character with only its unused low bits changed: same bytes, other spelling
  (t) => { const c = B64URL.indexOf(t[t.length - 1]!); return t.slice(0, -1) + B64URL[c ^ 1]; },
  (t, rng) => { const i = rng.int(t.length + 1); return t.slice(0, i) + (rng.chance(0.5) ? B64URL[rng.int(64)] : rng.pick(STRAY)) + t.slice(i); },
  (t, rng) => { const i = rng.int(t.length); return t.slice(0, i) + t.slice(i + 1); },
  (t, rng) => t.slice(0, rng.int(t.length)),
  (t, rng) => `${t}.${b64(rng.pick(['', 'x', '{}', '{"alg":"none"}']))}`,
  (t, rng) => rng.pick([`${t}.`, `.${t}`, `${t}=`, `${t}==`, ` ${t}`, `${t} `, `${t}\n`, `\t${t}`, `Bearer ${t}`]),
  (t, rng) => { const i = rng.int(t.length); const c = t[i]!; return t.slice(0, i) + (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()) + t.slice(i + 1); },
  (t, rng) => { const s = t.split('.'); const i = rng.int(s.length); const j = rng.int(s.length); [s[i], s[j]] = [s[j]!, s[i]!]; return s.join('.'); },
  (t, rng) => { const s = t.split('.'); s[rng.int(s.length)] += rng.pick(['=', '==', 'A', 'AA']); return s.join('.'); },
  (t) => t.replaceAll('-', '+').replaceAll('_', '/'),
  (t, rng) => { const s = t.split('.'); s[s.length - 1] = rng.pick(['', 'A', hmac('other', KEY), hmac(`${s[0]}.${s[1]}`, WRONG_KEYS[0]!), Buffer.alloc(32).toString('base64url')]); return s.join('.'); },
  (t, rng) => { const s = t.split('.'); s[rng.int(s.length)] = ''; return s.join('.'); },
  (t, rng) => { const s = t.split('.'); return [...s.slice(0, 2), rng.pick(s), ...s.slice(2)].join('.'); },
];

test(`fuzz: ${ITERATIONS} mutated copies of a valid token never verify; the untouched one does (seed ${SEED})`, (t) => {
  assert.deepEqual(verify(ORIGINAL), { ok: true, claims: CLAIMS });
  const rng = mulberry32(SEED);
  const failures: string[] = [];
  let unchanged = 0;
  for (let i = 0; i < ITERATIONS; i++) {
    let token = ORIGINAL;
    for (let n = rng.between(1, 3); n > 0; n--) token = token === '' ? B64URL[rng.int(64)]! : rng.pick(STRING_MUTATIONS)(token, rng);
    if (token === ORIGINAL) {
      unchanged++;
      continue;
    }
    const why = badReason(verify(token));
    if (why !== undefined && failures.length < 20) failures.push(`#${i} ${JSON.stringify(token)}: ${why}`);
  }
  t.diagnostic(`seed ${SEED}: ${ITERATIONS - unchanged} mutated tokens refused, ${unchanged} mutations gave the original back`);
  assert.deepEqual(failures, [], `seed ${SEED}: reproduce with FUZZ_SEED=${SEED}`);
  assert.ok(unchanged < ITERATIONS / 10);
});

// --- Rebuilt tokens: a header and a payload as JSON text (so keys can repeat), then a signature.

type Entries = [string, unknown][];

interface Piece {
  entries: Entries;
  /** The JSON text, when a mutation replaced it wholesale (not an object, not JSON). */
  raw?: string;
  /** A rule is broken: the token must be refused even when signed with the right key. */
  invalid: boolean;
}

const json = (p: Piece, rng: Rng): string => {
  if (p.raw !== undefined) return p.raw;
  const sp = rng.chance(0.2) ? ' ' : '';
  return `{${p.entries.map(([k, v]) => `${JSON.stringify(k)}:${sp}${JSON.stringify(v)}`).join(`,${sp}`)}}`;
};

/** Sets the last occurrence of key, the one JSON.parse keeps. */
function set(entries: Entries, key: string, value: unknown): void {
  let i = entries.length - 1;
  while (i >= 0 && entries[i]![0] !== key) i--;
  if (i < 0) entries.push([key, value]);
  else entries[i] = [key, value];
}

/** Removes every occurrence of key. */
function remove(entries: Entries, key: string): void {
  for (let i = entries.length - 1; i >= 0; i--) if (entries[i]![0] === key) entries.splice(i, 1);
}

const BAD_ALGS: unknown[] = ['none', 'None', 'NONE', 'nOnE', 'HS384', 'HS512', 'RS256', 'ES256', 'PS256', 'hs256', 'HS256 ', ' HS256', 'HS256\u0000', '', null, 0, true, ['HS256'], {}];
const BAD_TYPS: unknown[] = ['jwt', 'JWS', 'at+jwt', 'JWT ', '', null, 1, ['JWT']];
const NOT_OBJECTS = ['[]', 'null', '"HS256"', '123', 'true', '', '{', '{"alg":"HS256"', '{"alg":"HS256",}', "{'alg':'HS256'}", '\ufeff{"alg":"HS256"}'];

function header(rng: Rng): Piece {
  const entries: Entries = rng.chance(0.7) ? [['alg', 'HS256'], ['typ', 'JWT']] : rng.chance(0.5) ? [['typ', 'JWT'], ['alg', 'HS256']] : [['alg', 'HS256']];
  const p: Piece = { entries, invalid: false };
  if (rng.chance(0.2)) entries.push([rng.pick(['kid', 'cty', 'x5u', 'jku']), rng.pick(['k1', 'https://evil.example/jwks', 'é'])]); // ignored fields
  if (rng.chance(0.1)) {
    entries.unshift(['alg', rng.pick(BAD_ALGS)]); // a duplicate key: refused, whichever value a parser would keep
    p.invalid = true;
  }
  const r = rng.next();
  if (r < 0.12) {
    set(entries, 'alg', rng.pick(BAD_ALGS));
    p.invalid = true;
  } else if (r < 0.15) {
    remove(entries, 'alg');
    p.invalid = true;
  } else if (r < 0.19) {
    set(entries, 'typ', rng.pick(BAD_TYPS));
    p.invalid = true;
  } else if (r < 0.22) {
    entries.push(['crit', rng.pick([['exp'], [], ['b64']])]);
    p.invalid = true;
  } else if (r < 0.25) {
    entries.push(['alg', rng.pick(BAD_ALGS)]); // duplicate: refused
    p.invalid = true;
  } else if (r < 0.27) {
    p.raw = rng.pick(NOT_OBJECTS);
    p.invalid = true;
  }
  return p;
}

const NON_INTEGERS: unknown[] = [0.5, '1700000600', null, true, [], {}, 1e21, 2 ** 53, -(2 ** 53), '', 'NaN'];
const BAD_STRINGS: unknown[] = ['', 'a'.repeat(129), 'bøt', 'a b', 'a\nb', 'a\u0000b', '<script>', '"', 123, null, ['x'], { s: 'x' }, true];
const STRING_CLAIMS = ['sub', 'workflow', 'run_id'] as const;

function payload(rng: Rng): Piece {
  const entries: Entries = Object.entries(CLAIMS);
  if (rng.chance(0.3)) entries.reverse();
  const p: Piece = { entries, invalid: false };
  // Neutral changes: still valid when signed with the right key.
  if (rng.chance(0.3)) entries.push([rng.pick(['admin', 'role', 'aud', 'iss', 'ünï', '__proto__']), rng.pick([true, 'admin', { exp: NOW + 999_999 }, 1])]);
  if (rng.chance(0.1)) set(entries, 'jti', `tok-${rng.int(1_000_000)}`); // a token id (revocation): kept
  if (rng.chance(0.2)) {
    const iat = NOW - 30 + rng.int(60); // within the clock skew either way
    set(entries, 'iat', iat);
    set(entries, 'exp', iat + 1 + rng.int(3599));
  }
  if (rng.chance(0.1)) set(entries, 'nbf', NOW + 30 - rng.int(10_000));
  if (rng.chance(0.1)) {
    entries.unshift(['exp', rng.pick(NON_INTEGERS)]); // a duplicate key: refused, whichever value a parser would keep
    p.invalid = true;
  }

  const invalidations = rng.chance(0.3) ? 0 : rng.chance(0.7) ? 1 : 2;
  for (let n = 0; n < invalidations; n++) {
    p.invalid = true;
    switch (rng.int(15)) {
      case 0: set(entries, 'exp', NOW - 30 - rng.int(1_000_000)); break; // expired, even with the skew
      case 1: set(entries, 'iat', NOW - 60); set(entries, 'exp', NOW + 3541 + rng.int(1_000_000_000)); break; // lifetime over an hour
      case 2: { const iat = NOW + 31 + rng.int(1_000_000); set(entries, 'iat', iat); set(entries, 'exp', iat + 60); break; } // issued in the future
      case 3: set(entries, 'exp', Number([...entries].reverse().find(([k]) => k === 'iat')?.[1] ?? NOW) - rng.int(100)); break; // exp not after iat
      case 4: set(entries, rng.pick(['exp', 'iat']), rng.pick(NON_INTEGERS)); break;
      case 5: set(entries, 'exp', rng.pick([NOW + 600.5, NOW + 0.1])); break;
      case 6: remove(entries, rng.pick(['exp', 'iat', ...STRING_CLAIMS])); break;
      case 7: set(entries, rng.pick(STRING_CLAIMS), rng.pick(BAD_STRINGS)); break;
      case 8: set(entries, 'nbf', NOW + 31 + rng.int(100_000)); break; // not yet valid
      case 13: set(entries, 'nbf', rng.pick(NON_INTEGERS)); break;
      case 9: entries.push([rng.pick(['exp', 'iat']), rng.pick([NOW - 100_000, 'x', null])]); break; // duplicate: refused
      case 10: remove(entries, 'exp'); entries.push(['__proto__', { exp: NOW + 600 }]); break; // exp only on a "__proto__" key
      case 11: p.raw = rng.pick(NOT_OBJECTS); break;
      case 12: set(entries, 'exp', rng.pick([`${NOW + 600}`, `${NOW + 600}.0`, -1, 0])); break;
      case 14: set(entries, 'jti', rng.pick(BAD_STRINGS)); break; // a token id must be an identity value
    }
  }
  return p;
}

test(`fuzz: ${ITERATIONS} rebuilt tokens: none verifies without the key, none that breaks a rule verifies with it (seed ${SEED})`, (t) => {
  const rng = mulberry32(SEED ^ 0x5a5a_5a5a);
  const failures: string[] = [];
  const counts = { oldSignature: 0, wrongKey: 0, rightKeyInvalid: 0, rightKeyValid: 0 };
  for (let i = 0; i < ITERATIONS; i++) {
    const h = header(rng);
    const p = payload(rng);
    const headerJson = json(h, rng);
    const payloadJson = json(p, rng);
    const signingInput = `${b64(headerJson)}.${b64(payloadJson)}`;
    const invalid = h.invalid || p.invalid;
    const mode = rng.int(3);
    let token: string;
    if (mode === 0) {
      token = `${signingInput}.${ORIGINAL_SIGNATURE}`;
      if (signingInput === `${ORIGINAL_HEADER}.${ORIGINAL_PAYLOAD}`) continue; // nothing was changed
      counts.oldSignature++;
    } else if (mode === 1) {
      token = `${signingInput}.${hmac(signingInput, rng.pick(WRONG_KEYS))}`;
      counts.wrongKey++;
    } else {
      token = `${signingInput}.${hmac(signingInput, KEY)}`;
      if (invalid) counts.rightKeyInvalid++;
      else counts.rightKeyValid++;
    }

    const result = verify(token);
    const decoded = `${headerJson} ${payloadJson}`;
    if (mode === 2 && !invalid) {
      // The control: the key holder signed valid claims, extra fields and all. Only the five
      // known claims (and a token id) come back.
      const parsed = JSON.parse(payloadJson) as Record<string, unknown>;
      const expected = { sub: parsed.sub, workflow: parsed.workflow, run_id: parsed.run_id, iat: parsed.iat, exp: parsed.exp, ...(parsed.jti === undefined ? {} : { jti: parsed.jti }) };
      if (!result.ok) failures.push(`#${i} valid claims signed with the key were refused (${result.reason}): ${decoded}`);
      else if (JSON.stringify(result.claims) !== JSON.stringify(expected)) failures.push(`#${i} claims ${JSON.stringify(result.claims)} for ${decoded}`);
      continue;
    }
    const why = badReason(result);
    if (why !== undefined && failures.length < 20) failures.push(`#${i} (${['old signature', 'wrong key', 'right key'][mode]}) ${decoded}: ${why}`);
  }
  t.diagnostic(`seed ${SEED}: ${JSON.stringify(counts)}`);
  assert.deepEqual(failures, [], `seed ${SEED}: reproduce with FUZZ_SEED=${SEED}`);
  for (const [what, n] of Object.entries(counts)) assert.ok(n >= ITERATIONS / 50, `${what}: only ${n} tokens`);
});
