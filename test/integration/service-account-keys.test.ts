// The service-account key sets against a fake OIDC issuer on loopback over HTTPS (the test CA):
// discovery, rotation, the fetch floor, shared fetches, and every way a fetch can go wrong; and the
// mounted-file key set. In process: the sources as src/run/ builds them, with the real HTTPS getter.
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileKeySet, httpsGetter, jwksUriOf, remoteKeySet, type KeySetEvent, type RemoteKeySetOptions } from '../../src/auth/jwks-source.ts';
import { serviceAccountSource } from '../../src/auth/service-account-source.ts';
import type { Verification } from '../../src/auth/verifier.ts';
import { parseWorkloadPolicy } from '../../src/auth/workload-policy.ts';
import { canonicalScope } from '../../src/git/scope.ts';
import { HOSTILE, startFakeIssuer, type FakeIssuer } from '../support/oidc-issuer.ts';
import { ecSigner, jwksOf, rsaSigner, saPayload, signSaToken, TEST_AUDIENCE, type SaSigner } from '../support/service-accounts.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const NOW = Math.floor(Date.now() / 1000);
const WHO = { namespace: 'agents', serviceAccount: 'triage', pod: 'triage-0' };
const POLICY = parseWorkloadPolicy(JSON.stringify({ serviceAccounts: { 'agents/*': { models: true } } }), 'policy.json', canonicalScope);
const oldKey = rsaSigner('old-rsa');
const newKey = ecSigner('new-ec');

let pki: TestPki;
let issuer: FakeIssuer;
before(async () => {
  // Not the default PKI, which npm test's processes trust: one test needs an issuer that only
  // --sa-ca-file makes verifiable.
  pki = makeTestPki('other');
  issuer = await startFakeIssuer(pki, oldKey);
});
after(async () => {
  await issuer.close();
  pki.cleanup();
});

/** A remote key set over the fake issuer, its clock in the test's hands. */
function keySetOf(over: Partial<RemoteKeySetOptions> = {}) {
  const events: KeySetEvent[] = [];
  const clock = { ms: 1_000_000 };
  const keys = remoteKeySet({ issuer: issuer.issuer, jwks: 'discovery', get: httpsGetter(pki.caPem), nowMs: () => clock.ms, report: (e) => events.push(e), refreshMs: 3_600_000, ...over });
  return { keys, events, clock };
}

const tokenOf = (signer: SaSigner, who = WHO) => signSaToken(signer, saPayload(who, NOW, 3600, { iss: issuer.issuer }));

function sourceOver(keys: ReturnType<typeof keySetOf>['keys']) {
  const source = serviceAccountSource({ issuer: issuer.issuer, audience: TEST_AUDIENCE, maxLifetimeSec: 86_400, keys, policy: () => POLICY });
  return async (token: string): Promise<Verification> => (await source.verify('bot', { token }, NOW)) ?? { ok: false, reason: 'passed' };
}

const reasonOf = (v: Verification) => (v.ok ? 'accepted' : v.reason);
const fetchesNow = () => ({ ...issuer.fetches });

test('key set by discovery: the issuer\'s discovery document names the key set, fetched over HTTPS verified with --sa-ca-file', async () => {
  issuer.setKeys(oldKey);
  const { keys, events } = keySetOf();
  await keys.ready;
  keys.close();
  assert.deepEqual([...keys.current().keys()], ['old-rsa']);
  assert.deepEqual(events, [{ kind: 'loaded', from: `the discovery document of ${issuer.issuer}`, kids: ['old-rsa'], skipped: [] }]);
  const verify = sourceOver(keys);
  const accepted = await verify(tokenOf(oldKey));
  assert.ok(accepted.ok);
  assert.deepEqual({ sub: accepted.claims.sub, workflow: accepted.claims.workflow }, { sub: 'agents/triage-0', workflow: 'agents/triage' });
});

test('key rotation: a token naming a new kid fetches the set again and is accepted; once the old key is gone its tokens are refused', async () => {
  issuer.setKeys(oldKey);
  const { keys, clock } = keySetOf();
  await keys.ready;
  keys.close();
  const verify = sourceOver(keys);
  const oldToken = tokenOf(oldKey);
  assert.equal(reasonOf(await verify(oldToken)), 'accepted');
  // The cluster rotates: the new key is published and the old one withdrawn.
  issuer.setKeys(newKey);
  clock.ms += 31_000;
  const before = fetchesNow();
  assert.equal(reasonOf(await verify(tokenOf(newKey))), 'accepted');
  assert.deepEqual(fetchesNow(), { discovery: before.discovery + 1, jwks: before.jwks + 1 });
  // The old token was verified (and remembered) before: its key left the set, so it is refused now.
  assert.equal(reasonOf(await verify(oldToken)), 'unknown key id');
});

test('key set fetch floor: unknown key ids within 30 s of the last fetch cost the issuer nothing; past the floor, one fetch', async () => {
  issuer.setKeys(oldKey);
  const { keys, clock } = keySetOf();
  await keys.ready;
  keys.close();
  const verify = sourceOver(keys);
  const stranger = rsaSigner('made-up');
  const before = fetchesNow();
  for (let i = 0; i < 5; i++) assert.equal(reasonOf(await verify(tokenOf({ ...stranger, kid: `made-up-${i}` }))), 'unknown key id');
  assert.deepEqual(fetchesNow(), before);
  clock.ms += 30_000;
  assert.equal(reasonOf(await verify(tokenOf(stranger))), 'unknown key id');
  assert.equal(issuer.fetches.jwks, before.jwks + 1);
});

test('key set shared fetch: concurrent requests naming an unknown kid share one fetch', async () => {
  issuer.setKeys(oldKey);
  const { keys, clock } = keySetOf();
  await keys.ready;
  keys.close();
  const verify = sourceOver(keys);
  issuer.setKeys(oldKey, newKey);
  clock.ms += 60_000;
  const before = fetchesNow();
  const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => verify(tokenOf(newKey, { ...WHO, pod: `triage-${i}` }))));
  assert.deepEqual(answers.map(reasonOf), Array(8).fill('accepted'));
  assert.equal(issuer.fetches.jwks, before.jwks + 1);
});

test('key set failing fetch keeps the last good set: an error status, garbage, an oversized answer and a silent issuer each keep it, reported once per reason', async () => {
  issuer.setKeys(oldKey);
  const { keys, events, clock } = keySetOf({ deadlineMs: 300 });
  await keys.ready;
  keys.close();
  const verify = sourceOver(keys);
  for (const answer of ['error', 'garbage', 'oversized', 'silent'] as const) {
    issuer.script('jwks', HOSTILE[answer]);
    clock.ms += 31_000;
    await keys.refresh();
    assert.deepEqual([...keys.current().keys()], ['old-rsa'], answer);
    assert.equal(reasonOf(await verify(tokenOf(oldKey))), 'accepted', answer);
  }
  const failures = events.filter((e) => e.kind === 'failed').map((e) => (e.kind === 'failed' ? e.reason : ''));
  assert.equal(failures.length, 4);
  assert.match(failures[0]!, /openid\/v1\/jwks answered 500; the last good key set stays in use$/);
  assert.match(failures[1]!, /openid\/v1\/jwks: the key set is not JSON; the last good key set stays in use$/);
  assert.match(failures[2]!, /the answer is larger than 64 KiB; the last good key set stays in use$/);
  assert.match(failures[3]!, /^no answer within 0.3 s; the last good key set stays in use$/);
});

test('key set before any load fails closed: an issuer that cannot be verified (no --sa-ca-file for its CA) gives no keys, and every token is refused', async () => {
  issuer.setKeys(oldKey);
  const { keys, events } = keySetOf({ get: httpsGetter(undefined) });
  await keys.ready;
  keys.close();
  assert.equal(keys.current().size, 0);
  assert.equal(events[0]!.kind, 'failed');
  assert.match(events[0]!.kind === 'failed' ? events[0]!.reason : '', /self[- ]signed|unable to (get|verify)/i);
  assert.equal(reasonOf(await sourceOver(keys)(tokenOf(oldKey))), 'unknown key id');
});

test('key set discovery rules: the document must name the configured issuer, and jwks_uri must be https on the issuer\'s origin', () => {
  const doc = (fields: Record<string, unknown>) => Buffer.from(JSON.stringify(fields));
  const iss = 'https://issuer.example:6443';
  assert.equal(jwksUriOf(doc({ issuer: iss, jwks_uri: `${iss}/openid/v1/jwks` }), iss), `${iss}/openid/v1/jwks`);
  assert.throws(() => jwksUriOf(doc({ issuer: 'https://other.example', jwks_uri: `${iss}/k` }), iss), /its issuer is not https:\/\/issuer.example:6443/);
  assert.throws(() => jwksUriOf(doc({ issuer: iss, jwks_uri: 'http://issuer.example:6443/k' }), iss), /jwks_uri is not https/);
  assert.throws(() => jwksUriOf(doc({ issuer: iss, jwks_uri: 'https://10.0.0.1:6443/openid/v1/jwks' }), iss), /jwks_uri is on another origin than the issuer \(https:\/\/10.0.0.1:6443\); name the key set with --sa-jwks-url/);
  assert.throws(() => jwksUriOf(doc({ issuer: iss }), iss), /no jwks_uri/);
  assert.throws(() => jwksUriOf(Buffer.from('nope'), iss), /not a JSON object/);
});

test('key set discovery over HTTPS: a document pointing the proxy at another origin is refused, and no key set is fetched from there', async () => {
  issuer.setKeys(oldKey);
  issuer.setDiscovery({ jwks_uri: 'https://localhost:1/openid/v1/jwks' });
  try {
    const { keys, events } = keySetOf();
    await keys.ready;
    keys.close();
    assert.equal(keys.current().size, 0);
    assert.match(events[0]!.kind === 'failed' ? events[0]!.reason : '', /jwks_uri is on another origin than the issuer/);
  } finally {
    issuer.setDiscovery({});
  }
});

test('key set by URL (--sa-jwks-url): fetched directly, without discovery', async () => {
  issuer.setKeys(oldKey, newKey);
  const before = fetchesNow();
  const { keys } = keySetOf({ jwks: issuer.jwksUrl });
  await keys.ready;
  keys.close();
  assert.deepEqual([...keys.current().keys()], ['old-rsa', 'new-ec']);
  assert.deepEqual(fetchesNow(), { discovery: before.discovery, jwks: before.jwks + 1 });
});

test('key set from a mounted file: read again when it changes; a broken file keeps the last good set; a key removed refuses its tokens', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sa-jwks-'));
  try {
    const path = join(dir, 'jwks.json');
    // As the kubelet updates a mounted ConfigMap: a new file renamed over the old one.
    const write = (text: string) => {
      writeFileSync(`${path}.new`, text);
      renameSync(`${path}.new`, path);
    };
    write(JSON.stringify(jwksOf(oldKey)));
    const events: KeySetEvent[] = [];
    const keys = fileKeySet(path, (e) => events.push(e));
    const source = serviceAccountSource({ issuer: issuer.issuer, audience: TEST_AUDIENCE, maxLifetimeSec: 86_400, keys, policy: () => POLICY });
    const verify = async (token: string) => reasonOf((await source.verify('bot', { token }, NOW)) ?? { ok: false, reason: 'passed' });
    const oldToken = tokenOf(oldKey);
    assert.equal(await verify(oldToken), 'accepted');
    assert.equal(await verify(tokenOf(newKey)), 'unknown key id');
    write(JSON.stringify(jwksOf(oldKey, newKey)));
    assert.equal(await verify(tokenOf(newKey)), 'accepted');
    write('{"keys": [');
    assert.equal(await verify(oldToken), 'accepted');
    write(JSON.stringify(jwksOf(newKey)));
    assert.equal(await verify(oldToken), 'unknown key id');
    assert.deepEqual(events.map((e) => (e.kind === 'loaded' ? e.kids.join(',') : e.reason)), [
      'old-rsa',
      'old-rsa,new-ec',
      'the key set is not JSON; the last good key set stays in use',
      'new-ec',
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('service-account source chooses by iss: a minted token passes to the next source, another issuer\'s service-account token is refused naming both issuers, and the issuer written with escaped slashes is still ours', async () => {
  issuer.setKeys(oldKey);
  const { keys } = keySetOf();
  await keys.ready;
  keys.close();
  const source = serviceAccountSource({ issuer: issuer.issuer, audience: TEST_AUDIENCE, maxLifetimeSec: 86_400, keys, policy: () => POLICY });
  assert.deepEqual(source.verify('bot', { token: signSaToken(oldKey, saPayload(WHO, NOW, 3600, { iss: 'https://other.example' })) }, NOW), {
    ok: false,
    reason: `its issuer "https://other.example" is not --sa-issuer "${issuer.issuer}": the cluster's --service-account-issuer is what --sa-issuer must be`,
    serviceAccount: true,
  });
  // A token of another issuer without the kubernetes.io claims is not a service account's: passed on.
  const plain = saPayload(WHO, NOW, 3600, { iss: 'https://other.example' });
  delete plain['kubernetes.io'];
  assert.equal(source.verify('bot', { token: signSaToken(oldKey, plain) }, NOW), undefined);
  assert.equal(source.verify('bot', { token: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJib3QifQ.c2ln' }, NOW), undefined);
  assert.equal(source.verify('bot', {}, NOW), undefined);
  // The issuer at each of the three byte alignments of base64, as written and with escaped slashes.
  for (const pad of ['', 'x', 'xx', 'xxx']) {
    const payload = JSON.stringify(saPayload(WHO, NOW, 3600, { iss: issuer.issuer, aud: [TEST_AUDIENCE, pad] }));
    for (const text of [payload, payload.replaceAll('/', '\\/')]) {
      const answer = await source.verify('bot', { token: signSaToken(oldKey, text) }, NOW);
      assert.ok(answer?.ok, `${JSON.stringify(answer)} for ${text.slice(0, 80)}`);
    }
  }
});

test('service-account source asks the policy on every request: a cached token loses what an entry removed from the policy granted, at its next request', async () => {
  issuer.setKeys(oldKey);
  const { keys } = keySetOf();
  await keys.ready;
  keys.close();
  let policy = POLICY;
  const source = serviceAccountSource({ issuer: issuer.issuer, audience: TEST_AUDIENCE, maxLifetimeSec: 86_400, keys, policy: () => policy });
  const token = tokenOf(oldKey);
  assert.equal(reasonOf((await source.verify('bot', { token }, NOW))!), 'accepted');
  policy = parseWorkloadPolicy(JSON.stringify({ serviceAccounts: { 'other/*': { models: true } } }), 'policy.json', canonicalScope);
  assert.match(reasonOf((await source.verify('bot', { token }, NOW))!), /^the service account agents\/triage is not in the workload policy policy\.json/);
  // Past its exp and the skew a cached token is verified again, and refused as expired.
  policy = POLICY;
  assert.equal(reasonOf((await source.verify('bot', { token }, NOW + 3600 + 31))!), 'expired');
});
