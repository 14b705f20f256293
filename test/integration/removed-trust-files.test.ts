// Removing a file the proxy trusts takes that trust away (security review 2026-11-26, finding 5):
// a --sa-jwks-file or --workload-policy that is gone leaves no keys / no grants from the next
// request on, as a removed signing-key file does; a file that is there but broken keeps the last
// good one; a file put back is read again. In process, over real files, as src/run/ opens them.
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileKeySet, type KeySetEvent } from '../../src/auth/jwks-source.ts';
import { serviceAccountSource } from '../../src/auth/service-account-source.ts';
import { lookupWorkload, parseWorkloadPolicy } from '../../src/auth/workload-policy.ts';
import { canonicalScope } from '../../src/git/scope.ts';
import { sharedWorkloadPolicy } from '../../src/run/policy-file.ts';
import { ecSigner, jwksOf, saPayload, signSaToken, TEST_AUDIENCE, TEST_ISSUER } from '../support/service-accounts.ts';

const dir = mkdtempSync(join(tmpdir(), 'removed-trust-'));
after(() => rmSync(dir, { recursive: true, force: true }));
/** As the kubelet updates a mounted file: a new file renamed over the old one. */
const put = (path: string, text: string) => {
  writeFileSync(`${path}.new`, text);
  renameSync(`${path}.new`, path);
};

test('removed key set or policy refused: a --sa-jwks-file removed empties the key set (every service-account token refused, a cached one included, logged once); a broken file keeps the last good set; a file back is read again', async () => {
  const path = join(dir, 'jwks.json');
  const key = ecSigner('k1');
  put(path, JSON.stringify(jwksOf(key)));
  const events: KeySetEvent[] = [];
  const keys = fileKeySet(path, (e) => events.push(e));
  const now = Math.floor(Date.now() / 1000);
  const policy = parseWorkloadPolicy(JSON.stringify({ serviceAccounts: { 'agents/*': { models: true } } }), 'policy.json', canonicalScope);
  const source = serviceAccountSource({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, maxLifetimeSec: 86_400, keys, policy: () => policy });
  const token = signSaToken(key, saPayload({ namespace: 'agents', serviceAccount: 'triage', pod: 'triage-0' }, now, 3600, { iss: TEST_ISSUER }));
  const verify = async () => {
    const v = await source.verify('bot', { token }, now);
    return v === undefined ? 'passed' : v.ok ? 'accepted' : v.reason;
  };
  assert.equal(await verify(), 'accepted');
  assert.equal(await verify(), 'accepted', 'now from the cache');
  rmSync(path);
  assert.equal(await verify(), 'unknown key id', 'the cached verification goes with its key');
  assert.equal(await verify(), 'unknown key id');
  assert.equal(keys.current().size, 0);
  put(path, '{"keys": [');
  assert.equal(await verify(), 'unknown key id', 'a broken file brings nothing back');
  put(path, JSON.stringify(jwksOf(key)));
  assert.equal(await verify(), 'accepted');
  put(path, '{"keys": [');
  assert.equal(await verify(), 'accepted', 'a broken file keeps the last good set');
  assert.deepEqual(events.map((e) => (e.kind === 'loaded' ? `loaded ${e.kids.join(',')}` : e.reason)), [
    'loaded k1',
    'the file is gone: every service-account token is refused until it is back',
    'the key set is not JSON; the last good key set stays in use',
    'loaded k1',
    'the key set is not JSON; the last good key set stays in use',
  ]);
});

test('removed key set or policy refused: a --workload-policy file removed takes every grant away from the next request (logged once); a broken file keeps the last good policy; a file back is read again', () => {
  const path = join(dir, 'policy.json');
  const granting = JSON.stringify({ serviceAccounts: { 'agents/deployer': { git: ['github.com/acme/widgets:write'], models: true } } });
  put(path, granting);
  const lines: Record<string, unknown>[] = [];
  const current = sharedWorkloadPolicy(path, (line) => void lines.push(line))();
  const gitOf = () => {
    const r = lookupWorkload(current(), 'agents', 'deployer', 'git');
    return r.ok ? `granted ${r.grant.git}` : r.reason;
  };
  assert.equal(gitOf(), 'granted github.com/acme/widgets:write');
  rmSync(path);
  assert.match(gitOf(), /^the service account agents\/deployer is not in the workload policy /);
  assert.equal(lookupWorkload(current(), 'agents', 'deployer', 'model').ok, false, 'nor on the model gateway');
  put(path, '{"serviceAccounts": ');
  assert.match(gitOf(), /is not in the workload policy/, 'a broken file brings nothing back');
  put(path, granting);
  assert.equal(gitOf(), 'granted github.com/acme/widgets:write');
  put(path, '{"serviceAccounts": ');
  assert.equal(gitOf(), 'granted github.com/acme/widgets:write', 'a broken file keeps the last good policy');
  assert.equal(gitOf(), 'granted github.com/acme/widgets:write');
  const said = lines.map((l) => `${l.event}: ${String(l.message ?? l.entries)}`);
  assert.equal(said.length, 4, said.join('\n'));
  assert.equal(said[0], 'config_error: the workload policy file is gone: every service account (token or certificate) is refused until it is back');
  assert.match(said[1]!, /^config_error: .*; the last good policy stays in force$/);
  assert.equal(said[2], 'workload_policy_reloaded: 1');
  assert.match(said[3]!, /^config_error: .*; the last good policy stays in force$/);
  assert.ok(lines.every((l) => l.file === path));
});
