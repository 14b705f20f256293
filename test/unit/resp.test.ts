// The limits store's Redis protocol (RESP2): commands encoded as arrays of bulk strings, replies
// parsed incrementally whatever the chunking.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeCommand, parseReply, RespError } from '../../src/limits/resp.ts';

test('resp: a command is an array of bulk strings, byte lengths counted in UTF-8 (encodeCommand)', () => {
  assert.equal(encodeCommand(['SET', 'k', 'vé', 5]).toString(), '*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nvé\r\n$1\r\n5\r\n');
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
