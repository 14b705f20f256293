// The guard over a Bedrock event stream (src/gateway/eventstream.ts) against a credential in every
// form: a frame cannot be redacted inside (its length and CRC would break), so one that carries
// the key in any form a client decodes is never relayed and the stream is cut there. Each form
// the security review of 2026-11-25 (finding 10) found relayed has its own test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventStreamFramer, EventStreamGuard } from '../../src/gateway/eventstream.ts';
import { CHUNK_HEADERS, encodeFrame } from '../support/eventstream-frame.ts';
import { redactorOf } from '../support/secrets.ts';
import { bufferWork } from '../support/buffer-work.ts';
import { base64Of, doublePercentOf, htmlReferencesOf } from '../support/secret-forms.ts';

const KEY = 'wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY12';
const escapeAll = (s: string) => [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
const delta = (text: string) => JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } });
const CHUNK = CHUNK_HEADERS;
/** A chunk frame as Bedrock writes it: the event's JSON, base64-encoded, in `bytes`. */
const chunk = (event: string, field = 'bytes', encoding: 'base64' | 'base64url' = 'base64') => encodeFrame(CHUNK, Buffer.from(JSON.stringify({ [field]: Buffer.from(event).toString(encoding), p: 'abcd' })));
const exception = (message: string) => encodeFrame({ ':message-type': 'exception', ':exception-type': 'validationException', ':content-type': 'application/json' }, Buffer.from(JSON.stringify({ message })));
const CLEAN = [chunk(delta('Hello')), chunk(delta(' there'))];

/** What a client gets of `frames` through a guard: the bytes relayed, and whether the stream was cut. */
function relay(frames: readonly Buffer[]): { relayed: Buffer; cut: boolean } {
  const guard = new EventStreamGuard(redactorOf(KEY));
  const out: Buffer[] = [];
  try {
    for (const f of frames) out.push(guard.push(f));
    out.push(guard.end());
    return { relayed: Buffer.concat(out), cut: false };
  } catch (err) {
    assert.match((err as Error).message, /carries a credential/);
    return { relayed: Buffer.concat(out), cut: true };
  }
}

const FORMS: Record<string, () => Buffer> = {
  'the key in a chunk\'s event': () => chunk(delta(`key ${KEY}`)),
  'the key JSON-escaped in a chunk\'s event': () => chunk(delta(`key ${KEY}`).replace(KEY, escapeAll(KEY))),
  'the key in a frame header value': () => encodeFrame({ ...CHUNK, 'x-echo': KEY }, Buffer.from('{}')),
  'the key base64-encoded in a frame header value': () => encodeFrame({ ...CHUNK, 'x-echo': base64Of(KEY, 'Bearer ') }, Buffer.from('{}')),
  'the key base64-encoded (offset 0) in an exception frame\'s message': () => exception(`bad credential ${base64Of(KEY)}`),
  'the key base64-encoded (offset 1) in an exception frame\'s message': () => exception(`bad credential ${base64Of(KEY, 'k')}`),
  'the key base64-encoded (offset 2) in an exception frame\'s message': () => exception(`bad credential ${base64Of(KEY, 'k:')}`),
  'the key base64url-encoded in an exception frame\'s message': () => exception(`bad credential ${base64Of(KEY, 'x', '', 'base64url')}`),
  'the key base64-encoded inside a chunk\'s event': () => chunk(delta(`here: ${base64Of(KEY)}`)),
  'the key base64-encoded twice inside a chunk\'s event': () => chunk(delta(base64Of(base64Of(KEY)))),
  'the key as HTML references inside a chunk\'s event': () => chunk(delta(htmlReferencesOf(KEY))),
  'the key percent-encoded twice inside a chunk\'s event': () => chunk(delta(doublePercentOf(KEY))),
  'the key in a chunk whose bytes are base64url': () => chunk(delta(`x ${KEY}`), 'bytes', 'base64url'),
  'the key in a field named Bytes': () => chunk(delta(`x ${KEY}`), 'Bytes'),
  'the key JSON-escaped, base64-encoded in a field named Bytes': () => chunk(delta(KEY).replace(KEY, escapeAll(KEY)), 'Bytes'),
  'the key JSON-escaped, base64-encoded in a nested field of any name': () => encodeFrame(CHUNK, Buffer.from(JSON.stringify({ outer: [{ data: Buffer.from(`"${escapeAll(KEY)}"`).toString('base64') }] }))),
  'the key\'s hex in upper case in an exception frame\'s message': () => exception(`bad credential ${Buffer.from(KEY).toString('hex').toUpperCase()}`),
  'the key\'s hex inside a chunk\'s event': () => chunk(delta(`debug ${Buffer.from(KEY).toString('hex')}`)),
};

for (const [form, frame] of Object.entries(FORMS)) {
  test(`event stream guard, ${form}: the frame is not relayed, the stream is cut there, and the frames before it pass whole`, () => {
    const bad = frame();
    assert.deepEqual(relay(CLEAN), { relayed: Buffer.concat(CLEAN), cut: false });
    assert.deepEqual(relay([...CLEAN, bad, ...CLEAN]), { relayed: Buffer.concat(CLEAN), cut: true });
  });
}

test('event stream guard, hex and key without its prefix: a frame carrying a prefixed key without its prefix, or its hex, in an exception\'s message or inside a chunk\'s event, is never relayed; a clean frame passes', () => {
  const key = 'sk-ant-api03-Xq7Rk2Lp9VbN4tZc8WdF1hJs6MgY3aEu0oKiQw5PnTxBvCy2HlDr7Gf-_Ue4Sj9AkOm1Iz8WqNb3Rt6YpVc0Ld5Hg2Xs7AA';
  const tail = key.slice('sk-ant-api03-'.length);
  const hex = Buffer.from(tail).toString('hex');
  for (const bad of [exception(`bad key ${tail}`), exception(`bad key ${hex.toUpperCase()}`), chunk(delta(`x ${tail}`)), chunk(delta(`x ${tail}`).replace(tail, escapeAll(tail))), chunk(delta(`x ${hex}`))]) {
    const guard = new EventStreamGuard(redactorOf(key));
    assert.deepEqual(guard.push(CLEAN[0]!), CLEAN[0]);
    assert.throws(() => guard.push(bad), /carries a credential/);
  }
});

test('event stream guard: a frame carrying the key base64-encoded, split at every byte offset across two pushes, is never relayed', () => {
  const wire = Buffer.concat([CLEAN[0]!, exception(`bad credential ${base64Of(KEY, 'k')}`)]);
  for (let cut = 1; cut < wire.length; cut++) {
    const { relayed, cut: wasCut } = relay([wire.subarray(0, cut), wire.subarray(cut)]);
    assert.equal(wasCut, true, `split at ${cut}`);
    assert.ok(relayed.equals(CLEAN[0]!.subarray(0, relayed.length)) && relayed.length <= CLEAN[0]!.length, `split at ${cut}`);
  }
});

test('event stream guard: a base64 field 10,000 levels deep in a payload is decoded and checked (the payload is walked with a stack)', () => {
  const deep = `${'['.repeat(10_000)}${JSON.stringify(Buffer.from(escapeAll(KEY)).toString('base64'))}${']'.repeat(10_000)}`;
  assert.equal(relay([encodeFrame(CHUNK, Buffer.from(deep))]).cut, true);
  const clean = `${'['.repeat(10_000)}"aGVsbG8gdGhlcmUsIG5vIGtleSBoZXJl"${']'.repeat(10_000)}`;
  assert.equal(relay([encodeFrame(CHUNK, Buffer.from(clean))]).cut, false);
});

test('event stream guard and framer: a large frame dripped in small chunks is held as its chunks and joined once, so the work stays linear in its size (a frame near the 1 MiB cap in 32-byte chunks: its bytes copied a few times, not once per chunk), and it is relayed whole and read', () => {
  const frame = chunk(delta('x'.repeat(700_000))); // its base64 brings the frame near the 1 MiB cap
  const guard = new EventStreamGuard(redactorOf(KEY));
  const events: number[] = [];
  const framer = new EventStreamFramer({ event: (data: Buffer) => void events.push(data.length), largeEvent: () => undefined });
  const out: Buffer[] = [];
  // Counted, not timed: copying the held bytes on every chunk would copy about 14 GB here.
  const { copied } = bufferWork(() => {
    for (let at = 0; at < frame.length; at += 32) {
      const piece = frame.subarray(at, at + 32);
      out.push(guard.push(piece));
      framer.push(piece);
    }
    out.push(guard.end());
  });
  assert.ok(copied <= 4 * frame.length, `${copied} bytes copied for a frame of ${frame.length} in 32-byte chunks`);
  assert.deepEqual(Buffer.concat(out), frame, 'relayed whole, byte for byte');
  assert.equal(framer.corrupt, false);
  assert.equal(events.length, 1, 'the framer read the one event');
});
