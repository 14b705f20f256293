import { test } from 'node:test';
import assert from 'node:assert/strict';
import { redactSecret } from '../../src/gateway/handler.ts';

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
