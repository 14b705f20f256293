// The readers that read a file again only when it changed (src/config/file-stamp.ts) see a rewrite
// that keeps the inode, the size and the modification time: the kernel's change time moved.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { revocationList } from '../../src/auth/revocations.ts';
import { fileSecret } from '../../src/config/secret.ts';
import { rewriteKeepingTimes } from '../support/file-times.ts';
import { revealed } from '../support/secrets.ts';

const dir = mkdtempSync(join(tmpdir(), 'file-stamp-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A whole second, which utimes sets exactly: the times a file is given and given back. */
const TIMES = 1_700_000_000;

/** Writes `file` with its times set to TIMES. */
function writeWithTimes(file: string, text: string): void {
  writeFileSync(file, text);
  utimesSync(file, TIMES, TIMES);
}

test('file stamp: a file secret rewritten with the same size and its modification time put back is read again (fileSecret)', () => {
  const file = join(dir, 'secret');
  writeWithTimes(file, 'first-secret-value-0123456789');
  const secret = fileSecret(file);
  assert.deepEqual(revealed(secret.read()), { ok: true, value: 'first-secret-value-0123456789' });
  rewriteKeepingTimes(file, 'other-secret-value-0123456789', TIMES);
  assert.deepEqual(revealed(secret.read()), { ok: true, value: 'other-secret-value-0123456789' });
});

test('file stamp: a revocation list rewritten with the same size and its modification time put back is read again (revocationList)', () => {
  const file = join(dir, 'revoked.json');
  const list = (runId: string) => JSON.stringify({ revoked: [{ run_id: runId, until: 4_000_000_000 }] });
  writeWithTimes(file, list('run-a'));
  const revocations = revocationList(file, (message) => assert.fail(message));
  const who = (runId: string) => ({ instanceId: 'i', workflow: 'w', runId });
  assert.notEqual(revocations.reason(who('run-a'), 1000), undefined);
  rewriteKeepingTimes(file, list('run-b'), TIMES);
  assert.equal(revocations.reason(who('run-a'), 1000), undefined, 'run-a is no longer listed');
  assert.notEqual(revocations.reason(who('run-b'), 1000), undefined, 'run-b is');
});
