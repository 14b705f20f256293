// The limits store's Redis protocol (RESP2): commands encoded as arrays of bulk strings, replies
// parsed incrementally whatever the chunking, replies past the limits refused. What a server
// that is not Redis, or a broken one, can do to the client: test/integration/resp.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeCommand, parseReply, RespError, RespReader } from '../../src/store/resp.ts';

test('resp: a command is an array of bulk strings, byte lengths counted in UTF-8 (encodeCommand)', () => {
  assert.equal(encodeCommand(['SET', 'k', 'vé', 5]).toString(), '*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nvé\r\n$1\r\n5\r\n');
  // Four-byte characters, and a lone surrogate (written as U+FFFD, three bytes): counted as sent.
  assert.deepEqual(encodeCommand(['a😀', '\ud800']), Buffer.from('*2\r\n$5\r\na😀\r\n$3\r\n\ufffd\r\n', 'utf8'));
});

test('resp: every reply type parses, nested arrays too, and an incomplete reply asks for more bytes (parseReply)', () => {
  const wire = Buffer.from('+OK\r\n-ERR no\r\n:42\r\n$3\r\nabc\r\n$-1\r\n*3\r\n$2\r\nok\r\n:1\r\n*1\r\n+x\r\n');
  const values: unknown[] = [];
  let at = 0;
  for (;;) {
    const r = parseReply(wire, at);
    if (!r) break;
    values.push(r.value);
    at = r.next;
  }
  assert.equal(at, wire.length);
  assert.deepEqual(values.map((v) => (v instanceof RespError ? `error:${v.message}` : v)), ['OK', 'error:ERR no', 42, 'abc', null, ['ok', 1, ['x']]]);
  for (let cut = 1; cut < 12; cut++) assert.equal(parseReply(Buffer.from('*2\r\n$3\r\nabc\r\n:7\r\n').subarray(0, cut)), undefined, `cut at ${cut}`);
});

test('resp: a reply of a type RESP2 does not have is an error, not a guess (parseReply)', () => {
  assert.throws(() => parseReply(Buffer.from('HTTP/1.1 400 Bad Request\r\n')), RespError);
});

// Incremental parsing: a reply is read as its bytes arrive, resuming where the last chunk stopped.
// The wire of every reply type, nested arrays, null and empty ones, and a pipelined pair.
const WIRE = '+OK\r\n-ERR no\r\n:-42\r\n$5\r\nab\r\nc\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n*3\r\n$2\r\nok\r\n:1\r\n*2\r\n+x\r\n$-1\r\n';
const EXPECTED = ['OK', 'error:ERR no', -42, 'ab\r\nc', '', null, null, [], ['ok', 1, ['x', null]]];
const shown = (values: unknown[]) => values.map((v) => (v instanceof RespError ? `error:${v.message}` : v));

test('resp: replies split at every offset, or fed one byte at a time, parse to the same values as whole (RespReader)', () => {
  const wire = Buffer.from(WIRE);
  assert.deepEqual(shown(new RespReader().push(wire)), EXPECTED);
  for (let cut = 0; cut <= wire.length; cut++) {
    const reader = new RespReader();
    const values = [...reader.push(wire.subarray(0, cut)), ...reader.push(wire.subarray(cut))];
    assert.deepEqual(shown(values), EXPECTED, `split at ${cut}`);
  }
  const reader = new RespReader();
  const values: unknown[] = [];
  for (let i = 0; i < wire.length; i++) values.push(...reader.push(wire.subarray(i, i + 1)));
  assert.deepEqual(shown(values), EXPECTED, 'one byte at a time');
});

test('resp: a reply past what the gateway ever asks for is refused as soon as it shows: more than 32 items, arrays nested deeper than 3, a bulk string announced past 16 KiB, a line past 16 KiB; ROLE of a master, three deep, parses (parseReply)', () => {
  for (const [what, wire, message] of [
    ['an array of 300,000 items', '*300000\r\n', /array count 300000 \(at most 32\)/],
    ['arrays nested four deep', '*1\r\n*1\r\n*1\r\n*1\r\n', /arrays nested deeper than 3/],
    ['a bulk string of 512 MiB', '$536870912\r\n', /bulk string length 536870912 \(at most 16384\)/],
    ['a bulk string just past the cap', `$${16 * 1024 - 3}\r\n`, /a reply larger than 16384 bytes/],
    ['a simple string that never ends', `+${'a'.repeat(16 * 1024)}`, /a reply larger than 16384 bytes/],
    ['a length that is not a number', '$1e3\r\n', /malformed bulk string length/],
    ['an integer that is not one', ':0x10\r\n', /malformed integer/],
    ['a bulk string longer than its length', '$1\r\nab\r\n', /longer than its length/],
  ] as const) {
    assert.throws(() => parseReply(Buffer.from(wire)), message, what);
  }
  // ROLE of a master with two replicas (three deep) parses.
  const role = '*3\r\n$6\r\nmaster\r\n:3129659\r\n*2\r\n*3\r\n$9\r\n127.0.0.1\r\n$4\r\n9001\r\n$7\r\n3129242\r\n*3\r\n$9\r\n127.0.0.1\r\n$4\r\n9002\r\n$7\r\n3129543\r\n';
  assert.deepEqual(parseReply(Buffer.from(role))?.value, ['master', 3129659, [['127.0.0.1', '9001', '3129242'], ['127.0.0.1', '9002', '3129543']]]);
  // The largest reply the limits allow still parses: 32 items, nested once, within 16 KiB.
  const largest = `*32\r\n*1\r\n$${16 * 1024 - 400}\r\n${'a'.repeat(16 * 1024 - 400)}\r\n${':1\r\n'.repeat(31)}`;
  assert.equal((parseReply(Buffer.from(largest))?.value as unknown[]).length, 32);
});
