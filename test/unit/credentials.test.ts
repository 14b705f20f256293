import { test } from 'node:test';
import assert from 'node:assert/strict';
import { injectCredential as inject } from '../../src/git/credentials.ts';
import { ERRORS } from '../../src/http/errors.ts';
import { Secret } from '../../src/http/secret-value.ts';
import { sanitizeSecret, type SecretRead } from '../../src/config/secret.ts';
import { revealed } from '../support/secrets.ts';

const ok = (value: string): SecretRead => ({ ok: true, value: new Secret(value) });
/** injectCredential, its Authorization and secrets revealed for comparison. */
const injectCredential = (...args: Parameters<typeof inject>) => revealed(inject(...args));
const MISSING: SecretRead = { ok: false, reason: 'missing' };
const INVALID: SecretRead = { ok: false, reason: 'invalid' };

test('a bearer credential is "Bearer <token>" and its only secret is the token', () => {
  assert.deepEqual(injectCredential('bearer', ok('ghp_abc123'), undefined), {
    ok: true,
    authorization: 'Bearer ghp_abc123',
    secrets: ['ghp_abc123'],
  });
});

test('a bearer credential ignores any username', () => {
  assert.deepEqual(injectCredential('bearer', ok('tok'), ok('alice')), { ok: true, authorization: 'Bearer tok', secrets: ['tok'] });
  assert.deepEqual(injectCredential('bearer', ok('tok'), MISSING), { ok: true, authorization: 'Bearer tok', secrets: ['tok'] });
});

test('a basic credential is "Basic " + base64("<username>:<token>") exactly', () => {
  const cred = injectCredential('basic', ok('s3cr3t-t0ken'), ok('alice'));
  assert.equal(cred.ok, true);
  assert.ok(cred.ok);
  // base64 of "alice:s3cr3t-t0ken", spelled out rather than recomputed
  assert.equal(cred.authorization, 'Basic YWxpY2U6czNjcjN0LXQwa2Vu');
});

test('the secrets of a basic credential are the token and the base64 blob', () => {
  const cred = injectCredential('basic', ok('s3cr3t-t0ken'), ok('alice'));
  assert.ok(cred.ok);
  assert.deepEqual([...cred.secrets].sort(), ['YWxpY2U6czNjcjN0LXQwa2Vu', 's3cr3t-t0ken'].sort());
  assert.ok(!cred.secrets.includes('alice'), 'the username alone is not a secret');
});

test('a basic token may contain a colon: only the username is split on it', () => {
  const cred = injectCredential('basic', ok('a:b'), ok('alice'));
  assert.ok(cred.ok);
  assert.equal(cred.authorization, 'Basic YWxpY2U6YTpi');
});

test('a missing token gives credentialMissing (503) and no Authorization', () => {
  for (const authType of ['bearer', 'basic'] as const) {
    const cred = injectCredential(authType, MISSING, ok('alice'));
    assert.deepEqual(cred, { ok: false, error: ERRORS.credentialMissing }, authType);
    assert.equal(ERRORS.credentialMissing.status, 503);
    assert.ok(!('authorization' in cred));
  }
});

test('an invalid token gives credentialInvalid (503)', () => {
  for (const authType of ['bearer', 'basic'] as const) {
    assert.deepEqual(injectCredential(authType, INVALID, ok('alice')), { ok: false, error: ERRORS.credentialInvalid }, authType);
  }
  assert.equal(ERRORS.credentialInvalid.status, 503);
});

test('a token with an embedded LF is invalid and never used', () => {
  const cred = injectCredential('bearer', sanitizeSecret('ghp_abc\nX-Injected: 1'), undefined);
  assert.deepEqual(cred, { ok: false, error: ERRORS.credentialInvalid });
  assert.ok(!JSON.stringify(cred).includes('ghp_abc'));
});

test('a basic host without a username source gives credentialMissing (503)', () => {
  assert.deepEqual(injectCredential('basic', ok('tok'), undefined), { ok: false, error: ERRORS.credentialMissing });
});

test('a basic host whose username is missing gives credentialMissing and invalid gives credentialInvalid', () => {
  assert.deepEqual(injectCredential('basic', ok('tok'), MISSING), { ok: false, error: ERRORS.credentialMissing });
  assert.deepEqual(injectCredential('basic', ok('tok'), INVALID), { ok: false, error: ERRORS.credentialInvalid });
});

test('a username containing ":" gives credentialInvalid (it would shift the token boundary)', () => {
  for (const user of ['al:ice', ':alice', 'alice:']) {
    assert.deepEqual(injectCredential('basic', ok('tok'), ok(user)), { ok: false, error: ERRORS.credentialInvalid }, user);
  }
});

test('a token problem is reported before a username problem', () => {
  assert.deepEqual(injectCredential('basic', MISSING, INVALID), { ok: false, error: ERRORS.credentialMissing });
  assert.deepEqual(injectCredential('basic', INVALID, MISSING), { ok: false, error: ERRORS.credentialInvalid });
});
