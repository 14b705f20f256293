// The pure rules a git request's steps apply, each tested alone.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ERRORS } from '../../src/http/errors.ts';
import { newExchange } from '../../src/http/forward.ts';
import { WORKLOAD_CHALLENGE } from '../../src/git/access.ts';
import { accessRefusal, gitRevocationRefusal } from '../../src/git/proxy.ts';
import { gitRecord } from '../../src/git/record.ts';

test('accessRefusal: every 401 carries the workload challenge (git then asks its credential helper); a 403 does not', () => {
  assert.deepEqual(accessRefusal({ ok: false, error: ERRORS.workloadTokenMissing, challenge: true, identity: undefined, tokenError: undefined }), { error: ERRORS.workloadTokenMissing, headers: { 'www-authenticate': WORKLOAD_CHALLENGE } });
  assert.deepEqual(accessRefusal({ ok: false, error: ERRORS.repoNotInScope, challenge: false, identity: undefined, tokenError: undefined }), { error: ERRORS.repoNotInScope });
});

test('gitRevocationRefusal: a revoked workload token is 401 with the challenge, naming why; a deny list that cannot be checked is 503 with Retry-After, never "revoked", naming its cause (unreachable, or lost its state)', () => {
  assert.equal(gitRevocationRefusal({ kind: 'ok' }), undefined);
  const revoked = gitRevocationRefusal({ kind: 'revoked', reason: 'its instance was revoked' })!;
  assert.deepEqual([revoked.error.code, revoked.error.message, revoked.headers], [ERRORS.workloadTokenInvalid.code, 'the workload token was refused: its instance was revoked', { 'www-authenticate': WORKLOAD_CHALLENGE }]);
  assert.deepEqual(gitRevocationRefusal({ kind: 'unavailable' }), { error: ERRORS.revocationStoreUnavailable, headers: { 'retry-after': '1' } });
  assert.deepEqual(gitRevocationRefusal({ kind: 'state_lost' }), { error: ERRORS.revocationStoreStateLost, headers: { 'retry-after': '1' } });
});

test('gitRecord: the challenge every git command begins with is recorded without an error; any other refusal with its code; a failure when nothing else said', () => {
  const base = { requestId: 'r', method: 'GET', target: '/h/o/r.git/info/refs?service=git-upload-pack', startedAt: 0, trace: undefined, span: undefined, host: 'h', route: 'info-refs' as const, identity: undefined, tokenError: undefined, challenge: false, exchange: newExchange() };
  const challenge = gitRecord({ ...base, challenge: true }, { status: 401, error: 'workload_token_missing' }, 1);
  assert.deepEqual([challenge.error, challenge.challenge, challenge.path], [undefined, true, '/h/o/r.git/info/refs']);
  assert.equal(gitRecord(base, { status: 403, error: 'repo_not_in_scope' }, 1).error, 'repo_not_in_scope');
  const cut = newExchange();
  cut.failure = 'client_aborted';
  assert.deepEqual([gitRecord({ ...base, exchange: cut }, { status: 0, error: undefined }, 1).error, gitRecord(base, { status: 200, error: undefined }, 1).challenge], ['client_aborted', undefined]);
});
