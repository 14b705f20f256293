// The listener's pure rules: which request forms are served, and what a drain does with each
// connection. Its limits read back from a real node:http server, and a listen address in use:
// test/integration/server-limits.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { drainAction } from '../../src/http/connections.ts';
import { requestFormError } from '../../src/http/server.ts';

test('only HTTP/1.1, or HTTP/1.0 with a Host header, is served (requestFormError)', () => {
  assert.equal(requestFormError(1, 1, 'proxy'), undefined);
  assert.equal(requestFormError(1, 0, 'proxy'), undefined);
  assert.equal(requestFormError(1, 0, undefined)?.status, 400);
  assert.equal(requestFormError(0, 9, undefined)?.status, 505);
  assert.equal(requestFormError(2, 0, 'proxy')?.status, 505);
  assert.equal(requestFormError(1, 2, 'proxy')?.status, 505);
});

test('drain: a connection with no request in progress is closed at once, a head still arriving gets a deadline, a request in progress is waited for (drainAction)', () => {
  // Never used: nothing read since it opened.
  assert.equal(drainAction({ inProgress: 0, bytesAtIdle: 0 }, 0), 'close');
  // Idle between requests: nothing read since its last response ended.
  assert.equal(drainAction({ inProgress: 0, bytesAtIdle: 812 }, 812), 'close');
  // Part of a head read, first request or a later one on a keep-alive connection.
  assert.equal(drainAction({ inProgress: 0, bytesAtIdle: 0 }, 40), 'deadline');
  assert.equal(drainAction({ inProgress: 0, bytesAtIdle: 812 }, 850), 'deadline');
  // A request in progress, whatever else was read (a pipelined head behind it).
  assert.equal(drainAction({ inProgress: 1, bytesAtIdle: 0 }, 5000), 'wait');
  assert.equal(drainAction({ inProgress: 2, bytesAtIdle: 100 }, 100), 'wait');
});
