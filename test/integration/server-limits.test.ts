// The listener's own limits, read back from the node:http server that startListener creates on
// loopback, and a listen address in use reported by startListener as the pure message says
// (listenErrorMessage). The pure rules are test/unit/server-limits.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { listenErrorMessage } from '../../src/http/server.ts';
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
