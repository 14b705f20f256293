// A body in hand (a model call's checked JSON) is written upstream in slices of at most 64 KiB,
// the next only after 'drain' (src/http/forward.ts writeInSlices): Node's TLS layer keeps a
// buffer as large as one write for the life of the socket. Checked on a sink that records each
// write and reports a full buffer on demand.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { BODY_SLICE_BYTES, writeInSlices } from '../../src/http/slices.ts';

/** Records writes; `full(n)` says write() reports a full buffer on every n-th write. */
class RecordingSink extends EventEmitter {
  destroyed = false;
  readonly writes: number[] = [];
  ended: number | undefined;
  constructor(private readonly fullEvery: number) {
    super();
  }
  write(chunk: Buffer): boolean {
    assert.equal(this.ended, undefined, 'no write after end()');
    this.writes.push(chunk.length);
    return this.writes.length % this.fullEvery !== 0;
  }
  end(chunk: Buffer): void {
    this.ended = chunk.length;
  }
  destroy(): void {
    this.destroyed = true;
    this.emit('close');
  }
}

test('writeInSlices: a body in hand goes upstream in slices of at most 64 KiB, the next after drain when the buffer is full, the last with end()', () => {
  const body = Buffer.alloc(10 * BODY_SLICE_BYTES + 123, 0x20);
  const sink = new RecordingSink(3);
  let counted = 0;
  writeInSlices(sink, body, (n) => (counted += n));
  assert.deepEqual(sink.writes, [BODY_SLICE_BYTES, BODY_SLICE_BYTES, BODY_SLICE_BYTES], 'stopped at the full buffer');
  assert.equal(sink.listenerCount('drain'), 1);
  for (let i = 0; i < 10 && sink.ended === undefined; i++) sink.emit('drain');
  assert.deepEqual(sink.writes, Array(10).fill(BODY_SLICE_BYTES));
  assert.equal(sink.ended, 123);
  assert.equal(counted, body.length, 'every byte counted once');
  assert.equal(sink.listenerCount('drain'), 0);
});

test('writeInSlices: a body of exactly one slice, or empty, is one end(); a drain after the end writes nothing', () => {
  for (const size of [0, 1, BODY_SLICE_BYTES]) {
    const sink = new RecordingSink(1);
    writeInSlices(sink, Buffer.alloc(size), () => {});
    assert.deepEqual(sink.writes, [], `${size} bytes`);
    assert.equal(sink.ended, size);
    sink.emit('drain');
    assert.deepEqual(sink.writes, []);
  }
});

test('writeInSlices: nothing more is written once the request is destroyed, and the wait for drain is dropped', () => {
  const sink = new RecordingSink(2);
  writeInSlices(sink, Buffer.alloc(8 * BODY_SLICE_BYTES), () => {});
  assert.equal(sink.writes.length, 2);
  sink.destroy();
  assert.equal(sink.listenerCount('drain'), 0, 'no listener left to hold the body');
  sink.emit('drain');
  assert.equal(sink.writes.length, 2);
  assert.equal(sink.ended, undefined);
  // Destroyed before a drain it was not waiting for: the loop stops at the next slice.
  const early = new RecordingSink(1000);
  early.destroyed = true;
  writeInSlices(early, Buffer.alloc(4 * BODY_SLICE_BYTES), () => {});
  assert.deepEqual(early.writes, []);
});
