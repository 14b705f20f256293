// The WebSocket framing of src/http/ws-frames.ts, pure: the reader against a conformance table
// after the Autobahn test suite's cases (its section numbers in the names: 1 framing, 2 pings and
// pongs, 3 reserved bits, 4 opcodes, 5 fragmentation, 6 UTF-8, 7 close, 9 limits), each fed
// whole and split at every offset; the writers; the handshake's key and accept value. Frames are
// built by test/support/ws-wire.ts, written apart from the code under test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acceptFor, closeCodeAllowed, closePayload, encodeFrame, FrameReader, keyWellFormed, readClose, unfinishedTail, Utf8Check, type Violation } from '../../src/http/ws-frames.ts';
import { fuzzSeed, mulberry32 } from '../support/prng.ts';
import { closeBody, frame, FrameSplitter, OP } from '../support/ws-wire.ts';

const LIMIT = 70_000;

/** What a reader handed on: whole messages (kind and text), control frames, and the violation that stopped it. */
interface Read {
  messages: string[];
  controls: string[];
  violation: Violation | undefined;
}

function read(bytes: Buffer, opts: { masked?: boolean; limit?: number; splits?: number[] } = {}): Read {
  const out: Read = { messages: [], controls: [], violation: undefined };
  let parts: Buffer[] = [];
  let kind = '';
  const reader = new FrameReader(opts.masked ?? true, opts.limit ?? LIMIT, {
    data: (piece, text, first, last) => {
      if (first) {
        parts = [];
        kind = text ? 'text' : 'binary';
      }
      parts.push(Buffer.from(piece));
      if (last) out.messages.push(`${kind}:${Buffer.concat(parts).toString(kind === 'text' ? 'utf8' : 'hex')}`);
    },
    control: (opcode, payload) => out.controls.push(`${opcode}:${payload.toString('hex')}`),
  });
  // A copy: the reader unmasks in place.
  const copy = Buffer.from(bytes);
  const cuts = [0, ...(opts.splits ?? []), copy.length];
  for (let i = 0; i + 1 < cuts.length && out.violation === undefined; i++) out.violation = reader.push(copy.subarray(cuts[i], cuts[i + 1]));
  return out;
}

/** The same result whole and split in two at every offset (and byte by byte). */
function readEverySplit(bytes: Buffer, opts: { masked?: boolean; limit?: number } = {}): Read {
  const whole = read(bytes, opts);
  for (let at = 1; at < bytes.length; at++) assert.deepEqual(read(bytes, { ...opts, splits: [at] }), whole, `split at ${at}`);
  if (bytes.length < 400) assert.deepEqual(read(bytes, { ...opts, splits: Array.from({ length: bytes.length - 1 }, (_, i) => i + 1) }), whole, 'byte by byte');
  return whole;
}

const c = (spec: Parameters<typeof frame>[0]) => frame({ mask: true, ...spec });
const text = (s: string, fin = true) => c({ opcode: OP.text, payload: s, fin });
const cont = (s: string | Buffer, fin = true) => c({ opcode: OP.cont, payload: s, fin });

type Case = { name: string; bytes: Buffer; messages?: string[]; controls?: string[]; violation?: [number, string]; masked?: boolean; limit?: number };

const CASES: Case[] = [
  // 1: framing, every length form
  { name: '1.1.1 empty text message', bytes: text(''), messages: ['text:'] },
  ...[125, 126, 127, 128, 65535, 65536].map((n) => ({ name: `1.1 text of ${n} bytes`, bytes: text('*'.repeat(n)), messages: [`text:${'*'.repeat(n)}`] })),
  { name: '1.2.1 binary message', bytes: c({ opcode: OP.binary, payload: Buffer.from([0, 255, 1]) }), messages: ['binary:00ff01'] },
  { name: '1.x a 16-bit length form holding a short payload is read (no minimal-form rule)', bytes: c({ opcode: OP.text, payload: 'hi', lengthForm: 16 }), messages: ['text:hi'] },
  // 2: pings and pongs
  { name: '2.1 ping without payload', bytes: c({ opcode: OP.ping }), controls: ['9:'] },
  { name: '2.3 ping with 125 bytes', bytes: c({ opcode: OP.ping, payload: 'p'.repeat(125) }), controls: [`9:${Buffer.from('p'.repeat(125)).toString('hex')}`] },
  { name: '2.5 ping of 126 bytes (a control frame over 125)', bytes: c({ opcode: OP.ping, payload: 'p'.repeat(126) }), violation: [1002, 'control_too_long'] },
  { name: '2.6 unsolicited pong', bytes: c({ opcode: OP.pong, payload: 'x' }), controls: ['10:78'] },
  // 3: reserved bits (no extension is negotiated)
  ...[1, 2, 3, 4, 5, 6, 7].map((rsv) => ({ name: `3.${rsv} reserved bits ${rsv}`, bytes: c({ opcode: OP.text, payload: 'x', rsv }), violation: [1002, 'reserved_bits'] as [number, string] })),
  // 4: opcodes RFC 6455 does not define
  ...[3, 4, 5, 6, 7, 11, 12, 13, 14, 15].map((opcode) => ({ name: `4 opcode ${opcode}`, bytes: c({ opcode, payload: 'x' }), violation: [1002, 'unknown_opcode'] as [number, string] })),
  // 5: fragmentation
  { name: '5.1 fragmented ping', bytes: c({ opcode: OP.ping, payload: 'a', fin: false }), violation: [1002, 'fragmented_control'] },
  { name: '5.2 fragmented pong', bytes: c({ opcode: OP.pong, payload: 'a', fin: false }), violation: [1002, 'fragmented_control'] },
  { name: '5.3 text in two fragments', bytes: Buffer.concat([text('Hello, ', false), cont('world')]), messages: ['text:Hello, world'] },
  { name: '5.6 text in fragments with a ping between them', bytes: Buffer.concat([text('frag1', false), c({ opcode: OP.ping, payload: 'ping' }), cont('frag2')]), messages: ['text:frag1frag2'], controls: ['9:70696e67'] },
  { name: '5.9 continuation with no message begun', bytes: cont('x'), violation: [1002, 'continuation_without_start'] },
  { name: '5.10 a new message while one is in fragments', bytes: Buffer.concat([text('a', false), text('b')]), violation: [1002, 'message_interleaved'] },
  { name: '5.17 empty fragments around a payload', bytes: Buffer.concat([text('', false), cont('', false), cont('x', false), cont('')]), messages: ['text:x'] },
  // 6: UTF-8
  { name: '6.2 κόσμε split inside a character across fragments', bytes: Buffer.concat([c({ opcode: OP.text, payload: Buffer.from([0xce, 0xba, 0xe1]), fin: false }), cont(Buffer.from([0xbd, 0xb9, 0xcf, 0x83, 0xce, 0xbc, 0xce, 0xb5]))]), messages: [`text:${Buffer.from('cebae1bdb9cf83cebcceb5', 'hex').toString('utf8')}`] },
  { name: '6.2.3 a character split across fragments', bytes: Buffer.concat([c({ opcode: OP.text, payload: Buffer.from([0xe2, 0x82]), fin: false }), cont(Buffer.from([0xac]))]), messages: ['text:€'] },
  { name: '6.3 overlong form C0 80', bytes: c({ opcode: OP.text, payload: Buffer.from([0xc0, 0x80]) }), violation: [1007, 'invalid_utf8'] },
  { name: '6.3 overlong form E0 80 80', bytes: c({ opcode: OP.text, payload: Buffer.from([0xe0, 0x80, 0x80]) }), violation: [1007, 'invalid_utf8'] },
  { name: '6.19 a surrogate ED A0 80', bytes: c({ opcode: OP.text, payload: Buffer.from([0xed, 0xa0, 0x80]) }), violation: [1007, 'invalid_utf8'] },
  { name: '6.x past U+10FFFF (F4 90 80 80)', bytes: c({ opcode: OP.text, payload: Buffer.from([0xf4, 0x90, 0x80, 0x80]) }), violation: [1007, 'invalid_utf8'] },
  { name: '6.x bytes FE and FF', bytes: c({ opcode: OP.text, payload: Buffer.from([0x41, 0xfe, 0xff]) }), violation: [1007, 'invalid_utf8'] },
  { name: '6.x a message that ends inside a character', bytes: c({ opcode: OP.text, payload: Buffer.from([0x41, 0xe2, 0x82]) }), violation: [1007, 'invalid_utf8'] },
  { name: '6.4 fail fast: an invalid first fragment refused before the rest arrives', bytes: c({ opcode: OP.text, payload: Buffer.from([0xce, 0xba, 0xff]), fin: false }), violation: [1007, 'invalid_utf8'] },
  { name: '6.x a binary message is not UTF-8 checked', bytes: c({ opcode: OP.binary, payload: Buffer.from([0xff]) }), messages: ['binary:ff'] },
  // 7: close
  { name: '7.3.1 close without payload', bytes: c({ opcode: OP.close }), controls: ['8:'] },
  { name: '7.3.2 close with one byte of payload', bytes: c({ opcode: OP.close, payload: Buffer.from([0x03]) }), violation: [1002, 'bad_close_frame'] },
  { name: '7.3.6 close with a reason over 123 bytes (a control frame over 125)', bytes: c({ opcode: OP.close, payload: closeBody(1000, 'r'.repeat(124)) }), violation: [1002, 'control_too_long'] },
  ...[1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999].map((code) => ({ name: `7.7 close code ${code} is accepted`, bytes: c({ opcode: OP.close, payload: closeBody(code, 'ok') }), controls: [`8:${closeBody(code, 'ok').toString('hex')}`] })),
  ...[0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535].map((code) => ({ name: `7.9 close code ${code} is refused`, bytes: c({ opcode: OP.close, payload: closeBody(code) }), violation: [1002, 'bad_close_frame'] as [number, string] })),
  { name: '7.5.1 close reason that is not UTF-8', bytes: c({ opcode: OP.close, payload: Buffer.concat([closeBody(1000), Buffer.from([0xce, 0xba, 0xff])]) }), violation: [1007, 'invalid_utf8'] },
  // Masking (RFC 6455 section 5.1): a server refuses an unmasked client frame, a client a masked server frame.
  { name: 'an unmasked frame from a client', bytes: frame({ opcode: OP.text, payload: 'x' }), violation: [1002, 'unmasked_frame'] },
  { name: 'a masked frame from a server', bytes: frame({ opcode: OP.text, payload: 'x', mask: true }), masked: false, violation: [1002, 'masked_frame'] },
  { name: 'an unmasked frame from a server', bytes: frame({ opcode: OP.text, payload: 'x' }), masked: false, messages: ['text:x'] },
  // 9: limits
  { name: '9 a frame announced over the message limit is refused at its head (no payload sent)', bytes: c({ opcode: OP.text, announce: LIMIT + 1 }), violation: [1009, 'too_large'] },
  { name: '9 fragments that pass the limit together', bytes: Buffer.concat([text('x'.repeat(40_000), false), cont('y'.repeat(40_000))]), violation: [1009, 'too_large'] },
  { name: '9 a 64-bit length with its top bit set', bytes: Buffer.concat([Buffer.from([0x81, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0]), Buffer.alloc(4)]), violation: [1009, 'too_large'] },
  { name: '9 a message of exactly the limit', bytes: text('z'.repeat(LIMIT)), messages: [`text:${'z'.repeat(LIMIT)}`] },
];

const outcome = (k: Case) => (k.violation ? `refused with ${k.violation[0]} ${k.violation[1]}` : 'read');

for (const k of CASES) {
  test(`frame reader (Autobahn ${k.name}): ${outcome(k)}, the same at every split`, () => {
    const r = k.bytes.length > 2000 ? read(k.bytes, k) : readEverySplit(k.bytes, k);
    assert.deepEqual(r.violation === undefined ? undefined : [r.violation.code, r.violation.reason], k.violation);
    if (!k.violation) {
      assert.deepEqual(r.messages, k.messages ?? []);
      assert.deepEqual(r.controls, k.controls ?? []);
    }
  });
}

test('frame reader: a refused reader stays refused, whatever comes after', () => {
  const reader = new FrameReader(true, LIMIT, { data: () => assert.fail('nothing is handed on'), control: () => assert.fail('nothing is handed on') });
  const first = reader.push(frame({ opcode: OP.text, payload: 'unmasked' }));
  assert.equal(first?.reason, 'unmasked_frame');
  assert.equal(reader.push(text('fine')), first);
});

test('frame reader: a message is handed on in pieces as its payload arrives, never buffered by the reader', () => {
  const pieces: number[] = [];
  const reader = new FrameReader(true, LIMIT, { data: (piece) => pieces.push(piece.length), control: () => {} });
  const bytes = text('x'.repeat(30_000));
  for (let at = 0; at < bytes.length; at += 1000) reader.push(Buffer.from(bytes.subarray(at, at + 1000)));
  assert.ok(pieces.length > 20, `${pieces.length} pieces`);
  assert.equal(pieces.reduce((a, b) => a + b, 0), 30_000);
});

test('encodeFrame: a client frame is masked with a fresh key (its payload left as it was), a server frame is not; both read back', () => {
  const payload = Buffer.from('hello mask');
  const [head, body] = encodeFrame(1, payload, true, true);
  assert.equal(head![1]! & 0x80, 0x80);
  assert.notDeepEqual(body, payload);
  assert.equal(payload.toString(), 'hello mask', 'the payload is copied, not masked in place');
  const [head2] = encodeFrame(1, payload, true, true);
  assert.notDeepEqual(head!.subarray(2, 6), head2!.subarray(2, 6), 'a key per frame');
  for (const masked of [true, false]) {
    for (const n of [0, 5, 125, 126, 65535, 65536]) {
      const bytes = Buffer.concat(encodeFrame(2, Buffer.alloc(n, 7), true, masked));
      const [f] = new FrameSplitter().push(bytes);
      assert.deepEqual([f!.opcode, f!.masked, f!.payload.length, f!.fin], [2, masked, n, true], `${n} bytes, masked ${masked}`);
      assert.ok(f!.payload.every((b) => b === 7));
    }
  }
  const [notLast] = encodeFrame(0, Buffer.from('x'), false, false);
  assert.equal(notLast![0], 0x00, 'a continuation that is not the last fragment');
});

test('the handshake: the accept value of RFC 6455 section 1.3, and a key must be 16 bytes of base64', () => {
  assert.equal(acceptFor('dGhlIHNhbXBsZSBub25jZQ=='), 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
  assert.equal(keyWellFormed('dGhlIHNhbXBsZSBub25jZQ=='), true);
  for (const bad of [undefined, '', 'dGhlIHNhbXBsZSBub25jZQ', 'dGhlIHNhbXBsZSBub25jZQ===', 'dGhlIHNhbXBsZSBub25jZR==', 'aGVsbG8=', 'dGhlIHNhbXBsZSBub25jZQ==\r\nX: y']) assert.equal(keyWellFormed(bad), false, String(bad));
});

test('close frames: which codes a peer may send, and a reason cut to what a control frame holds', () => {
  assert.equal(closeCodeAllowed(1000), true);
  assert.equal(closeCodeAllowed(1005), false);
  assert.deepEqual(readClose(Buffer.alloc(0)), { ok: true, code: undefined, reason: '' });
  assert.deepEqual(readClose(closeBody(4001, 'bye')), { ok: true, code: 4001, reason: 'bye' });
  const long = closePayload(1001, 'é'.repeat(100));
  assert.ok(long.length <= 125);
  assert.equal(long.readUInt16BE(0), 1001);
  assert.equal(readClose(long).ok, true);
});

const SEED = fuzzSeed(0x0ff8_0d1e);

test(`Utf8Check agrees with the WHATWG decoder on random byte strings split anywhere (seed ${SEED})`, () => {
  const rng = mulberry32(SEED);
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const alphabet = [0x41, 0x7f, 0x80, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff, 0x9f, 0xa0, 0x8f, 0x90];
  for (let n = 0; n < 20_000; n++) {
    const bytes = Buffer.from(Array.from({ length: rng.between(0, 8) }, () => rng.pick(alphabet)));
    let expected = true;
    try {
      decoder.decode(bytes);
    } catch {
      expected = false;
    }
    const check = new Utf8Check();
    const at = rng.int(bytes.length + 1);
    const got = check.push(bytes.subarray(0, at)) && check.push(bytes.subarray(at)) && check.end();
    assert.equal(got, expected, bytes.toString('hex'));
  }
});

test(`Utf8Check agrees with the WHATWG decoder on longer byte strings cut into up to five pieces, mostly inside characters (seed ${SEED})`, () => {
  const rng = mulberry32(SEED ^ 0x5eed);
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const alphabet = [0x41, 0x7f, 0x80, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff, 0x9f, 0xa0, 0x8f, 0x90];
  const characters = ['a', 'é', '€', '\u{1F600}', '\u{10FFFF}', '\uD7FF', '\uE000'].map((c) => [...Buffer.from(c)]);
  for (let n = 0; n < 20_000; n++) {
    // Mostly valid text with a wrong byte now and then, so that the cuts fall inside characters.
    const bytes = Buffer.from(Array.from({ length: rng.between(1, 12) }, () => (rng.int(8) === 0 ? [rng.pick(alphabet)] : rng.pick(characters))).flat());
    let expected = true;
    try {
      decoder.decode(bytes);
    } catch {
      expected = false;
    }
    const cuts = Array.from({ length: rng.int(5) }, () => rng.int(bytes.length + 1)).sort((a, b) => a - b);
    const check = new Utf8Check();
    let got = true;
    let from = 0;
    for (const cut of [...cuts, bytes.length]) {
      got &&= check.push(bytes.subarray(from, cut));
      from = cut;
    }
    got &&= check.end();
    assert.equal(got, expected, `${bytes.toString('hex')} cut at ${cuts.join(',')}`);
  }
});

test('unfinishedTail: where a character cut short by the end of a piece begins; the end when the last one is whole', () => {
  const hex = (s: string) => Buffer.from(s.replace(/ /g, ''), 'hex');
  assert.equal(unfinishedTail(hex('41 42'), 0), 2);
  assert.equal(unfinishedTail(hex('41 c3'), 0), 1);
  assert.equal(unfinishedTail(hex('41 c3 a9'), 0), 3);
  assert.equal(unfinishedTail(hex('41 e2 82'), 0), 1);
  assert.equal(unfinishedTail(hex('f0 9f 98'), 0), 0);
  assert.equal(unfinishedTail(hex('f0 9f 98 80'), 0), 4);
  assert.equal(unfinishedTail(hex('f0 9f 98'), 1), 3, 'never before `from`');
});
