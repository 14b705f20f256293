// How a listener says it authenticates its callers, on its `listening` line and to the start-up
// warnings: a client certificate first, then tokens, else nobody (network-policy mode).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KeyRing } from '../../src/auth/jwt.ts';
import { listenerAuthentication } from '../../src/run/keys.ts';

const noKeys = { ring: (): KeyRing => ({ byKid: new Map(), unnamed: undefined }) };

test('listener authentication: mutual TLS, then tokens (own keys or service accounts), else network-policy; only the last is unauthenticated', () => {
  assert.deepEqual(listenerAuthentication('plain', undefined, undefined), { mode: 'network-policy', authenticated: false, fields: { tls: 'plain' } });
  assert.deepEqual(listenerAuthentication('tls', undefined, 'https://issuer.example'), { mode: 'jwt', authenticated: true, fields: { service_account_issuer: 'https://issuer.example', tls: 'tls' } });
  const both = listenerAuthentication('mutual-tls', noKeys, undefined);
  assert.equal(both.mode, 'mutual-tls');
  assert.equal(both.authenticated, true);
  assert.ok('keys' in both.fields, 'the key ids are listed beside the certificate mode');
});
