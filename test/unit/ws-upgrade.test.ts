// The WebSocket opening handshake's pure parts (src/http/ws-upgrade.ts): a client's upgrade
// checked, the 101 written, an upstream's 101 judged, and which headers never cross a handshake.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { handshakeProblem, switchingProtocolsHead, upgradeAnswerProblem, withoutHandshakeHeaders } from '../../src/http/ws-upgrade.ts';

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
const ACCEPT = 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=';

test('handshakeProblem: a GET asking for websocket, version 13, a key of 16 bytes; anything else is named', () => {
  const ok = { upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': KEY };
  assert.equal(handshakeProblem('GET', ok), undefined);
  assert.equal(handshakeProblem('GET', { ...ok, upgrade: 'WebSocket' }), undefined, 'the token in any case');
  assert.equal(handshakeProblem('POST', ok), 'not_websocket');
  assert.equal(handshakeProblem('GET', { ...ok, upgrade: 'h2c' }), 'not_websocket');
  assert.equal(handshakeProblem('GET', { ...ok, 'sec-websocket-version': '8' }), 'version');
  assert.equal(handshakeProblem('GET', { ...ok, 'sec-websocket-version': undefined }), 'version');
  assert.equal(handshakeProblem('GET', { ...ok, 'sec-websocket-key': 'short' }), 'key');
});

test('switchingProtocolsHead: the accept value for the key, no extension and no subprotocol, and a header value with CR or LF refused', () => {
  const head = switchingProtocolsHead(KEY, ['X-Client-Request-Id', 'abc']);
  assert.equal(head, `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${ACCEPT}\r\nX-Client-Request-Id: abc\r\n\r\n`);
  assert.doesNotMatch(head, /Sec-WebSocket-(Extensions|Protocol)/i);
  assert.throws(() => switchingProtocolsHead(KEY, ['X-Evil', 'a\r\nSet-Cookie: x']), /CR, LF/);
});

test("upgradeAnswerProblem: an upstream's 101 with the wrong accept value, an extension or a subprotocol nobody asked for is refused (RFC 6455 section 4.1)", () => {
  const ok = { upgrade: 'websocket', connection: 'Upgrade', 'sec-websocket-accept': ACCEPT };
  assert.equal(upgradeAnswerProblem(ok, KEY), undefined);
  assert.match(upgradeAnswerProblem({ ...ok, 'sec-websocket-accept': 'x' }, KEY)!, /Accept/);
  assert.match(upgradeAnswerProblem({ ...ok, 'sec-websocket-extensions': 'permessage-deflate' }, KEY)!, /extension/);
  assert.match(upgradeAnswerProblem({ ...ok, 'sec-websocket-protocol': 'chat' }, KEY)!, /subprotocol/);
  assert.match(upgradeAnswerProblem({ ...ok, upgrade: undefined }, KEY)!, /upgrade/);
});

test("withoutHandshakeHeaders: one leg's Sec-WebSocket-*, Upgrade, Connection and framing headers never reach the other", () => {
  const pairs = ['Sec-WebSocket-Accept', 'a', 'sec-websocket-extensions', 'permessage-deflate', 'Upgrade', 'websocket', 'Connection', 'Upgrade', 'Content-Length', '0', 'x-request-id', 'req_1', 'openai-model', 'gpt'];
  assert.deepEqual(withoutHandshakeHeaders(pairs), ['x-request-id', 'req_1', 'openai-model', 'gpt']);
});
