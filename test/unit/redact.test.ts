import { test } from 'node:test';
import assert from 'node:assert/strict';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { decodeBody, headerCarriesSecret, redactBody, StreamRedactor } from '../../src/http/redact.ts';
import { scrubResponseHeaders } from '../../src/http/headers.ts';

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
  for (const form of forms) assert.equal(headerCarriesSecret(`prefix ${form}; suffix`, [KEY]), true, form);
  assert.equal(headerCarriesSecret('req_0123456789abcdef', [KEY]), false);
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
  const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024));
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
  const head = plain.push(Buffer.from(`{"text":"${'x'.repeat(1000)}`)).toString();
  assert.ok(head.length > 800 && head.length < 1010);
});
