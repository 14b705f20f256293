// The count of request-body bytes the process holds at once (src/http/held-bodies.ts,
// --max-held-request-bytes, SECURITY rule 100): what a call takes, when it is refused, and that
// it gives back exactly what it took, once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HeldBodies } from '../../src/http/held-bodies.ts';

test('request bodies held under one cap: a declared length is held whole before a byte is read, and one that would pass the cap is refused with nothing taken (HeldBodies)', () => {
  const held = new HeldBodies(100);
  const a = held.open();
  assert.equal(a.holdUpTo(60), true);
  assert.deepEqual([held.held, a.bytes], [60, 60]);
  const b = held.open();
  assert.equal(b.holdUpTo(41), false, '60 + 41 passes 100');
  assert.deepEqual([held.held, b.bytes], [60, 0], 'a refused hold takes nothing');
  assert.equal(b.holdUpTo(40), true, 'exactly up to the cap fits');
  assert.equal(held.held, 100);
  assert.equal(held.open().holdUpTo(1), false, 'a full cap refuses a single byte');
  assert.equal(held.open().holdUpTo(0), true, 'an empty body holds nothing and always fits');
});

test('request bodies held under one cap: a chunked body grows as it arrives, never shrinks, and is refused at the chunk that would pass the cap (BodyHold.holdUpTo)', () => {
  const held = new HeldBodies(100);
  const other = held.open();
  other.holdUpTo(30);
  const chunked = held.open();
  for (const size of [16, 32, 64]) assert.equal(chunked.holdUpTo(size), true, `${size} bytes read`);
  assert.deepEqual([held.held, chunked.bytes], [94, 64]);
  assert.equal(chunked.holdUpTo(50), true, 'a smaller total holds what it held');
  assert.deepEqual([held.held, chunked.bytes], [94, 64]);
  assert.equal(chunked.holdUpTo(71), false, 'the chunk that would take 30 + 71 past 100');
  assert.deepEqual([held.held, chunked.bytes], [94, 64], 'nothing of the refused chunk is taken');
  other.release();
  assert.equal(chunked.holdUpTo(71), true, 'room again once another call gave its bytes back');
  assert.equal(held.held, 71);
});

test('request bodies held under one cap: a hold gives back what it took exactly once, however often it is released, and takes nothing after (BodyHold.release)', () => {
  const held = new HeldBodies(100);
  const a = held.open();
  const b = held.open();
  a.holdUpTo(40);
  b.holdUpTo(50);
  a.release();
  assert.deepEqual([held.held, a.bytes], [50, 0]);
  a.release(); // the answer began (RequestBody.release), then the call finished (GatewayCall.complete)
  assert.equal(held.held, 50, 'a second release gives nothing back: the others keep what they hold');
  assert.equal(a.holdUpTo(10), false, 'a released hold takes nothing more');
  assert.equal(held.held, 50);
  b.release();
  b.release();
  assert.equal(held.held, 0);
  const never = held.open();
  never.release(); // a call refused before its body: nothing taken, nothing given back
  assert.equal(held.held, 0);
});
