import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseRevocations, revokedReason } from '../../src/auth/revocations.ts';

test('revocations: an entry names one run, instance or token until a time; anything else is refused (parseRevocations)', () => {
  assert.deepEqual(parseRevocations('{"revoked":[{"run_id":"r1","until":100},{"token_id":"t","until":5}]}'), [{ run_id: 'r1', until: 100 }, { token_id: 't', until: 5 }]);
  for (const bad of ['[]', '{"revoked":[{"run_id":"r"}]}', '{"revoked":[{"run_id":"r","instance_id":"i","until":1}]}', '{"revoked":[{"run_id":1,"until":1}]}', '{"revoked":[{"until":1}]}']) assert.throws(() => parseRevocations(bad), Error, bad);
});

test('revocations: a token is refused while an entry names its run, its instance or its own id, until the entry ends (revokedReason)', () => {
  const entries = [{ run_id: 'run-1', until: 100 }, { instance_id: 'bot-2', until: 100 }, { token_id: 'tok-3', until: 100 }];
  assert.equal(revokedReason(entries, { instanceId: 'bot-9', workflow: 'w', runId: 'run-1' }, 50), 'its run was revoked');
  assert.equal(revokedReason(entries, { instanceId: 'bot-2', workflow: 'w', runId: 'run-9' }, 50), 'its instance was revoked');
  assert.equal(revokedReason(entries, { instanceId: 'bot-9', workflow: 'w', runId: 'run-9', tokenId: 'tok-3' }, 50), 'the token was revoked');
  assert.equal(revokedReason(entries, { instanceId: 'bot-9', workflow: 'w', runId: 'run-9', tokenId: 'tok-4' }, 50), undefined);
  assert.equal(revokedReason(entries, { instanceId: 'bot-9', workflow: 'w', runId: 'run-1' }, 101), undefined, 'an ended entry no longer counts (no token it named can still be valid)');
});
