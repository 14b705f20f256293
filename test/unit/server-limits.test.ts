// The listener's own limits, read back from the node:http server that startListener creates.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { drainAction } from '../../src/http/connections.ts';
import { listenErrorMessage, requestFormError } from '../../src/http/server.ts';
import { startTestListener } from '../support/test-listener.ts';

test('a listener has no total request timeout, but bounds the request head and idle keep-alive connections', async () => {
  const listener = await startTestListener({ timeouts: { headerMs: 1234, keepAliveMs: 5678 } });
  try {
    // Node's 300 s default would cut a long push or a long stream while bytes still move.
    assert.equal(listener.server.requestTimeout, 0);
    assert.equal(listener.server.headersTimeout, 1234);
    assert.equal(listener.server.keepAliveTimeout, 5678);
  } finally {
    await listener.close(0);
  }
});

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

test('a listen address that is in use gives an error naming the flag and what to type instead (listenErrorMessage)', async () => {
  const metrics = listenErrorMessage('metrics-listen', { host: undefined, port: 9464 }, 'EADDRINUSE');
  assert.equal(metrics, '--metrics-listen :9464: the address is already in use (another proxy on this host?); use a free address with --metrics-listen HOST:PORT, or --metrics-listen off to run without the metrics listener');
  // Every listener can be switched off.
  assert.match(listenErrorMessage('git-auth-listen', { host: '::1', port: 8447 }, 'EADDRINUSE'), /, or --git-auth-listen off to run without the git listener$/);
  assert.match(listenErrorMessage('model-gateway-listen', { host: '::1', port: 8450 }, 'EADDRINUSE'), /, or --model-gateway-listen off to run without the model gateway listener$/);
  assert.match(listenErrorMessage('git-auth-listen', { host: '::1', port: 8447 }, 'EADDRINUSE'), /^--git-auth-listen \[::1\]:8447: /);
  assert.match(listenErrorMessage('model-gateway-listen', { host: undefined, port: 80 }, 'EACCES'), /^--model-gateway-listen :80: not allowed to listen there/);
  // And startListener reports it so.
  const first = await startTestListener({ flag: 'metrics-listen' });
  try {
    await assert.rejects(startTestListener({ flag: 'metrics-listen', address: { host: '127.0.0.1', port: first.port } }), {
      message: `--metrics-listen 127.0.0.1:${first.port}: the address is already in use (another proxy on this host?); use a free address with --metrics-listen HOST:PORT, or --metrics-listen off to run without the metrics listener`,
    });
  } finally {
    await first.close(0);
  }
});
