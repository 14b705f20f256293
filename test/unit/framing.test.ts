// Request framing belongs to the forwarding core (src/http/forward.ts), never to the client: the
// rule both listeners share, checked here as pure functions. On the bytes a real TLS upstream
// receives from openUpstream: test/integration/framing.test.ts.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { bodyFraming } from '../../src/http/forward.ts';
import { bodylessMethodError, upgradeRequested } from '../../src/http/server.ts';

const clientBody = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

test('bodyFraming: no body means no Content-Length and no Transfer-Encoding, in any letter case', () => {
  const out = bodyFraming({ 'content-length': '56', 'Transfer-Encoding': 'chunked', 'CONTENT-LENGTH': '3', accept: '*/*' }, null);
  assert.deepEqual(out, { accept: '*/*' });
});

test('bodyFraming: bytes in hand are framed by their exact length, whatever the caller said', () => {
  assert.deepEqual(bodyFraming({ 'content-length': 999, 'transfer-encoding': 'chunked' }, Buffer.from('{"a":1}')), { 'content-length': 7 });
});

test('bodyFraming: a streamed client body keeps the length the client is held to, chunked stays chunked (no length), neither is empty', () => {
  assert.deepEqual(bodyFraming({ 'content-length': '5' }, clientBody({ 'content-length': '1234' })), { 'content-length': '1234' });
  assert.deepEqual(bodyFraming({ 'content-length': '5' }, clientBody({ 'transfer-encoding': 'chunked' })), {});
  assert.deepEqual(bodyFraming({}, clientBody({})), { 'content-length': '0' });
});

test('bodylessMethodError: a GET or HEAD that announces a body is refused; Content-Length: 0 and other methods pass', () => {
  for (const method of ['GET', 'HEAD']) {
    assert.equal(bodylessMethodError(method, '5', undefined)?.code, 'body_not_allowed');
    assert.equal(bodylessMethodError(method, undefined, 'chunked')?.code, 'body_not_allowed');
    assert.equal(bodylessMethodError(method, '0', 'chunked')?.code, 'body_not_allowed');
    assert.equal(bodylessMethodError(method, '0', undefined), undefined);
    assert.equal(bodylessMethodError(method, undefined, undefined), undefined);
  }
  assert.equal(bodylessMethodError('POST', '5', undefined), undefined);
  assert.equal(bodylessMethodError('POST', undefined, 'chunked'), undefined);
  assert.equal(bodylessMethodError('GET', '5', undefined)?.status, 400);
});

test('upgradeRequested: an Upgrade header counts only when Connection names upgrade, in any case and place of its list, as llhttp reads it', () => {
  assert.equal(upgradeRequested('Upgrade', 'websocket'), true);
  assert.equal(upgradeRequested('keep-alive, UPGRADE', 'websocket'), true);
  assert.equal(upgradeRequested('Upgrade, HTTP2-Settings', 'h2c'), true);
  assert.equal(upgradeRequested('keep-alive', 'websocket'), false, 'a bare Upgrade header is a hop-by-hop header, dropped');
  assert.equal(upgradeRequested(undefined, 'websocket'), false);
  assert.equal(upgradeRequested('upgrade', undefined), false);
  assert.equal(upgradeRequested('upgrades, x-upgrade', 'websocket'), false, 'whole tokens only');
});
