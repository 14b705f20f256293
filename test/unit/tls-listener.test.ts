// The TLS listener's pure parts: how long a handshake may take, and how often refusals are
// logged. When its certificate, key and client CA bundle are looked at and read again (the file
// source, on a PKI openssl makes): test/integration/tls-file-source.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LogInterval } from '../../src/http/connection-caps.ts';
import { handshakeTimeoutMs } from '../../src/http/tls-listener.ts';

test('TLS handshake bounded: a handshake may take the header timeout, at most 10 s, and 10 s when there is none (handshakeTimeoutMs)', () => {
  assert.equal(handshakeTimeoutMs(2000), 2000);
  assert.equal(handshakeTimeoutMs(10_000), 10_000);
  assert.equal(handshakeTimeoutMs(60_000), 10_000, 'a long header timeout does not lengthen the handshake past 10 s');
  assert.equal(handshakeTimeoutMs(0), 10_000, 'no header timeout: still bounded');
  assert.equal(handshakeTimeoutMs(undefined), 10_000);
});

test('refusal log interval: the first refusal is logged at once, the next within 10 s are summed into the first line after it (LogInterval)', () => {
  const refusals = new LogInterval();
  assert.equal(refusals.note(1000), 1);
  assert.equal(refusals.note(1001), undefined);
  assert.equal(refusals.note(10_999), undefined);
  assert.equal(refusals.note(11_000), 3, 'the line an interval later counts the two kept quiet and itself');
  assert.equal(refusals.note(30_000), 1);
});
