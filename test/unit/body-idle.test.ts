// watchBodyIdle (src/http/body-idle.ts): a body that stops arriving while the proxy reads it is
// reported once; time the proxy itself does not read (backpressure) never counts against the
// client; an ended body stops the watch.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { watchBodyIdle } from '../../src/http/body-idle.ts';

test('watchBodyIdle: a body read with no byte arriving for its time is reported once', async () => {
  const body = new PassThrough();
  let stalls = 0;
  const stalled = new Promise<void>((resolve) =>
    watchBodyIdle(body, 20, () => {
      stalls++;
      resolve();
    }),
  );
  body.resume();
  body.write('{');
  await stalled;
  await sleep(60); // a second report would come within this
  assert.equal(stalls, 1);
});

test('watchBodyIdle: time the proxy is not reading (a paused body: backpressure) never counts against the client', async () => {
  const body = new PassThrough();
  let stalls = 0;
  watchBodyIdle(body, 20, () => stalls++);
  body.resume();
  body.pause(); // the upstream is slow: we stop reading, so the client cannot send
  await sleep(100);
  body.resume();
  body.end('rest of the body');
  await new Promise((resolve) => body.once('end', resolve));
  await sleep(60);
  assert.equal(stalls, 0);
});

test('watchBodyIdle: a body that ends in time, or a timeout of 0, is never reported', async () => {
  for (const ms of [20, 0]) {
    const body = new PassThrough();
    let stalls = 0;
    watchBodyIdle(body, ms, () => stalls++);
    body.resume();
    body.end('{}');
    await new Promise((resolve) => body.once('end', resolve));
    await sleep(60);
    assert.equal(stalls, 0, `ms=${ms}`);
  }
});
