import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { parseCommandLine } from '../../src/config/cli.ts';
import { parseSigningKey, signBotToken, tokenIdFrom, type BotClaims, type VerifyResult } from '../../src/auth/jwt.ts';
import { verifyBotToken, verifyGitToken } from '../support/tokens.ts';

const KEY = Buffer.from('0123456789abcdef0123456789abcdef-test-key');
const OTHER_KEY = Buffer.from('fedcba9876543210fedcba9876543210-test-key');
const NOW = 1_700_000_000;
const OPTS = { nowSec: NOW, maxLifetimeSec: 3600 };
const CLAIMS: BotClaims = {
  sub: 'bot:release-notes',
  workflow: 'acme/widgets/.github/workflows/release.yml',
  run_id: '12345678',
  iat: NOW - 60,
  exp: NOW + 600,
};

function base64urlJson(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** Builds a correctly signed token from arbitrary header and payload values. */
function forge(header: unknown, payload: unknown, key = KEY): string {
  const signingInput = `${base64urlJson(header)}.${base64urlJson(payload)}`;
  return `${signingInput}.${createHmac('sha256', key).update(signingInput).digest('base64url')}`;
}

const HS256_HEADER = { alg: 'HS256', typ: 'JWT' };

function rejection(result: VerifyResult | ReturnType<typeof verifyGitToken>): string {
  assert.equal(result.ok, false, 'expected the token to be rejected');
  return result.ok ? '' : result.reason;
}

test('a signed token round-trips through verification', () => {
  const token = signBotToken(CLAIMS, KEY);
  assert.match(token, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  assert.deepEqual(JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()), HS256_HEADER);
  assert.deepEqual(verifyBotToken(token, KEY, OPTS), { ok: true, claims: CLAIMS });
});

test('only the known claims are signed and returned', () => {
  const withExtra = { ...CLAIMS, admin: true } as BotClaims;
  const payload = JSON.parse(Buffer.from(signBotToken(withExtra, KEY).split('.')[1]!, 'base64url').toString());
  assert.deepEqual(payload, CLAIMS);
  assert.deepEqual(verifyBotToken(forge(HS256_HEADER, { ...CLAIMS, admin: true }), KEY, OPTS), {
    ok: true,
    claims: CLAIMS,
  });
});

test('alg none is rejected', () => {
  const unsigned = `${base64urlJson({ alg: 'none', typ: 'JWT' })}.${base64urlJson(CLAIMS)}.`;
  assert.equal(rejection(verifyBotToken(unsigned, KEY, OPTS)), 'malformed token');
  assert.equal(rejection(verifyBotToken(forge({ alg: 'none' }, CLAIMS), KEY, OPTS)), 'unsupported algorithm');
});

test('algorithms other than exactly HS256 are rejected', () => {
  for (const header of [{ alg: 'HS512' }, { alg: 'hs256' }, { alg: 'RS256' }, { typ: 'JWT' }, { alg: ['HS256'] }]) {
    assert.equal(rejection(verifyBotToken(forge(header, CLAIMS), KEY, OPTS)), 'unsupported algorithm', JSON.stringify(header));
  }
});

test('a typ other than JWT and any crit header are rejected', () => {
  assert.equal(verifyBotToken(forge({ alg: 'HS256' }, CLAIMS), KEY, OPTS).ok, true);
  assert.equal(rejection(verifyBotToken(forge({ alg: 'HS256', typ: 'at+jwt' }, CLAIMS), KEY, OPTS)), 'unsupported token type');
  assert.equal(
    rejection(verifyBotToken(forge({ alg: 'HS256', typ: 'JWT', crit: ['exp'] }, CLAIMS), KEY, OPTS)),
    'unsupported critical header',
  );
});

test('a token with a modified payload is rejected', () => {
  const [header, , signature] = signBotToken(CLAIMS, KEY).split('.');
  const elevated = base64urlJson({ ...CLAIMS, sub: 'bot:admin' });
  assert.equal(rejection(verifyBotToken(`${header}.${elevated}.${signature}`, KEY, OPTS)), 'bad signature');
});

test('a token with a modified signature is rejected', () => {
  const token = signBotToken(CLAIMS, KEY);
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const flipped = Buffer.from(signature, 'base64url');
  flipped[0]! ^= 1;
  assert.equal(rejection(verifyBotToken(`${header}.${payload}.${flipped.toString('base64url')}`, KEY, OPTS)), 'bad signature');
});

test('a truncated or extended signature is rejected', () => {
  const [header, payload, signature] = signBotToken(CLAIMS, KEY).split('.') as [string, string, string];
  const bytes = Buffer.from(signature, 'base64url');
  for (const wrongLength of [bytes.subarray(0, 31), bytes.subarray(0, 16), Buffer.concat([bytes, Buffer.from([0])])]) {
    const token = `${header}.${payload}.${wrongLength.toString('base64url')}`;
    assert.equal(rejection(verifyBotToken(token, KEY, OPTS)), 'bad signature');
  }
});

test('a non-canonical spelling of the signature is rejected', () => {
  // 32 bytes take 43 base64url characters; the last one carries 2 unused bits a lax decoder ignores.
  const token = signBotToken(CLAIMS, KEY);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const last = alphabet.indexOf(token.at(-1)!);
  const sameBytes = `${token.slice(0, -1)}${alphabet[last ^ 1]}`;
  assert.deepEqual(Buffer.from(sameBytes.split('.')[2]!, 'base64url'), Buffer.from(token.split('.')[2]!, 'base64url'));
  assert.equal(rejection(verifyBotToken(sameBytes, KEY, OPTS)), 'malformed token');
});

test('a token signed with another key is rejected', () => {
  assert.equal(rejection(verifyBotToken(signBotToken(CLAIMS, OTHER_KEY), KEY, OPTS)), 'bad signature');
});

test('keys shorter than 32 bytes are refused', () => {
  assert.throws(() => signBotToken(CLAIMS, Buffer.alloc(31)), RangeError);
  assert.throws(() => verifyBotToken(signBotToken(CLAIMS, KEY), Buffer.alloc(0), OPTS), RangeError);
});

test('an expired token is rejected, within leeway it is accepted', () => {
  const expiredAt = (exp: number): BotClaims => ({ ...CLAIMS, iat: exp - 600, exp });
  assert.equal(rejection(verifyBotToken(signBotToken(expiredAt(NOW - 30), KEY), KEY, OPTS)), 'expired');
  assert.equal(verifyBotToken(signBotToken(expiredAt(NOW - 29), KEY), KEY, OPTS).ok, true);
});

test('a token issued in the future is rejected, within leeway it is accepted', () => {
  const issuedAt = (iat: number): BotClaims => ({ ...CLAIMS, iat, exp: iat + 600 });
  assert.equal(rejection(verifyBotToken(signBotToken(issuedAt(NOW + 31), KEY), KEY, OPTS)), 'issued in the future');
  assert.equal(verifyBotToken(signBotToken(issuedAt(NOW + 30), KEY), KEY, OPTS).ok, true);
});

test('a token with a lifetime over the maximum is rejected', () => {
  const lasting = (seconds: number): BotClaims => ({ ...CLAIMS, iat: NOW, exp: NOW + seconds });
  assert.equal(rejection(verifyBotToken(signBotToken(lasting(3601), KEY), KEY, OPTS)), 'lifetime too long');
  assert.equal(verifyBotToken(signBotToken(lasting(3600), KEY), KEY, OPTS).ok, true);
  assert.equal(rejection(verifyBotToken(signBotToken(lasting(0), KEY), KEY, OPTS)), 'exp not after iat');
});

test('a token not yet valid by nbf is rejected', () => {
  assert.equal(rejection(verifyBotToken(forge(HS256_HEADER, { ...CLAIMS, nbf: NOW + 31 }), KEY, OPTS)), 'not yet valid');
  assert.equal(verifyBotToken(forge(HS256_HEADER, { ...CLAIMS, nbf: NOW + 30 }), KEY, OPTS).ok, true);
  assert.equal(rejection(verifyBotToken(forge(HS256_HEADER, { ...CLAIMS, nbf: '0' }), KEY, OPTS)), 'invalid claim nbf');
});

test('a token missing any required claim is rejected', () => {
  for (const name of ['sub', 'workflow', 'run_id', 'iat', 'exp'] as const) {
    const payload: Partial<BotClaims> = { ...CLAIMS };
    delete payload[name];
    assert.equal(rejection(verifyBotToken(forge(HS256_HEADER, payload), KEY, OPTS)), `missing claim ${name}`);
  }
});

test('time claims must be integers', () => {
  for (const [name, value] of [
    ['exp', String(NOW + 600)],
    ['exp', NOW + 600.5],
    ['exp', null],
    ['iat', 1e300],
    ['iat', [NOW]],
  ] as const) {
    const token = forge(HS256_HEADER, { ...CLAIMS, [name]: value });
    assert.equal(rejection(verifyBotToken(token, KEY, OPTS)), `invalid claim ${name}`, `${name}=${JSON.stringify(value)}`);
  }
});

test('a string claim with a bad character, wrong type or bad length is rejected', () => {
  const badValues = ['', 'has space', 'new\nline', 'tab\t', 'quote"', 'semi;colon', 'ünicode', 'x'.repeat(129), 42, null, ['a']];
  for (const name of ['sub', 'workflow', 'run_id'] as const) {
    for (const value of badValues) {
      const token = forge(HS256_HEADER, { ...CLAIMS, [name]: value });
      assert.equal(rejection(verifyBotToken(token, KEY, OPTS)), `invalid claim ${name}`, `${name}=${JSON.stringify(value)}`);
    }
  }
  const longest = { ...CLAIMS, sub: 'a.b_c:d@e/f-G9'.padEnd(128, 'z') };
  assert.equal(verifyBotToken(signBotToken(longest, KEY), KEY, OPTS).ok, true);
});

test('malformed tokens are rejected before any signature check', () => {
  const token = signBotToken(CLAIMS, KEY);
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const malformed = [
    '',
    `${header}.${payload}`,
    `${token}.${signature}`,
    `${header}..${signature}`,
    `.${payload}.${signature}`,
    `${token}=`,
    `${header}=.${payload}.${signature}`,
    `${header}.${payload}.${signature.replace(/[-_]/g, '+')}+`,
    `${header}.${payload}.${signature}/`,
    `${header}.${payload}.${signature.slice(0, 20)} ${signature.slice(20)}`,
    `${header}.${payload}.${signature}AA`, // 45 characters: a length no byte string encodes to
    ` ${token}`,
  ];
  for (const candidate of malformed) {
    assert.equal(rejection(verifyBotToken(candidate, KEY, OPTS)), 'malformed token', JSON.stringify(candidate));
  }
});

test('a header that is not a JSON object is rejected', () => {
  const [, payload, signature] = signBotToken(CLAIMS, KEY).split('.') as [string, string, string];
  for (const header of ['{"alg":"HS256"', 'null', '["HS256"]', '"HS256"', 'HS256']) {
    const token = `${Buffer.from(header).toString('base64url')}.${payload}.${signature}`;
    assert.equal(rejection(verifyBotToken(token, KEY, OPTS)), 'malformed header', header);
  }
});

test('a signed payload that is not a JSON object is rejected', () => {
  for (const payload of [[CLAIMS], 'claims', null]) {
    assert.equal(rejection(verifyBotToken(forge(HS256_HEADER, payload), KEY, OPTS)), 'malformed payload');
  }
});

test('an overlong token is rejected before decoding', () => {
  const padded = { ...CLAIMS, padding: 'x'.repeat(4096) };
  assert.equal(rejection(verifyBotToken(forge(HS256_HEADER, padded), KEY, OPTS)), 'token too long');
});

test('rejection reasons never echo token content', () => {
  const marker = 'ECHOCHECK';
  const payload = { ...CLAIMS, sub: `${marker} x` };
  for (const token of [forge(HS256_HEADER, payload), forge({ alg: marker }, payload), `${marker}.${marker}.${marker}`]) {
    assert.doesNotMatch(rejection(verifyBotToken(token, KEY, OPTS)), new RegExp(marker));
  }
});

test('random single-character mutations never verify unless the token is unchanged', () => {
  const token = signBotToken(CLAIMS, KEY);
  // mulberry32: a small seeded PRNG, so any failure reproduces.
  let state = 0x5eed1234;
  const random = (): number => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  let unchanged = 0;
  for (let i = 0; i < 2000; i++) {
    const position = Math.floor(random() * token.length);
    const replacement = String.fromCharCode(0x20 + Math.floor(random() * 0x5f)); // printable ASCII
    const mutated = token.slice(0, position) + replacement + token.slice(position + 1);
    if (mutated === token) unchanged++;
    assert.equal(verifyBotToken(mutated, KEY, OPTS).ok, mutated === token, `position ${position} -> ${JSON.stringify(replacement)}`);
  }
  assert.ok(unchanged < 100, 'most mutations must change the token');
});

/** Builds a correctly signed token from raw header and payload JSON text (which may repeat keys). */
function forgeRaw(headerJson: string, payloadJson: string, key = KEY): string {
  const signingInput = `${Buffer.from(headerJson).toString('base64url')}.${Buffer.from(payloadJson).toString('base64url')}`;
  return `${signingInput}.${createHmac('sha256', key).update(signingInput).digest('base64url')}`;
}

test('a duplicate key in the header or payload is rejected, even when correctly signed', () => {
  const claims = JSON.stringify(CLAIMS);
  // Another JWT library keeping the first "exp" would accept a token this one read as expired, and vice versa.
  const twoExp = `${claims.slice(0, -1)},"exp":${NOW + 999_999}}`;
  assert.equal(rejection(verifyBotToken(forgeRaw('{"alg":"HS256","typ":"JWT"}', twoExp), KEY, OPTS)), 'duplicate key in payload');
  const escapedSub = `${claims.slice(0, -1)},"s\\u0075b":"bot:other"}`;
  assert.equal(rejection(verifyBotToken(forgeRaw('{"alg":"HS256","typ":"JWT"}', escapedSub), KEY, OPTS)), 'duplicate key in payload');
  assert.equal(rejection(verifyBotToken(forgeRaw('{"alg":"none","alg":"HS256"}', claims), KEY, OPTS)), 'duplicate key in header');
});

const GIT_SCOPE = ['github.com/acme/widgets:write', 'github.com/acme/*:read'];

test('a token with a git scope round-trips through verifyGitToken, scope included', () => {
  const claims = { ...CLAIMS, git: GIT_SCOPE };
  const token = signBotToken(claims, KEY);
  assert.deepEqual(JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).git, GIT_SCOPE);
  assert.deepEqual(verifyGitToken(token, KEY, OPTS), { ok: true, claims });
});

test('the gateway refuses a token with a git scope and the git proxy one without: one secret may sign both kinds', () => {
  const gitToken = signBotToken({ ...CLAIMS, git: GIT_SCOPE }, KEY);
  const botToken = signBotToken(CLAIMS, KEY);
  assert.equal(rejection(verifyBotToken(gitToken, KEY, OPTS)), 'meant for the git proxy');
  assert.equal(rejection(verifyGitToken(botToken, KEY, OPTS)), 'no git scope');
  // Every other rule holds for git tokens too: the same verifier runs first.
  assert.equal(rejection(verifyGitToken(signBotToken({ ...CLAIMS, git: GIT_SCOPE }, OTHER_KEY), KEY, OPTS)), 'bad signature');
  assert.equal(rejection(verifyGitToken(signBotToken({ ...CLAIMS, git: GIT_SCOPE, exp: NOW - 31 }, KEY), KEY, OPTS)), 'expired');
  assert.equal(rejection(verifyGitToken(forge({ alg: 'none' }, { ...CLAIMS, git: GIT_SCOPE }), KEY, OPTS)), 'unsupported algorithm');
});

test('a git claim that is not a list of 1 to 64 visible-ASCII strings of at most 300 characters is rejected', () => {
  const bad: unknown[] = [[], 'github.com/acme/widgets:read', [42], [''], ['has space:read'], ['ünicode:read'], ['x'.repeat(301)], Array(65).fill('github.com/a/b:read'), null, {}];
  for (const git of bad) {
    const token = forge(HS256_HEADER, { ...CLAIMS, git });
    assert.equal(rejection(verifyGitToken(token, KEY, OPTS)), 'invalid claim git', JSON.stringify(git).slice(0, 60));
    assert.equal(rejection(verifyBotToken(token, KEY, OPTS)), 'invalid claim git', 'the gateway refuses it too');
  }
  assert.equal(verifyGitToken(forge(HS256_HEADER, { ...CLAIMS, git: Array(64).fill('github.com/a/b:read') }), KEY, OPTS).ok, true);
  assert.equal(verifyGitToken(forge(HS256_HEADER, { ...CLAIMS, git: ['x'.repeat(300)] }), KEY, OPTS).ok, true);
});

test('parseSigningKey: unset or empty is no key; under 32 bytes is an error naming the variable; else the UTF-8 bytes', () => {
  assert.equal(parseSigningKey('GIT_PROXY_SIGNING_KEY', undefined), undefined);
  assert.equal(parseSigningKey('GIT_PROXY_SIGNING_KEY', ''), undefined);
  assert.throws(() => parseSigningKey('GIT_PROXY_SIGNING_KEY', 'k'.repeat(31)), /^Error: GIT_PROXY_SIGNING_KEY: an HS256 secret must be at least 32 bytes \(e\.g\. openssl rand -hex 32\)$/);
  assert.deepEqual(parseSigningKey('GIT_PROXY_SIGNING_KEY', 'ü'.repeat(16)), Buffer.from('ü'.repeat(16)), '32 bytes in 16 characters');
});

test('a bot token may carry a limits claim (budget_usd > 0; max_concurrent, requests_per_minute, tokens_per_minute ≥ 1; nothing else); any other form is refused', () => {
  const now = 1_700_000_000;
  const base = { sub: 'bot', workflow: 'w', run_id: 'r', iat: now, exp: now + 60 };
  const opts = { nowSec: now, maxLifetimeSec: 3600 };
  const key = Buffer.alloc(32, 7);
  const ok = verifyBotToken(signBotToken({ ...base, limits: { budget_usd: 2.5, max_concurrent: 2, requests_per_minute: 30, tokens_per_minute: 100_000 } }, key), key, opts);
  assert.deepEqual(ok.ok && ok.claims.limits, { budget_usd: 2.5, max_concurrent: 2, requests_per_minute: 30, tokens_per_minute: 100_000 });
  for (const limits of [{ budget_usd: 0 }, { budget_usd: -1 }, { max_concurrent: 0 }, { max_concurrent: 1.5 }, { requests_per_minute: 0 }, { tokens_per_minute: '5' }, { budget_usd: 1, extra: 1 }, 'x']) {
    const r = verifyBotToken(signBotToken({ ...base, limits: limits as never }, key), key, opts);
    assert.deepEqual(r, { ok: false, reason: 'invalid claim limits' }, JSON.stringify(limits));
  }
});

test('a token id never reads as a flag: the revoke command mint-token prints parses for bytes whose base64url would begin with a dash (tokenIdFrom)', () => {
  // 0xf8 is '-' as the first base64url character: the id CI once drew, refused by revoke as an ambiguous option value.
  for (const first of [0xf8, 0xfb, 0xff, 0x00]) {
    const id = tokenIdFrom(Buffer.from([first, ...Array(11).fill(0xfc)]));
    assert.match(id, /^[0-9a-f]{24}$/);
    const cli = parseCommandLine(['revoke', '--revocations', 'deny.json', '--token-id', id]);
    assert.equal(cli.command, 'revoke');
    assert.equal(cli.mint.tokenId, id);
  }
});
