// Mutual TLS's pure parts (issue 28 item 5): the SPIFFE ID read strictly, Node's subjectAltName
// text, the certificate mapped through the workload policy, the refusals' statuses on both
// listeners, the TLS settings and the flags that must go together.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { spiffeSource } from '../../src/auth/spiffe-source.ts';
import { parseSpiffeId, spiffeWorkload, subjectAltNames } from '../../src/auth/spiffe.ts';
import { peerOf } from '../../src/auth/verifier.ts';
import { parseWorkloadPolicy } from '../../src/auth/workload-policy.ts';
import { canonicalScope } from '../../src/git/scope.ts';
import { botIdentity } from '../../src/gateway/authenticate.ts';
import { decideGitAccess } from '../../src/git/access.ts';
import { tlsServerOptions } from '../../src/http/tls-listener.ts';
import { tlsFlagsProblem } from '../../src/run/tls.ts';

const TD = 'cluster.local';
const POLICY = parseWorkloadPolicy(
  JSON.stringify({ serviceAccounts: { 'agents/triage-bot': { git: ['github.com/acme/*:read'], models: true, limits: { budget_usd: 2 } }, 'agents/*': { models: true, workflow: 'agents' }, 'ci/builder': { git: ['github.com/acme/widgets:write'] } } }),
  'policy.json', canonicalScope);
const NOW = Math.floor(Date.parse('2026-11-26T04:00:00Z') / 1000);
const cert = (san: string | undefined, extra: Partial<{ ca: boolean; valid_from: string; valid_to: string }> = {}) => ({
  subjectaltname: san as string,
  ca: false,
  valid_from: 'Nov 26 00:00:00 2026 GMT',
  valid_to: 'Nov 27 00:00:00 2026 GMT',
  ...extra,
});

test('SPIFFE ID: valid IDs parse into trust domain and path', () => {
  assert.deepEqual(parseSpiffeId('spiffe://cluster.local/ns/agents/sa/triage-bot'), { trustDomain: 'cluster.local', path: '/ns/agents/sa/triage-bot' });
  assert.deepEqual(parseSpiffeId('spiffe://td_1-x.example'), { trustDomain: 'td_1-x.example', path: '' });
  assert.deepEqual(parseSpiffeId('spiffe://td/A.b-c_D'), { trustDomain: 'td', path: '/A.b-c_D' });
});

test('SPIFFE ID: every form the specification forbids is refused with what is wrong', () => {
  const cases: [string, RegExp][] = [
    ['SPIFFE://cluster.local/ns/a/sa/b', /does not begin with spiffe:\/\//],
    ['https://cluster.local/ns/a/sa/b', /does not begin with spiffe:\/\//],
    ['spiffe:///ns/a/sa/b', /has no trust domain/],
    ['spiffe://Cluster.local/ns/a', /trust domain with a character/],
    ['spiffe://cluster.local:8443/ns/a', /trust domain with a character/],
    ['spiffe://user@cluster.local/ns/a', /trust domain with a character/],
    ['spiffe://cluster%2elocal/ns/a', /trust domain with a character/],
    [`spiffe://${'a'.repeat(256)}/x`, /trust domain longer than 255/],
    ['spiffe://td/', /empty path segment or a trailing \//],
    ['spiffe://td/ns//sa', /empty path segment/],
    ['spiffe://td/ns/./sa', /a \. or \.\. path segment/],
    ['spiffe://td/ns/../sa', /a \. or \.\. path segment/],
    ['spiffe://td/ns/a%2Fb', /path character other than/],
    ['spiffe://td/ns/a?x=1', /path character other than/],
    ['spiffe://td/ns/a#frag', /path character other than/],
    ['spiffe://td/ns/a b', /path character other than/],
    [`spiffe://td/${'a'.repeat(2040)}`, /longer than 2048 bytes/],
  ];
  for (const [uri, reason] of cases) {
    const r = parseSpiffeId(uri);
    assert.ok('error' in r, uri);
    assert.match(r.error, reason, uri);
  }
});

test('subjectAltName text: plain and JSON-quoted entries (Node escapes a value holding a comma), and what is unreadable', () => {
  assert.deepEqual(subjectAltNames('URI:spiffe://td/ns/a/sa/b, DNS:x.svc'), [{ type: 'URI', value: 'spiffe://td/ns/a/sa/b' }, { type: 'DNS', value: 'x.svc' }]);
  // A name crafted to look like two entries stays one (and then is no SPIFFE ID).
  assert.deepEqual(subjectAltNames('URI:"spiffe://td/ns/a/sa/b, URI:spiffe://td/ns/kube-system/sa/admin"'), [{ type: 'URI', value: 'spiffe://td/ns/a/sa/b, URI:spiffe://td/ns/kube-system/sa/admin' }]);
  assert.deepEqual(subjectAltNames(''), []);
  assert.equal(subjectAltNames('URI:"unterminated'), undefined);
  assert.equal(subjectAltNames('no colon here'), undefined);
});

test('SPIFFE workload: exactly one URI SAN in the trust domain naming /ns/<namespace>/sa/<serviceaccount>; each refusal says what to fix', () => {
  assert.deepEqual(spiffeWorkload('URI:spiffe://cluster.local/ns/agents/sa/triage-bot, DNS:bot.agents.svc', false, TD), { ok: true, id: 'spiffe://cluster.local/ns/agents/sa/triage-bot', namespace: 'agents', serviceAccount: 'triage-bot' });
  const refusals: [string | undefined, boolean, RegExp][] = [
    [undefined, false, /has no SPIFFE ID: give it one URI SAN spiffe:\/\/cluster\.local\/ns\/<namespace>\/sa\/<serviceaccount>/],
    ['DNS:bot.agents.svc, email:a@b', false, /has no SPIFFE ID/],
    ['URI:spiffe://cluster.local/ns/a/sa/b, URI:spiffe://cluster.local/ns/c/sa/d', false, /has 2 URI SANs: an X\.509-SVID has exactly one/],
    ['URI:spiffe://evil.example/ns/agents/sa/triage-bot', false, /trust domain evil\.example, not cluster\.local \(--spiffe-trust-domain\)/],
    ['URI:spiffe://cluster.local/workload/triage-bot', false, /does not name a workload as \/ns\/<namespace>\/sa\/<serviceaccount>/],
    ['URI:spiffe://cluster.local/ns/agents/sa/triage-bot/extra', false, /does not name a workload/],
    ['URI:spiffe://cluster.local/ns/Agents/sa/triage-bot', false, /does not hold a Kubernetes namespace and service account name/],
    ['URI:spiffe://cluster.local/ns/agents/sa/_bot', false, /does not hold a Kubernetes namespace and service account name/],
    ['URI:spiffe://cluster.local/ns/agents/sa/triage-bot', true, /is a CA certificate, not a workload's/],
    ['URI:"spiffe://cluster.local/ns/a/sa/b, URI:x"', false, /URI SAN is not a SPIFFE ID/],
  ];
  for (const [san, isCa, reason] of refusals) {
    const r = spiffeWorkload(san, isCa, TD);
    assert.equal(r.ok, false, String(san));
    if (!r.ok) assert.match(r.reason, reason, String(san));
  }
});

/** A verified client certificate's claims on a listener, as the source answers them. */
function certificateClaims(certificate: ReturnType<typeof cert>, trustDomain: string, policy: typeof POLICY, listener: 'git' | 'model', nowSec: number) {
  const answer = spiffeSource({ trustDomain, policy: () => policy }).verify(listener === 'git' ? 'git' : 'bot', { peer: { remoteAddress: '10.0.0.1', tls: { authorized: true, certificate: certificate as never } } }, nowSec);
  assert.ok(answer !== undefined && !(answer instanceof Promise));
  return answer;
}

test('certificate claims: the account through the workload policy: instance and run namespace/serviceaccount, workflow from the entry, git scope on git only, limits as granted, exp the certificate\'s notAfter', () => {
  const git = certificateClaims(cert('URI:spiffe://cluster.local/ns/agents/sa/triage-bot'), TD, POLICY, 'git', NOW);
  assert.deepEqual(git, { ok: true, claims: { sub: 'agents/triage-bot', workflow: 'agents/triage-bot', run_id: 'agents/triage-bot', iat: Date.parse('2026-11-26T00:00:00Z') / 1000, exp: Date.parse('2026-11-27T00:00:00Z') / 1000, git: ['github.com/acme/*:read'], limits: { budget_usd: 2 } } });
  const model = certificateClaims(cert('URI:spiffe://cluster.local/ns/agents/sa/helper'), TD, POLICY, 'model', NOW);
  assert.ok(model.ok && model.claims.workflow === 'agents' && model.claims.git === undefined && model.claims.sub === 'agents/helper');
});

test('certificate claims: an account without an entry, without git on git, without models on the gateway, is refused naming the account and what to add', () => {
  const unmapped = certificateClaims(cert('URI:spiffe://cluster.local/ns/billing/sa/reporter'), TD, POLICY, 'model', NOW);
  assert.ok(!unmapped.ok && /the service account billing\/reporter is not in the workload policy policy\.json: add "billing\/reporter"/.test(unmapped.reason));
  const noGit = certificateClaims(cert('URI:spiffe://cluster.local/ns/agents/sa/helper'), TD, POLICY, 'git', NOW);
  assert.ok(!noGit.ok && /may not use git/.test(noGit.reason));
  const noModels = certificateClaims(cert('URI:spiffe://cluster.local/ns/ci/sa/builder'), TD, POLICY, 'model', NOW);
  assert.ok(!noModels.ok && /may not call models/.test(noModels.reason));
});

test('certificate claims: a certificate that expired while its keep-alive connection stayed open is refused from the next request', () => {
  const r = certificateClaims(cert('URI:spiffe://cluster.local/ns/agents/sa/triage-bot', { valid_to: 'Nov 26 03:59:59 2026 GMT' }), TD, POLICY, 'git', NOW);
  assert.ok(!r.ok && /expired since the connection was opened: reconnect with the renewed one/.test(r.reason));
});

test('client-certificate source: passes without TLS or without a client certificate; refuses an unverified one; marks its refusals forbidden', () => {
  const source = spiffeSource({ trustDomain: TD, policy: () => POLICY });
  assert.equal(source.verify('bot', { token: 't', peer: { remoteAddress: '10.0.0.1' } }, NOW), undefined);
  assert.equal(source.verify('bot', { token: 't', peer: { remoteAddress: '10.0.0.1', tls: { authorized: false, certificate: {} as never } } }, NOW), undefined);
  const peer = (authorized: boolean, san: string) => ({ remoteAddress: '10.0.0.1', tls: { authorized, certificate: cert(san) as never } });
  assert.deepEqual(source.verify('git', { peer: peer(false, 'URI:spiffe://cluster.local/ns/agents/sa/triage-bot') }, NOW), { ok: false, reason: 'the client certificate was not verified against --tls-client-ca', forbidden: true });
  const refused = source.verify('git', { token: 'ignored', peer: peer(true, 'DNS:x') }, NOW);
  assert.ok(refused && !(refused instanceof Promise) && !refused.ok && refused.forbidden === true);
  const served = source.verify('git', { token: 'ignored', peer: peer(true, 'URI:spiffe://cluster.local/ns/agents/sa/triage-bot') }, NOW);
  assert.ok(served && !(served instanceof Promise) && served.ok && served.claims.sub === 'agents/triage-bot');
});

test('client-certificate source: a certificate read once (by its fingerprint) is still checked against the policy and the clock at every request', () => {
  let policy = POLICY;
  const source = spiffeSource({ trustDomain: TD, policy: () => policy });
  const presented = { peer: { remoteAddress: '10.0.0.1', tls: { authorized: true, certificate: { ...cert('URI:spiffe://cluster.local/ns/agents/sa/triage-bot'), fingerprint256: 'AB:CD' } as never } } };
  const verify = (nowSec: number) => source.verify('git', presented, nowSec) as Exclude<ReturnType<typeof source.verify>, Promise<unknown> | undefined>;
  assert.equal(verify(NOW).ok, true);
  policy = parseWorkloadPolicy(JSON.stringify({ serviceAccounts: { 'agents/other': { models: true } } }), 'policy.json', canonicalScope);
  const removed = verify(NOW);
  assert.ok(!removed.ok && /not in the workload policy/.test(removed.reason), 'the entry removed: refused from the next request');
  policy = POLICY;
  assert.equal(verify(NOW).ok, true);
  const expired = verify(Date.parse('2026-11-27T00:00:01Z') / 1000);
  assert.ok(!expired.ok && /expired since the connection was opened/.test(expired.reason));
});

test('peerOf reads a TLS connection\'s certificate once (it cannot change without renegotiation; a read costs about 120 us)', () => {
  let reads = 0;
  const socket = { encrypted: true, authorized: true, remoteAddress: '10.0.0.1', getPeerCertificate: () => (reads++, { subjectaltname: 'URI:spiffe://cluster.local/ns/a/sa/b' }) };
  const first = peerOf(socket as never);
  const second = peerOf(socket as never);
  assert.equal(reads, 1);
  assert.equal(first, second);
  assert.deepEqual(peerOf({ remoteAddress: '10.0.0.2' } as never), { remoteAddress: '10.0.0.2' });
});

test('client certificate refused: 403 with the reason on both listeners (git: no 401 challenge, which would make git ask for a password)', () => {
  const verification = { ok: false, reason: 'the client certificate has no SPIFFE ID', forbidden: true } as const;
  const git = decideGitAccess({ hostKey: 'github.com', repo: ['acme', 'widgets.git'], access: 'read' }, { repos: undefined, readOnly: false, workload: verification });
  assert.ok(!git.ok);
  assert.equal(git.error.status, 403);
  assert.equal(git.challenge, false);
  assert.match(git.error.message, /the client certificate was refused: the client certificate has no SPIFFE ID/);
  const gateway = botIdentity(verification, undefined);
  assert.ok(!gateway.ok);
  assert.equal(gateway.refusal.error.status, 403);
  assert.match(gateway.refusal.message ?? '', /the client certificate was refused: the client certificate has no SPIFFE ID/);
});

test('TLS settings: TLS 1.2 minimum, client certificates requested and required only with a client CA, ALPN http/1.1', () => {
  const material = { cert: Buffer.from('c'), key: Buffer.from('k') };
  assert.deepEqual(tlsServerOptions({ ...material, ca: undefined }), { cert: material.cert, key: material.key, minVersion: 'TLSv1.2', requestCert: false, rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] });
  const mutual = tlsServerOptions({ ...material, ca: Buffer.from('ca') });
  assert.equal(mutual.requestCert, true);
  assert.equal(mutual.rejectUnauthorized, true);
  assert.deepEqual(mutual.ca, Buffer.from('ca'));
  assert.equal(mutual.minVersion, 'TLSv1.2');
  assert.equal('maxVersion' in mutual, false, 'TLS 1.3 stays allowed, and Node prefers it');
});

test('TLS flags: each combination that cannot work is refused naming the flag to add', () => {
  const none = { tlsCertFile: undefined, tlsKeyFile: undefined, tlsClientCaFile: undefined, spiffeTrustDomain: undefined, workloadPolicyFile: undefined };
  assert.equal(tlsFlagsProblem(none), undefined);
  assert.equal(tlsFlagsProblem({ ...none, tlsCertFile: 'c', tlsKeyFile: 'k' }), undefined);
  assert.equal(tlsFlagsProblem({ ...none, tlsCertFile: 'c', tlsKeyFile: 'k', tlsClientCaFile: 'ca', spiffeTrustDomain: TD, workloadPolicyFile: 'p' }), undefined);
  assert.match(tlsFlagsProblem({ ...none, tlsCertFile: 'c' })!, /--tls-cert and --tls-key go together/);
  assert.match(tlsFlagsProblem({ ...none, tlsClientCaFile: 'ca' })!, /--tls-client-ca needs --tls-cert and --tls-key/);
  assert.match(tlsFlagsProblem({ ...none, tlsCertFile: 'c', tlsKeyFile: 'k', tlsClientCaFile: 'ca', workloadPolicyFile: 'p' })!, /needs --spiffe-trust-domain/);
  assert.match(tlsFlagsProblem({ ...none, tlsCertFile: 'c', tlsKeyFile: 'k', tlsClientCaFile: 'ca', spiffeTrustDomain: TD })!, /needs --workload-policy/);
  assert.match(tlsFlagsProblem({ ...none, spiffeTrustDomain: TD })!, /--spiffe-trust-domain is read only with --tls-client-ca/);
  for (const bad of ['spiffe://cluster.local', 'Cluster.local', 'cluster.local:443', 'cluster.local/x']) {
    assert.match(tlsFlagsProblem({ ...none, tlsCertFile: 'c', tlsKeyFile: 'k', tlsClientCaFile: 'ca', spiffeTrustDomain: bad, workloadPolicyFile: 'p' })!, /--spiffe-trust-domain ".*": a trust domain is a-z 0-9 \. - _ only/, bad);
  }
});
