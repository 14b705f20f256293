// The git listener's access decision (src/git/access.ts): the 401 challenge flow, the workload
// token's scope and the hosts file's static limits, without a socket.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { signBotToken, type BotClaims } from '../../src/auth/jwt.ts';
import type { Verification } from '../../src/auth/verifier.ts';
import { secretVerifier } from '../support/tokens.ts';
import { decideGitAccess as decide, presentedToken, proveWorkload, WORKLOAD_CHALLENGE, type AccessDecision, type AccessRequest } from '../../src/git/access.ts';
import { parseRepoPattern, type RepoPattern } from '../../src/git/scope.ts';

const KEY = Buffer.from('0123456789abcdef0123456789abcdef-git-access-test');
const NOW = 1_700_000_000;
const IDENTITY = { sub: 'bot-7', workflow: 'triage', run_id: 'run-42' };

function token(git: readonly string[] | undefined, over: Partial<BotClaims> = {}, key = KEY): string {
  return signBotToken({ ...IDENTITY, iat: NOW - 60, exp: NOW + 600, ...(git ? { git } : {}), ...over }, key);
}
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** The policy as the tests write it: the git signing key and the clock, or none (network-policy mode). */
interface AccessPolicy {
  readonly repos: Parameters<typeof decide>[1]['repos'];
  readonly readOnly: boolean;
  readonly workloadAuth: { readonly key: Buffer; readonly nowSec: number; readonly maxLifetimeSec: number } | undefined;
}
const SIGNED: AccessPolicy = { repos: undefined, readOnly: false, workloadAuth: { key: KEY, nowSec: NOW, maxLifetimeSec: 3600 } };
const OPEN: AccessPolicy = { repos: undefined, readOnly: false, workloadAuth: undefined };

function request(path: string, access: 'read' | 'write', authorization?: string, hostKey = 'github.com'): AccessRequest & { authorization?: string } {
  return { hostKey, repo: path.split('/'), access, authorization };
}

/** The listener's two steps: the token verified by the key's verifier (it answers at once), then the decision. */
function decideGitAccess(req: AccessRequest & { authorization?: string }, policy: AccessPolicy): AccessDecision {
  const auth = policy.workloadAuth;
  const workload = auth && (proveWorkload(secretVerifier(auth.key, auth.maxLifetimeSec), req.authorization, undefined, auth.nowSec) as Verification);
  return decide({ hostKey: req.hostKey, repo: req.repo, access: req.access }, { repos: policy.repos, readOnly: policy.readOnly, workload });
}

function refusal(d: AccessDecision): { status: number; code: string; message: string; challenge: boolean } {
  assert.equal(d.ok, false, 'expected a refusal');
  return d.ok ? { status: 0, code: '', message: '', challenge: false } : { status: d.error.status, code: d.error.code, message: d.error.message, challenge: d.challenge };
}

const patterns = (...texts: string[]): RepoPattern[] => texts.map((t) => (parseRepoPattern(t) as { value: RepoPattern }).value);

test('the challenge is Basic realm="git-proxy"', () => {
  assert.equal(WORKLOAD_CHALLENGE, 'Basic realm="git-proxy"');
});

test('the token is the Basic password (what the credential helper gives git) or the Bearer token', () => {
  assert.deepEqual(presentedToken(basic('workload', 'tok.en.sig')), { kind: 'token', token: 'tok.en.sig' });
  assert.deepEqual(presentedToken(basic('anyone', 'a:b')), { kind: 'token', token: 'a:b' });
  assert.deepEqual(presentedToken('Bearer tok.en.sig'), { kind: 'token', token: 'tok.en.sig' });
  assert.deepEqual(presentedToken('bearer tok.en.sig'), { kind: 'token', token: 'tok.en.sig' });
  assert.deepEqual(presentedToken(`basic ${Buffer.from('u:t').toString('base64')}`), { kind: 'token', token: 't' });
});

test('no Authorization, or Basic with an empty password, presents no token; anything else unreadable is said so', () => {
  for (const h of [undefined, '', basic('workload', '')]) assert.deepEqual(presentedToken(h), { kind: 'none' }, String(h));
  const unreadable = ['Bearer', 'Bearer a b', 'Digest abc', 'Basic', 'Basic !!!!', `Basic ${Buffer.from('no-colon').toString('base64')}`, 'Basic dTp0dB==', 'Basic dTp0=='];
  for (const h of unreadable) assert.deepEqual(presentedToken(h), { kind: 'unreadable' }, h);
});

test('with a signing key, a request without a token gets 401 with the challenge and says how to get one', () => {
  const r = refusal(decideGitAccess(request('acme/widgets.git', 'read'), SIGNED));
  assert.deepEqual([r.status, r.code, r.challenge], [401, 'workload_token_missing', true]);
  assert.match(r.message, /git-config --workload-token-env VAR.*mint-token --git-repo/);
});

test('a token in scope is admitted through either presentation, with its identity', () => {
  const t = token(['github.com/acme/widgets:write']);
  for (const authorization of [basic('workload', t), `Bearer ${t}`]) {
    for (const access of ['read', 'write'] as const) {
      const decision = decideGitAccess(request('acme/widgets.git', access, authorization), SIGNED);
      assert.deepEqual(decision.ok && decision.identity, { instanceId: 'bot-7', workflow: 'triage', runId: 'run-42' });
    }
  }
});

test('an expired, forged, unscoped or malformed token gets 401 with the challenge and the reason', () => {
  const cases: [string, string][] = [
    [basic('w', token(['github.com/acme/widgets:read'], { exp: NOW - 31 })), 'expired'],
    [basic('w', token(['github.com/acme/widgets:read'], {}, Buffer.from('another-key-another-key-another-key'))), 'bad signature'],
    [basic('w', token(undefined)), 'no git scope'],
    [basic('w', token(['github.com/acme/*/x:read'])), 'invalid claim git'],
    [basic('w', 'not-a-jwt'), 'malformed token'],
    ['Digest abc', 'unreadable authorization header'],
  ];
  for (const [authorization, reason] of cases) {
    const d = decideGitAccess(request('acme/widgets', 'read', authorization), SIGNED);
    const r = refusal(d);
    assert.deepEqual([r.status, r.code, r.challenge, r.message], [401, 'workload_token_invalid', true, `the workload token was refused: ${reason}`], reason);
    assert.equal(!d.ok && d.tokenError, reason);
    assert.equal(!d.ok && d.identity, undefined);
  }
});

test('outside its scope a token gets 403 naming the repository; a read-only scope may not push', () => {
  const t = basic('w', token(['github.com/acme/widgets:write', 'github.com/acme/docs:read', 'git.corp.example/team/*:read']));
  const cases: [AccessRequest, string, string][] = [
    [request('acme/payments', 'read', t), 'repo_not_in_scope', 'this workload may not read github.com/acme/payments'],
    [request('acme/payments', 'write', t), 'repo_not_in_scope', 'this workload may not push to github.com/acme/payments'],
    [request('acme/docs.git', 'write', t), 'push_not_in_scope', 'this workload may not push to github.com/acme/docs.git (its token allows reading only)'],
    [request('team/x', 'write', t, 'git.corp.example'), 'push_not_in_scope', 'this workload may not push to git.corp.example/team/x (its token allows reading only)'],
    [request('acme/widgets', 'read', t, 'git.corp.example'), 'repo_not_in_scope', 'this workload may not read git.corp.example/acme/widgets'],
    [request('acme/%80', 'read', t), 'repo_not_in_scope', 'this workload may not read github.com/acme/%80'],
  ];
  for (const [req, code, message] of cases) {
    const d = decideGitAccess(req, SIGNED);
    assert.deepEqual(refusal(d), { status: 403, code, message, challenge: false }, message);
    assert.deepEqual(!d.ok && d.identity, { instanceId: 'bot-7', workflow: 'triage', runId: 'run-42' }, 'the refusal names who was refused');
  }
  assert.equal(decideGitAccess(request('acme/docs', 'read', t), SIGNED).ok, true);
  assert.equal(decideGitAccess(request('team/sub/x', 'read', t, 'git.corp.example'), SIGNED).ok, true);
});

test('without a signing key everything passes (network-policy mode) unless the hosts file limits the host', () => {
  assert.deepEqual(decideGitAccess(request('acme/anything', 'write'), OPEN), { ok: true, identity: undefined });
  assert.deepEqual(decideGitAccess(request('acme/anything', 'write', 'Bearer whatever'), OPEN), { ok: true, identity: undefined });
});

test('the hosts file limits every workload: repos outside its list and pushes to a readOnly host are 403', () => {
  const limited: AccessPolicy = { ...OPEN, repos: patterns('acme/widgets', 'team/*'), readOnly: true };
  assert.deepEqual(refusal(decideGitAccess(request('acme/payments', 'read'), limited)), {
    status: 403,
    code: 'repo_not_in_host_repos',
    message: 'the proxy serves no repository github.com/acme/payments: the hosts file limits github.com to other repositories',
    challenge: false,
  });
  assert.deepEqual(refusal(decideGitAccess(request('acme/Widgets.git', 'write'), limited)), {
    status: 403,
    code: 'host_read_only',
    message: 'the proxy allows no pushes to github.com: it is read-only in the hosts file',
    challenge: false,
  });
  assert.equal(decideGitAccess(request('acme/Widgets.git', 'read'), limited).ok, true);
  assert.equal(decideGitAccess(request('team/sub/repo', 'read'), limited).ok, true);
});

test('with a token, the hosts file limits apply on top of its scope (both must allow)', () => {
  const t = basic('w', token(['github.com/acme/*:write']));
  const policy: AccessPolicy = { ...SIGNED, repos: patterns('acme/widgets'), readOnly: true };
  assert.equal(refusal(decideGitAccess(request('acme/payments', 'read', t), policy)).code, 'repo_not_in_host_repos');
  assert.equal(refusal(decideGitAccess(request('acme/widgets', 'write', t), policy)).code, 'host_read_only');
  assert.equal(decideGitAccess(request('acme/widgets', 'read', t), policy).ok, true);
  // Authentication comes first: the hosts file's limits are not disclosed to a client without a token.
  assert.equal(refusal(decideGitAccess(request('acme/payments', 'read'), policy)).code, 'workload_token_missing');
});

test('ref rules, scope: a token\'s matching write entries with ref rules are a layer of the push policy; one without them lets a push change every ref, and names itself', () => {
  const narrowed = basic('w', token(['github.com/acme/widgets:write:refs/heads/agent/run-42/*', 'github.com/acme/*:write:refs/tags/run-42/*:delete', 'github.com/acme/docs:read']));
  const d = decideGitAccess(request('acme/widgets', 'write', narrowed), SIGNED);
  assert.equal(d.ok, true);
  const layers = d.ok ? d.push?.layers : undefined;
  assert.deepEqual(layers?.map((l) => [l.source, l.entries]), [["this workload's scope", ['github.com/acme/widgets:write:refs/heads/agent/run-42/*', 'github.com/acme/*:write:refs/tags/run-42/*:delete']]]);
  assert.equal(d.ok && d.push?.everyRef, undefined);
  const open = basic('w', token(['github.com/acme/widgets:write:refs/heads/agent/*', 'github.com/acme/*:write']));
  const o = decideGitAccess(request('acme/widgets', 'write', open), SIGNED);
  assert.deepEqual(o.ok && o.push, { host: 'github.com', protectedRefs: [], layers: [], everyRef: 'github.com/acme/*:write' });
  // A ref discovery or fetch carries no push policy.
  const read = decideGitAccess(request('acme/widgets', 'read', narrowed), SIGNED);
  assert.equal(read.ok, true);
  assert.equal('push' in read, false);
});
