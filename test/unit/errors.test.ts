import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  classifyUpstreamError,
  ERRORS,
  errorForUpstreamFailure,
  UpstreamError,
  type UpstreamFailure,
} from '../../src/http/errors.ts';

const withCode = (code: unknown): Error => Object.assign(new Error('boom'), { code });

test('classifyUpstreamError maps each transport error code to its failure kind', () => {
  const cases: [string, UpstreamFailure][] = [
    ['ECONNREFUSED', 'connect_refused'],
    ['EHOSTUNREACH', 'connect_refused'],
    ['ENETUNREACH', 'connect_refused'],
    ['EADDRNOTAVAIL', 'connect_refused'],
    ['ENOTFOUND', 'dns'],
    ['EAI_AGAIN', 'dns'],
    ['ECONNRESET', 'reset'],
    ['EPIPE', 'reset'],
    ['ECONNABORTED', 'reset'],
    ['ERR_STREAM_PREMATURE_CLOSE', 'reset'],
    ['ETIMEDOUT', 'connect_timeout'],
    ['HPE_INVALID_CONSTANT', 'protocol'],
    ['HPE_INVALID_HEADER_TOKEN', 'protocol'],
    ['HPE_HEADER_OVERFLOW', 'protocol'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'tls'],
    ['ERR_TLS_HANDSHAKE_TIMEOUT', 'tls'],
    ['ERR_SSL_WRONG_VERSION_NUMBER', 'tls'],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'tls'],
    ['UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'tls'],
    ['CERT_HAS_EXPIRED', 'tls'],
    ['CERT_NOT_YET_VALID', 'tls'],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', 'tls'],
    ['SELF_SIGNED_CERT_IN_CHAIN', 'tls'],
    ['EACCES', 'other'],
    ['ERR_SOMETHING_NEW', 'other'],
    ['', 'other'],
  ];
  for (const [code, kind] of cases) assert.equal(classifyUpstreamError(withCode(code)), kind, code);
});

test('an error without a string code is classified as other', () => {
  const cases: unknown[] = [new Error('no code'), withCode(111), withCode(undefined), withCode(null), null, undefined, 'ECONNREFUSED', 42, {}];
  for (const err of cases) assert.equal(classifyUpstreamError(err), 'other', String(err));
});

test('a plain object with a code is classified by its code', () => {
  assert.equal(classifyUpstreamError({ code: 'ECONNREFUSED' }), 'connect_refused');
});

test('an UpstreamError is classified by its kind, not by the code of its cause', () => {
  const kinds: UpstreamFailure[] = ['connect_refused', 'dns', 'tls', 'reset', 'connect_timeout', 'idle_timeout', 'protocol', 'other'];
  for (const kind of kinds) {
    const err = new UpstreamError(kind, { cause: withCode('ECONNREFUSED') });
    assert.equal(classifyUpstreamError(err), kind);
  }
});

test('UpstreamError keeps its cause for the log but does not put the cause text in its message', () => {
  const cause = withCode('ECONNREFUSED');
  cause.message = 'connect ECONNREFUSED 10.1.2.3:443 token=ghp_secret';
  const err = new UpstreamError('connect_refused', { cause });
  assert.ok(err instanceof Error);
  assert.equal(err.name, 'UpstreamError');
  assert.equal(err.kind, 'connect_refused');
  assert.equal(err.cause, cause);
  assert.equal(err.message, 'upstream connect_refused');
});

test('upstream timeouts give 504 and every other upstream failure gives 502', () => {
  const cases: [UpstreamFailure, (typeof ERRORS)[keyof typeof ERRORS], number][] = [
    ['connect_timeout', ERRORS.upstreamTimeout, 504],
    ['idle_timeout', ERRORS.upstreamTimeout, 504],
    ['tls', ERRORS.upstreamTls, 502],
    ['protocol', ERRORS.upstreamProtocol, 502],
    ['connect_refused', ERRORS.upstreamUnreachable, 502],
    ['dns', ERRORS.upstreamUnreachable, 502],
    ['reset', ERRORS.upstreamUnreachable, 502],
    ['other', ERRORS.upstreamUnreachable, 502],
  ];
  for (const [kind, error, status] of cases) {
    const got = errorForUpstreamFailure(kind);
    assert.equal(got, error, kind);
    assert.equal(got.status, status, kind);
  }
});

test('a transport error code leads end to end to the right client status', () => {
  const status = (code: string) => errorForUpstreamFailure(classifyUpstreamError(withCode(code))).status;
  assert.equal(status('ETIMEDOUT'), 504);
  assert.equal(status('ECONNREFUSED'), 502);
  assert.equal(status('DEPTH_ZERO_SELF_SIGNED_CERT'), 502);
  assert.equal(errorForUpstreamFailure(classifyUpstreamError(withCode('DEPTH_ZERO_SELF_SIGNED_CERT'))).code, 'upstream_tls');
});

test('every ERRORS entry has an error status (400-599) and a fixed message without placeholders', () => {
  const entries = Object.entries(ERRORS);
  assert.ok(entries.length > 0);
  for (const [name, e] of entries) {
    assert.ok(Number.isInteger(e.status) && e.status >= 400 && e.status <= 599, `${name}: status ${e.status}`);
    assert.ok(e.message.length > 0, name);
    assert.ok(!e.message.includes('{'), `${name}: message contains "{"`);
    assert.ok(!e.message.includes('%s'), `${name}: message contains "%s"`);
    assert.ok(!/[\r\n]/.test(e.message), `${name}: message spans lines`);
  }
});

test('every ERRORS entry has a unique snake_case code', () => {
  const codes = Object.values(ERRORS).map((e) => e.code);
  for (const code of codes) assert.match(code, /^[a-z]+(?:_[a-z]+)*$/);
  assert.equal(new Set(codes).size, codes.length);
});

test('ERRORS entries are frozen', () => {
  for (const [name, e] of Object.entries(ERRORS)) {
    assert.ok(Object.isFrozen(e), name);
    assert.throws(() => {
      (e as { status: number }).status = 200;
    }, TypeError);
  }
});

test('the spec statuses: bare path 400, unregistered host 403, missing credential 503', () => {
  assert.equal(ERRORS.barePath.status, 400);
  assert.equal(ERRORS.hostNotRegistered.status, 403);
  assert.equal(ERRORS.pathRejected.status, 403);
  assert.equal(ERRORS.credentialMissing.status, 503);
});
