import { test } from 'node:test';
import assert from 'node:assert/strict';
import { brotliCompressSync, constants, deflateSync, gzipSync } from 'node:zlib';
import { carriesSecret, decodeBody, headerCarriesSecret, redactBody, StreamRedactor } from '../../src/http/redact.ts';
import { base64Forms, fixedSecretList, keyTail } from '../../src/http/secret-forms.ts';
import { scrubResponseHeaders } from '../../src/http/headers.ts';
import { bufferWork } from '../support/buffer-work.ts';
import { mulberry32 } from '../support/prng.ts';
import { base64Of, doublePercentOf, htmlReferencesOf, recoverablePiece } from '../support/secret-forms.ts';

const redactSecret = (body: Buffer, secret: string) => redactBody(body, [secret]);

const KEY = 'sk-upstream-0123456789';

test('redactSecret replaces every occurrence of the secret', () => {
  const body = Buffer.from(`{"error":{"message":"bad key ${KEY}; again ${KEY}${KEY}"}}`);
  const out = redactSecret(body, KEY);
  assert.equal(out.toString('utf8'), '{"error":{"message":"bad key [REDACTED]; again [REDACTED][REDACTED]"}}');
  assert.equal(out.indexOf(KEY), -1);
});

test('a body without the secret is returned as the same Buffer, byte-identical', () => {
  const body = Buffer.from('{"error":{"message":"rate limited","type":"rate_limit_error"}}');
  const before = Buffer.from(body);
  const out = redactSecret(body, KEY);
  assert.equal(out, body);
  assert.deepEqual(out, before);
});

test('an empty secret leaves the body untouched', () => {
  const body = Buffer.from('anything');
  assert.equal(redactSecret(body, ''), body);
});

test('multi-byte UTF-8 and invalid bytes around the secret are preserved exactly', () => {
  const before = Buffer.concat([Buffer.from('héllo ✓ 🙂 '), Buffer.from([0xff, 0xfe, 0x00, 0x80])]);
  const after = Buffer.concat([Buffer.from([0xc3]), Buffer.from(' ünïcode — end')]);
  const body = Buffer.concat([before, Buffer.from(KEY), after]);
  const out = redactSecret(body, KEY);
  assert.deepEqual(out, Buffer.concat([before, Buffer.from('[REDACTED]'), after]));
});

test('a partial secret is not redacted', () => {
  const partial = KEY.slice(0, -1);
  const body = Buffer.from(`key ${partial}!`);
  assert.equal(redactSecret(body, KEY), body);
});

// ---- every form a client decodes back into the secret ----

const escapeAll = (s: string) => [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');

test('redaction: a JSON-escaped echo of the key (every character, or a mix, upper- or lower-case hex) is redacted (redactBody)', () => {
  const mixed = [...KEY].map((c, i) => (i % 2 ? c : `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`)).join('');
  for (const form of [escapeAll(KEY), mixed]) {
    const out = redactBody(Buffer.from(`{"error":{"message":"Incorrect API key provided: ${form}"}}`), [KEY]).toString();
    assert.equal(out, '{"error":{"message":"Incorrect API key provided: [REDACTED]"}}', form);
  }
  const slashed = 'tok/with/slashes-0123456789';
  assert.equal(redactBody(Buffer.from(`"${slashed.replace(/\//g, '\\/')}"`), [slashed]).toString(), '"[REDACTED]"');
});

test('redaction: the key in another case or percent-encoded is redacted (redactBody)', () => {
  for (const form of [KEY.toUpperCase(), encodeURIComponent(KEY).replace(/-/g, '%2D'), [...KEY].map((c) => `%${c.charCodeAt(0).toString(16)}`).join('')]) {
    assert.equal(redactBody(Buffer.from(`x ${form} y`), [KEY]).toString(), 'x [REDACTED] y', form);
  }
});

test('redaction: a response header carrying the key in another case, percent-encoded, base64 or base64url is dropped (headerCarriesSecret, scrubResponseHeaders)', () => {
  const forms = [KEY, KEY.toUpperCase(), [...KEY].map((c) => `%${c.charCodeAt(0).toString(16)}`).join(''), Buffer.from(KEY).toString('base64'), Buffer.from(`user:${KEY}`).toString('base64url'), `Basic ${Buffer.from(`x:${KEY}`).toString('base64')}`];
  for (const form of forms) assert.equal(headerCarriesSecret([KEY])(`prefix ${form}; suffix`), true, form);
  assert.equal(headerCarriesSecret([KEY])('req_0123456789abcdef'), false);
  const kept = scrubResponseHeaders(['X-Debug', Buffer.from(KEY).toString('base64'), 'X-Echo', KEY.toUpperCase(), 'X-Request-Id', 'req_1'], [KEY]);
  assert.deepEqual(kept, ['X-Request-Id', 'req_1']);
});

test('redaction: an error body compressed with gzip, deflate, br (or two codings) is decoded before it is redacted; an unknown coding, a corrupt body and a bomb are refused (decodeBody)', () => {
  const plain = Buffer.from(`{"error":"Incorrect API key provided: ${KEY}"}`);
  for (const [encoding, body] of [['gzip', gzipSync(plain)], ['x-gzip', gzipSync(plain)], ['deflate', deflateSync(plain)], ['br', brotliCompressSync(plain)], ['deflate, gzip', gzipSync(deflateSync(plain))], ['identity', plain], [undefined, plain]] as const) {
    const decoded = decodeBody(body, encoding, 1024);
    assert.ok(decoded.ok, String(encoding));
    assert.equal(redactBody(decoded.body, [KEY]).toString(), '{"error":"Incorrect API key provided: [REDACTED]"}');
  }
  assert.deepEqual(decodeBody(plain, 'zstd', 1024), { ok: false, reason: 'unsupported_encoding' });
  assert.deepEqual(decodeBody(Buffer.from('not gzip at all'), 'gzip', 1024), { ok: false, reason: 'corrupt' });
  // 64 MiB of zeros; run-length deflate compresses them as small as the default, in a fifth of the time.
  const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024), { strategy: constants.Z_RLE });
  assert.ok(bomb.length < 100_000);
  assert.deepEqual(decodeBody(bomb, 'gzip', 1024 * 1024), { ok: false, reason: 'too_large' });
});

test('redaction: a stream is redacted event by event, a key split across chunks included, and whole events pass at once (StreamRedactor)', () => {
  const events = (r: StreamRedactor, chunks: string[]) => {
    const seen: string[] = [];
    for (const c of chunks) seen.push(r.push(Buffer.from(c)).toString('latin1'));
    seen.push(r.end().toString('latin1'));
    return seen;
  };
  const error = `event: error\ndata: {"error":{"message":"bad key ${escapeAll(KEY)}"}}\n\n`;
  const whole = events(new StreamRedactor([KEY], true), ['data: {"delta":"hi"}\n\n', error]);
  assert.deepEqual(whole, ['data: {"delta":"hi"}\n\n', 'event: error\ndata: {"error":{"message":"bad key [REDACTED]"}}\n\n', '']);
  // Split anywhere, byte by byte at worst: the key never gets out, the bytes are all relayed.
  const text = `data: a\n\ndata: ${KEY} and ${escapeAll(KEY)}\n\ndata: z\n\n`;
  for (const size of [1, 3, 7, 20]) {
    const chunks = text.match(new RegExp(`[\\s\\S]{1,${size}}`, 'g'))!;
    const out = events(new StreamRedactor([KEY], true), chunks).join('');
    assert.equal(out, 'data: a\n\ndata: [REDACTED] and [REDACTED]\n\ndata: z\n\n', `chunks of ${size}`);
  }
  // A plain body holds back only the last few bytes a key could end in.
  const plain = new StreamRedactor([KEY], false);
  // (the longest form a key can take: every character as an HTML reference up to 20 characters long)
  const head = plain.push(Buffer.from(`{"text":"${'x'.repeat(4000)}`)).toString();
  assert.ok(head.length > 2500 && head.length < 4010, String(head.length));
});

// ---- encoded forms: base64, base64url, twice over, HTML references, percent twice ----

const LONG_KEY = `sk-proj-${'Zq3xT9vB'.repeat(5)}0123456789abcdef`;
/** A secret whose base64 holds `+` and `/` at every offset (three `?` or `~` in a row do it), which encoders escape. */
const ODD_KEY = 'tok???with~~~odd-chars-0123456789abcdef';
const jsonWith = (value: string) => Buffer.from(JSON.stringify({ error: { message: `the provider said: ${value}`, type: 'invalid_request_error' } }));

/** The redacted body is still JSON, holds the marker, and no piece of the key can be read back from it. */
function assertRedactedJson(out: Buffer, secret: string, form: string): void {
  assert.doesNotThrow(() => JSON.parse(out.toString('utf8')), form);
  assert.match(out.toString(), /\[REDACTED\]/, form);
  assert.equal(recoverablePiece(out, secret), undefined, form);
}

for (const encoding of ['base64', 'base64url'] as const) {
  test(`redaction, ${encoding}: the key ${encoding}-encoded at byte offset 0, 1 or 2 of what is encoded, with anything around it, is redacted and the JSON stays valid (redactBody)`, () => {
    for (const key of [KEY, LONG_KEY, ODD_KEY]) {
      for (const before of ['', 'k', 'ke', 'key', 'Bearer ', 'user:']) {
        for (const after of ['', '!', '\n', ' tail']) {
          const form = base64Of(key, before, after, encoding);
          assert.ok(recoverablePiece(form, key) !== undefined, 'the oracle reads the key back from the form itself');
          assertRedactedJson(redactBody(jsonWith(form), [key]), key, `${key} ${JSON.stringify(before)} ${JSON.stringify(after)}`);
        }
      }
    }
  });
}

test('redaction, base64 twice over: the key base64- or base64url-encoded twice, at every offset of each, is redacted (redactBody)', () => {
  for (const key of [KEY, LONG_KEY, ODD_KEY]) {
    for (const inner of ['base64', 'base64url'] as const) {
      for (const outer of ['base64', 'base64url'] as const) {
        for (const before of ['', 'a', 'ab']) {
          for (const outerBefore of ['', 'x', 'xy']) {
            const form = base64Of(base64Of(key, before, '.', inner), outerBefore, '', outer);
            assertRedactedJson(redactBody(jsonWith(form), [key]), key, `${inner} then ${outer}, offsets ${before.length}/${outerBefore.length}`);
          }
        }
      }
    }
  }
});

test('redaction, escaped base64: a form that holds + or / is redacted with those characters JSON-escaped, percent-encoded or as HTML references (redactBody)', () => {
  for (const before of ['', 'k', 'ke']) {
    const form = base64Of(ODD_KEY, before);
    assert.match(form, /[+/]/, 'the form holds characters an encoder escapes');
    const escapes = [form.replace(/\//g, '\\/'), form.replace(/\+/g, '\\u002b').replace(/\//g, '\\u002F'), encodeURIComponent(form), form.replace(/\//g, '&#x2F;').replace(/\+/g, '&#43;')];
    for (const escaped of escapes) {
      const out = redactBody(Buffer.from(`{"echo":"${escaped}"}`), [ODD_KEY]);
      assert.match(out.toString(), /\[REDACTED\]/, escaped);
      assert.equal(recoverablePiece(out, ODD_KEY), undefined, escaped);
    }
  }
});

test('redaction, HTML character references: the key as decimal, hex or named references, with or without the closing ;, is redacted (redactBody)', () => {
  for (const key of [KEY, 'key&with<named>"refs\'-0123456789']) {
    const named = [...key].map((c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c] ?? c).join('');
    for (const form of [htmlReferencesOf(key), named, htmlReferencesOf(key).toUpperCase()]) {
      const out = redactBody(Buffer.from(`<p>Invalid key: ${form}</p>`), [key]);
      assert.equal(out.toString(), '<p>Invalid key: [REDACTED]</p>', form);
    }
  }
});

test('redaction, percent-encoded twice: the key with every byte as %25XX, or mixed with single %XX and literal characters, is redacted (redactBody)', () => {
  const mixed = [...KEY].map((c, i) => [c, `%${c.charCodeAt(0).toString(16)}`, `%25${c.charCodeAt(0).toString(16).toUpperCase()}`][i % 3]).join('');
  for (const form of [doublePercentOf(KEY), mixed]) {
    assert.equal(redactBody(Buffer.from(`{"url":"https://x/?k=${form}&z=1"}`), [KEY]).toString(), '{"url":"https://x/?k=[REDACTED]&z=1"}', form);
  }
  const utf8 = 'clé-secrète-0123456789';
  assert.equal(redactBody(Buffer.from(`q=${encodeURIComponent(utf8)}`), [utf8]).toString(), 'q=[REDACTED]', 'a non-ASCII secret percent-encoded byte by byte');
});

test('base64Forms: whatever surrounds a secret, its base64 and base64url text holds one of the secret\'s forms (random secrets, prefixes and suffixes, seed 26)', () => {
  const rng = mulberry32(26);
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => rng.int(256)));
  for (let i = 0; i < 2000; i++) {
    const secret = bytes(rng.between(3, 60));
    const forms = base64Forms(secret);
    const text = Buffer.concat([bytes(rng.int(7)), secret, bytes(rng.int(4))]);
    for (const encoding of ['base64', 'base64url'] as const) {
      assert.ok(forms.some((f) => text.toString(encoding).includes(f)), `${secret.toString('hex')} in ${text.toString('hex')} (${encoding})`);
    }
  }
});

test('redaction: a MiB of base64 data and of text without the key is relayed as the same Buffer (no chance match in encoded forms)', () => {
  const rng = mulberry32(7);
  const random = Buffer.alloc(768 * 1024);
  for (let i = 0; i < random.length; i++) random[i] = rng.int(256);
  const data = random.toString('base64');
  for (const body of [Buffer.from(`{"b64_json":"${data}"}`), Buffer.from('the quick brown fox jumps over the lazy dog; '.repeat(24_000))]) {
    assert.equal(redactBody(body, [KEY, LONG_KEY, ODD_KEY]), body);
  }
});

test('redaction, StreamRedactor: each encoded form split between two chunks at every offset is redacted, as an event stream and as a plain body', () => {
  const forms = {
    base64: base64Of(LONG_KEY, 'k'),
    base64url: base64Of(ODD_KEY, 'ke', '', 'base64url'),
    'base64 twice': base64Of(base64Of(KEY, 'x')),
    'HTML references': htmlReferencesOf(KEY),
    'percent-encoded twice': doublePercentOf(KEY),
  };
  for (const [name, form] of Object.entries(forms)) {
    const text = `data: {"a":1}\n\ndata: {"error":"saw ${form} here"}\n\ndata: {"z":2}\n\n`;
    const whole = redactBody(Buffer.from(text), [KEY, LONG_KEY, ODD_KEY]).toString();
    assert.match(whole, /^data: \{"a":1\}\n\ndata: \{"error":"saw [\w-]*\[REDACTED\][\w=-]* here"\}\n\ndata: \{"z":2\}\n\n$/, name);
    for (const secret of [KEY, LONG_KEY, ODD_KEY]) assert.equal(recoverablePiece(whole, secret), undefined, name);
    for (let cut = 1; cut < text.length; cut++) {
      for (const events of [true, false]) {
        const r = new StreamRedactor([KEY, LONG_KEY, ODD_KEY], events);
        const out = Buffer.concat([r.push(Buffer.from(text.slice(0, cut))), r.push(Buffer.from(text.slice(cut))), r.end()]).toString();
        assert.equal(out, whole, `${name}, cut at ${cut}, events ${events}`);
      }
    }
  }
});

test('redaction: a response header carrying the key base64-encoded twice, or base64 of its JSON-escaped form, is dropped (headerCarriesSecret)', () => {
  for (const value of [base64Of(base64Of(KEY, 'u:')), `Basic ${base64Of(escapeAll(KEY), 'x:')}`, htmlReferencesOf(KEY), doublePercentOf(KEY)]) {
    assert.equal(headerCarriesSecret([KEY])(value), true, value);
  }
});

test('redaction, HTML references with leading zeros and HTML5 names: &#0115;, &#x073;, &lowbar;, &sol;, &plus;, &period; (any case, with or without the semicolon) are the key too (redactBody)', () => {
  const key = 'sk_live/ab+cd.ef_0123456789';
  const zeros = [...key].map((c) => `&#00${c.charCodeAt(0)};`).join('');
  const hexZeros = [...key].map((c) => `&#x00${c.charCodeAt(0).toString(16)};`).join('');
  const named = key.replace(/_/g, '&lowbar;').replace(/\//g, '&sol;').replace(/\+/g, '&plus;').replace(/\./g, '&period;');
  const namedUpper = key.replace(/_/g, '&UnderBar;').replace(/\//g, '&SOL').replace(/\+/g, '&plus');
  for (const form of [zeros, hexZeros, named, namedUpper]) {
    const out = redactBody(Buffer.from(`<p>error: ${form}</p>`), [key]).toString('latin1');
    assert.ok(!out.includes(form), `${form} was relayed: ${out}`);
  }
});

test('redaction: a text shorter than the shortest form of every secret cannot hold one; one exactly as long as the secret is found (headerCarriesSecret, redactBody)', () => {
  const secret = 'sk-test-0123456789abcdef';
  assert.equal(headerCarriesSecret([secret])(secret), true, 'the secret alone, as long as the shortest form');
  assert.equal(headerCarriesSecret([secret])(secret.toUpperCase()), true, 'in another case');
  assert.equal(headerCarriesSecret([secret])(secret.slice(0, -1)), false, 'one character short');
  assert.equal(headerCarriesSecret(['k'.repeat(8), secret])('k'.repeat(8)), true, 'the shortest secret of several sets the bound');
  assert.equal(redactBody(Buffer.from(secret), [secret]).toString(), '[REDACTED]');
});

test('redaction, StreamRedactor: a body written a byte at a time costs a few bytes\' work per byte, not the held window\'s: what is held is joined and scanned only when an event ends, or, for a plain body, when twice the window is held', () => {
  const events = Array.from({ length: 300 }, (_, i) => `data: {"i":${i},"text":"a few words of text for event ${i}"}\n\n`).join('');
  const plain = JSON.stringify({ text: 'a few words of text '.repeat(2000) });
  // A secret of 4,000 characters has a window (80,000 characters) larger than the most a stream holds back (64 KiB).
  const big = `tok-${'Zq3xT9vB'.repeat(500)}`;
  const cases = [
    ['an event stream', [KEY], `${events}data: {"leak":"${KEY}"}\n\n`, true],
    ['a plain body', [KEY], `${plain}${KEY}"`, false],
    ['an event of 140 KB against a secret whose window is over 64 KiB', [big], `data: ${'x'.repeat(140_000)}${big}\n\n`, true],
  ] as const;
  for (const [name, secrets, body, asEvents] of cases) {
    const r = new StreamRedactor(secrets, asEvents);
    const out: Buffer[] = [];
    const bytes = Buffer.from(body);
    const { copied, decoded } = bufferWork(() => {
      for (let i = 0; i < bytes.length; i++) out.push(r.push(bytes.subarray(i, i + 1)));
      out.push(r.end());
    });
    assert.equal(Buffer.concat(out).toString(), body.replace(secrets[0], '[REDACTED]'), name);
    // Each scan of a plain body copies and reads twice the window to let one window through: a few
    // bytes a byte. Joining and reading what is held at every push was the window's size a byte.
    assert.ok(copied + decoded < 8 * body.length, `${name}: ${copied} bytes copied and ${decoded} read for a body of ${body.length}`);
  }
});

test('redaction: a text too ambiguous to be checked for a key with overlapping forms is treated as holding it: a header value is dropped, an event-stream frame refused, a body throws (its caller does not relay it)', () => {
  const key = `${';'.repeat(16)}Zq7-0123456789abcdef`;
  const text = `${'&#59;'.repeat(400)}x`;
  assert.equal(headerCarriesSecret([key])(text), true, 'a header value');
  assert.equal(carriesSecret(Buffer.from(text), [key]), true, 'an event-stream frame');
  assert.throws(() => redactBody(Buffer.from(text), [key]), { name: 'UnreadableText' });
  assert.equal(headerCarriesSecret([key])('&#59;'.repeat(3)), false, 'a short value is read, and holds none');
});

test('redaction, StreamRedactor: an event stream whose lines end in CRLF (sse-starlette\'s default) is relayed event by event, as one ending in LF', () => {
  for (const eol of ['\n', '\r\n']) {
    const r = new StreamRedactor([KEY], true);
    for (let i = 0; i < 3; i++) {
      const event = `data: {"i":${i}}${eol}${eol}`;
      assert.equal(r.push(Buffer.from(event)).toString(), event, `event ${i} with ${JSON.stringify(eol)}`);
    }
    // A blank line split between two pushes (its last byte in the second) ends the event too.
    const split = `data: {"i":3}${eol}${eol}`;
    assert.equal(r.push(Buffer.from(split.slice(0, -1))).toString(), '');
    assert.equal(r.push(Buffer.from(split.slice(-1))).toString(), split);
    assert.equal(r.end().toString(), '');
  }
});

// ---- the last key forms (security review 2026-11-29, finding 2): the key's hex, and the key without its public prefix ----

/** Keys as operators hold them, each with the prefix its vendor gives every key of its kind. */
const PREFIXED = [
  { prefix: 'sk-ant-api03-', key: 'sk-ant-api03-Xq7Rk2Lp9VbN4tZc8WdF1hJs6MgY3aEu0oKiQw5PnTxBvCy2HlDr7Gf-_Ue4Sj9AkOm1Iz8WqNb3Rt6YpVc0Ld5Hg2Xs7-Mn4Ba8AA' },
  { prefix: 'sk-proj-', key: 'sk-proj-T3BlbkFJRk2Lp9VbN4tZc8WdF1hJs6MgY3aEu0oKiQw5PnTxBvCy2HlDr7Gf_Ue4Sj9AkOm1Iz8WqNb3Rt6YpVc0Ld5Hg2Xs7Mn4Ba8Ce' },
  { prefix: 'ghp_', key: 'ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8' },
  { prefix: 'github_pat_', key: 'github_pat_11ABCDEFG0_x9Y8w7V6u5T4s3R2q1P0o9N8m7L6k5J4i3H2g1F0e9D8c7B6a5Z4y3X2w1V' },
] as const;
const hexOf = (s: string) => Buffer.from(s).toString('hex');
/** Upper and lower case in turn. */
const mixedCase = (s: string) => [...s].map((c, i) => (i % 2 ? c.toUpperCase() : c.toLowerCase())).join('');

/** The forms of the finding, and those they compose with, of one key. */
function lastForms(key: string, prefix: string): Record<string, string> {
  const tail = key.slice(prefix.length);
  return {
    'hex': hexOf(key),
    'hex in upper case': hexOf(key).toUpperCase(),
    'hex in mixed case': mixedCase(hexOf(key)),
    'the key without its prefix': tail,
    'the key without its prefix, in upper case': tail.toUpperCase(),
    'the key without its prefix, JSON-escaped': escapeAll(tail),
    'the key without its prefix, percent-encoded': [...tail].map((c) => `%${c.charCodeAt(0).toString(16)}`).join(''),
    'the key without its prefix, as HTML references': htmlReferencesOf(tail),
    'the key without its prefix, base64 at offset 1': base64Of(tail, 'k'),
    'the key without its prefix, base64url at offset 2': base64Of(tail, 'ke', '', 'base64url'),
    'the key without its prefix, base64 twice': base64Of(base64Of(tail, 'x')),
    'the hex of the key without its prefix': hexOf(tail),
    'the hex of the key without its prefix, in upper case': hexOf(tail).toUpperCase(),
  };
}

/** Nothing of the key's secret part reaches the client: no piece a client can decode, and no piece of its hex in any case. */
function assertNoTail(out: Buffer | string, key: string, prefix: string, what: string): void {
  const tail = key.slice(prefix.length);
  const text = (typeof out === 'string' ? out : out.toString('latin1')).toLowerCase();
  assert.equal(recoverablePiece(text, tail), undefined, `${what}: a piece of the key can be decoded from ${text}`);
  const hex = hexOf(tail);
  for (let i = 0; i + 16 <= hex.length; i += 2) assert.ok(!text.includes(hex.slice(i, i + 16)), `${what}: a piece of the key's hex reached the client: ${text}`);
}

test('keyTail: the public prefix of sk-, sk-proj-, sk-ant-api03-, ghp_, github_pat_, glpat-, xoxb- and ya29. keys is left out; a key without one, or whose tail would be under 20 characters, has no tail', () => {
  for (const { prefix, key } of PREFIXED) assert.equal(keyTail(key), key.slice(prefix.length), key);
  const tail = 'Zq3xT9vB0123456789abcdef';
  for (const prefix of ['sk-', 'glpat-', 'xoxb-', 'ya29.', 'sk-svcacct-', 'sk_live_']) assert.equal(keyTail(`${prefix}${tail}`), tail, prefix);
  // No lowercase prefix: an AWS secret, a JWT, a base64 Basic value, a key that opens with a capital or a digit.
  for (const key of ['wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY12', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl', 'eC1hY2Nlc3MtdG9rZW46Z2hzX3Rva2Vu', `Sk-${tail}`, `1sk-${tail}`]) assert.equal(keyTail(key), undefined, key);
  // A tail under 20 characters is too short to be looked for on its own.
  assert.equal(keyTail('sk-proj-0123456789abcdefghi'), undefined, '19 characters');
  assert.equal(keyTail('sk-proj-0123456789abcdefghij'), '0123456789abcdefghij', '20 characters');
  // At most four segments: a random part that opens with a lowercase segment loses it (the tail is still in every echo without the prefix).
  assert.equal(keyTail(`sk-ant-api03-ab-${tail}`), tail);
  assert.equal(keyTail(`a-b-c-d-e-${tail}`), `e-${tail}`);
});

test('redaction, hex and key without its prefix: the key\'s hex (lower, upper or mixed case) and the key without its public prefix (in every form the key is looked for), found at every byte offset of a body, are redacted (redactBody)', () => {
  const background = '{"type":"error","error":{"type":"invalid_request_error","message":"debug: key="}}';
  for (const { prefix, key } of PREFIXED) {
    for (const [name, form] of Object.entries(lastForms(key, prefix))) {
      for (let at = 0; at <= background.length; at++) {
        const body = Buffer.from(`${background.slice(0, at)}${form}${background.slice(at)}`);
        const out = redactBody(body, [key]);
        assert.notEqual(out, body, `${key}, ${name}, at ${at}: relayed as is`);
        assertNoTail(out, key, prefix, `${key}, ${name}, at ${at}`);
        // Forms written as they are (the hex, the tail) are replaced exactly, nothing else touched.
        if (!/base64|JSON|percent|HTML/.test(name)) assert.equal(out.toString(), `${background.slice(0, at)}[REDACTED]${background.slice(at)}`, `${key}, ${name}, at ${at}`);
      }
    }
    // The whole key, in any of these forms, still becomes one marker, its prefix included.
    for (const form of [key, escapeAll(key), hexOf(key), hexOf(key).toUpperCase(), htmlReferencesOf(key)]) {
      assert.equal(redactBody(Buffer.from(`{"m":"${form}"}`), [key]).toString(), '{"m":"[REDACTED]"}', `${key}: ${form}`);
    }
  }
});

test('redaction, hex and key without its prefix, StreamRedactor: each form split at every seam between two chunks, or written a byte at a time, is redacted, as an event stream and as a plain body', () => {
  const keys = PREFIXED.map((p) => p.key);
  for (const { prefix, key } of PREFIXED.slice(0, 2)) {
    for (const [name, form] of Object.entries(lastForms(key, prefix))) {
      const text = `data: {"a":1}\n\ndata: {"error":"saw ${form} here"}\n\ndata: {"z":2}\n\n`;
      const whole = redactBody(Buffer.from(text), keys).toString();
      assertNoTail(whole, key, prefix, name);
      for (let cut = 1; cut < text.length; cut++) {
        for (const events of [true, false]) {
          const r = new StreamRedactor(keys, events);
          const out = Buffer.concat([r.push(Buffer.from(text.slice(0, cut))), r.push(Buffer.from(text.slice(cut))), r.end()]).toString();
          assert.equal(out, whole, `${key}, ${name}, cut at ${cut}, events ${events}`);
        }
      }
      for (const events of [true, false]) {
        const r = new StreamRedactor(keys, events);
        const bytes = Buffer.from(text);
        const out: Buffer[] = [];
        for (let i = 0; i < bytes.length; i++) out.push(r.push(bytes.subarray(i, i + 1)));
        out.push(r.end());
        assert.equal(Buffer.concat(out).toString(), whole, `${key}, ${name}, a byte at a time, events ${events}`);
      }
    }
  }
});

test('redaction, hex and key without its prefix: a response header carrying the key\'s hex in any case, or the key without its prefix (plain, base64 in a Basic value), is dropped (headerCarriesSecret)', () => {
  for (const { prefix, key } of PREFIXED) {
    const tail = key.slice(prefix.length);
    for (const value of [hexOf(key), hexOf(key).toUpperCase(), mixedCase(hexOf(tail)), tail, `Basic ${base64Of(`x-access-token:${tail}`)}`, base64Of(hexOf(key), 'k')]) {
      assert.equal(headerCarriesSecret([key])(`debug ${value}; end`), true, `${key}: ${value}`);
    }
  }
});

test('redaction, no false positive on a short fragment: a tail under 20 characters is not looked for alone, and a piece of a key\'s tail or of its hex, or its prefix alone, is relayed as the same Buffer (redactBody)', () => {
  const short = 'sk-proj-0123456789abcdefghi';
  for (const text of ['0123456789abcdefghi', hexOf('0123456789abcdefghi')]) {
    const body = Buffer.from(`{"id":"${text}"}`);
    assert.equal(redactBody(body, [short]), body, text);
  }
  for (const { prefix, key } of PREFIXED) {
    const tail = key.slice(prefix.length);
    for (const piece of [prefix, tail.slice(0, -1), tail.slice(1), hexOf(tail).slice(0, -1), hexOf(tail).slice(2).toUpperCase(), hexOf(prefix), `${prefix}${tail.slice(0, 19)}`]) {
      const body = Buffer.from(`{"message":"${piece}"}`);
      assert.equal(redactBody(body, [key]), body, `${key}: ${piece}`);
    }
  }
});

test('rule 7: every secret of a set is looked for, never the forms of another set; the same secrets make one list, once', () => {
  const key = 'sk-proj-' + 'Q'.repeat(40);
  const first = fixedSecretList([key]);
  assert.equal(fixedSecretList([key]), first, 'the same secrets give the same list');
  assert.deepEqual(fixedSecretList([key, 'other-secret-value-0123456789']), [key, 'other-secret-value-0123456789']);
  // Two sets whose joined key is the same: each gets a list of its own secrets.
  const joined = fixedSecretList(['alpha-secret-value-0123456789\u0000beta-secret-value-0123456789']);
  const apart = fixedSecretList(['alpha-secret-value-0123456789', 'beta-secret-value-0123456789']);
  assert.deepEqual(apart, ['alpha-secret-value-0123456789', 'beta-secret-value-0123456789']);
  assert.deepEqual(joined, ['alpha-secret-value-0123456789\u0000beta-secret-value-0123456789']);
  assert.equal(redactBody(Buffer.from('x alpha-secret-value-0123456789 y'), apart).toString(), 'x [REDACTED] y');
  assert.ok(Object.isFrozen(first));
});

test('rule 7: a header value found clean is remembered for its set of secrets only: the same value is still caught for a set whose secret it carries, in any form', () => {
  const first = 'sk-proj-' + 'A1b2C3d4'.repeat(5);
  const second = 'ghp_' + 'Z9y8X7w6'.repeat(5);
  const value = `session=${Buffer.from(`user:${second}`).toString('base64')}; Path=/`;
  const withFirst = headerCarriesSecret([first]);
  assert.equal(withFirst(value), false);
  assert.equal(withFirst(value), false, 'remembered clean for the first set');
  const withSecond = headerCarriesSecret([second]);
  assert.equal(withSecond(value), true, 'the second set finds its secret in the base64 run');
  assert.equal(withSecond(value), true, 'and again: a value that carries a secret is never remembered as clean');
  assert.equal(headerCarriesSecret([first, second])(value), true);
  assert.equal(headerCarriesSecret([first])(`x ${first.toUpperCase()} y`), true);
});
