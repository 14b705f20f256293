// Git scope patterns and their matching (src/git/scope.ts), table-driven.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  canonicalRepoPath,
  formatScopeEntry,
  gitScopeClaim,
  grantedAccess,
  parseRepoPattern,
  parseScopeEntry,
  patternMatches,
  type RepoPattern,
  type ScopeEntry,
} from '../../src/git/scope.ts';

function pattern(text: string): RepoPattern {
  const p = parseRepoPattern(text);
  assert.ok(p.ok, `${text}: ${!p.ok && p.reason}`);
  return p.value;
}

function scope(...texts: string[]): ScopeEntry[] {
  return texts.map((t) => {
    const e = parseScopeEntry(t);
    assert.ok(e.ok, `${t}: ${!e.ok && e.reason}`);
    return e.value;
  });
}

/** A request path as the route parser hands it over: raw, validated segments. */
const repo = (path: string) => canonicalRepoPath(path.split('/'));

test('scope entries parse to host key, canonical pattern and access', () => {
  const cases: [string, ScopeEntry][] = [
    ['github.com/acme/widgets:write', { host: 'github.com', pattern: { segments: ['acme', 'widgets'], wildcard: false }, access: 'write' }],
    ['github.com/acme/*:read', { host: 'github.com', pattern: { segments: ['acme'], wildcard: true }, access: 'read' }],
    ['GitHub.COM/Acme/Widgets.git:read', { host: 'github.com', pattern: { segments: ['acme', 'widgets'], wildcard: false }, access: 'read' }],
    ['git.corp.example:8443/group/sub/repo:write', { host: 'git.corp.example:8443', pattern: { segments: ['group', 'sub', 'repo'], wildcard: false }, access: 'write' }],
    ['git.corp.example:8443/group/sub/*:read', { host: 'git.corp.example:8443', pattern: { segments: ['group', 'sub'], wildcard: true }, access: 'read' }],
    ['github.com/*:read', { host: 'github.com', pattern: { segments: [], wildcard: true }, access: 'read' }],
    ['dev.azure.com/org/project/_git/repo:read', { host: 'dev.azure.com', pattern: { segments: ['org', 'project', '_git', 'repo'], wildcard: false }, access: 'read' }],
    ['github.com/acme/my.repo-v2_x~y+z:read', { host: 'github.com', pattern: { segments: ['acme', 'my.repo-v2_x~y+z'], wildcard: false }, access: 'read' }],
  ];
  for (const [text, expected] of cases) assert.deepEqual(parseScopeEntry(text), { ok: true, value: expected }, text);
});

test('malformed scope entries are refused with the reason', () => {
  const cases: [string, RegExp][] = [
    ['github.com/acme/widgets', /must end in :read or :write/],
    ['github.com/acme/widgets:admin', /must end in :read or :write/],
    ['github.com/acme/widgets:READ', /must end in :read or :write/],
    ['github.com:write', /must be host\/path/],
    ['github.com/:write', /segment "" is not a repository name/],
    ['user@github.com/acme/x:read', /"user@github\.com" is not a host/],
    ['https://github.com/acme/x:read', /is not a host/],
    ['github.com:0/acme/x:read', /is not a host/],
    ['github.com/acme/*/x:read', /"\*" may only be the whole last segment/],
    ['github.com/acme/wid*:read', /segment "wid\*" is not a repository name/],
    ['github.com/*/*:read', /"\*" may only be the whole last segment/],
    ['github.com/acme/../payments:write', /segment "\.\." is not a repository name/],
    ['github.com/acme/./x:write', /segment "\." is not a repository name/],
    ['github.com/acme//x:write', /segment "" is not a repository name/],
    ['github.com/acme/x/:write', /segment "" is not a repository name/],
    ['github.com/acme/%70ayments:write', /segment "%70ayments" is not a repository name/],
    ['github.com/acme/pay ments:write', /is not a repository name/],
    ['github.com/acme/pay;ments:write', /is not a repository name/],
    [`github.com/${'a/'.repeat(32)}b:read`, /more than 32 segments/],
  ];
  for (const [text, reason] of cases) {
    const r = parseScopeEntry(text);
    assert.equal(r.ok, false, text);
    assert.match(!r.ok ? r.reason : '', reason, text);
  }
});

test('patterns match whole segments: exact paths exactly, a * prefix one or more segments below it', () => {
  const cases: [string, string, boolean][] = [
    ['acme/widgets', 'acme/widgets', true],
    ['acme/widgets', 'acme/widgets-old', false],
    ['acme/widgets', 'acme/widget', false],
    ['acme/widgets', 'acme', false],
    ['acme/widgets', 'acme/widgets/more', false],
    ['acme/widgets', 'other/widgets', false],
    ['acme/*', 'acme/widgets', true],
    ['acme/*', 'acme/anything-at-all', true],
    ['acme/*', 'acme', false],
    ['acme/*', 'acmecorp/widgets', false],
    ['acme/*', 'acm/widgets', false],
    ['acme/*', 'other/acme/widgets', false],
    ['*', 'acme/widgets', true],
    ['*', 'x', true],
  ];
  for (const [p, path, expected] of cases) assert.equal(patternMatches(pattern(p), repo(path)!), expected, `${p} vs ${path}`);
});

test('nested groups: a * prefix covers every depth below it, an exact path only itself', () => {
  const cases: [string, string, boolean][] = [
    ['group/*', 'group/repo', true],
    ['group/*', 'group/sub/repo', true],
    ['group/*', 'group/sub/deeper/repo', true],
    ['group/sub/*', 'group/repo', false],
    ['group/sub/*', 'group/sub/repo', true],
    ['group/sub/repo', 'group/sub/repo', true],
    ['group/sub/repo', 'group/sub/repo/extra', false],
    ['group/sub/repo', 'group/repo', false],
  ];
  for (const [p, path, expected] of cases) assert.equal(patternMatches(pattern(p), repo(path)!), expected, `${p} vs ${path}`);
});

test('one trailing .git is ignored on either side, only on the last segment', () => {
  const cases: [string, string, boolean][] = [
    ['acme/widgets', 'acme/widgets.git', true],
    ['acme/widgets.git', 'acme/widgets', true],
    ['acme/widgets.git', 'acme/widgets.git', true],
    ['acme/widgets', 'acme/widgets.git.git', false],
    ['acme/widgets.git.git', 'acme/widgets.git', false],
    ['acme.git/widgets', 'acme/widgets', false],
    ['acme/widgets', 'acme/.git', false],
    ['acme/*', 'acme/widgets.git', true],
    ['acme/widgets', 'acme/widgets.GIT', true],
  ];
  for (const [p, path, expected] of cases) assert.equal(patternMatches(pattern(p), repo(path)!), expected, `${p} vs ${path}`);
});

test('ASCII case is ignored (as GitHub does); Unicode look-alikes are not folded', () => {
  const cases: [string, string, boolean][] = [
    ['acme/widgets', 'ACME/Widgets', true],
    ['Acme/Widgets', 'acme/widgets', true],
    ['acme/*', 'AcMe/X', true],
    // KELVIN SIGN (U+212A) lower-cases to "k" with toLowerCase(); the host sees another name.
    ['acme/kit', 'acme/%E2%84%AAit', false],
    // LATIN CAPITAL LETTER I WITH DOT ABOVE, whose toLowerCase() is "i" plus a combining dot.
    ['acme/widgets', 'acme/w%C4%B0dgets', false],
  ];
  for (const [p, path, expected] of cases) assert.equal(patternMatches(pattern(p), repo(path)!), expected, `${p} vs ${path}`);
});

test('percent-encoded request paths are decoded before matching; one that does not decode matches nothing', () => {
  assert.deepEqual(repo('%61cme/widgets'), ['acme', 'widgets']);
  assert.equal(patternMatches(pattern('acme/widgets'), repo('%61cme/w%69dgets')!), true);
  assert.equal(patternMatches(pattern('acme/widgets'), repo('%41CME/widgets.git')!), true);
  // A name no pattern can spell (a space) is reachable only through a *.
  assert.equal(patternMatches(pattern('acme/*'), repo('acme/My%20Project')!), true);
  assert.equal(patternMatches(pattern('acme/my-project'), repo('acme/My%20Project')!), false);
  for (const undecodable of ['acme/%80', 'acme/%C3', 'acme/%ED%A0%80']) assert.equal(repo(undecodable), undefined, undecodable);
});

test('grantedAccess is the most any matching entry for that host grants', () => {
  const s = scope('github.com/acme/*:read', 'github.com/acme/widgets:write', 'git.corp.example/acme/payments:write');
  assert.equal(grantedAccess(s, 'github.com', repo('acme/widgets')!), 'write');
  assert.equal(grantedAccess(s, 'github.com', repo('acme/Widgets.git')!), 'write');
  assert.equal(grantedAccess(s, 'github.com', repo('acme/payments')!), 'read');
  assert.equal(grantedAccess(s, 'github.com', repo('other/widgets')!), undefined);
  assert.equal(grantedAccess(s, 'git.corp.example', repo('acme/payments')!), 'write');
  assert.equal(grantedAccess(s, 'git.corp.example', repo('acme/widgets')!), undefined, 'entries are per host');
  assert.equal(grantedAccess(s, 'github.com:8443', repo('acme/widgets')!), undefined, 'another port is another host');
  assert.equal(grantedAccess([], 'github.com', repo('acme/widgets')!), undefined);
});

test('gitScopeClaim writes each --git-repo in canonical form and names a bad one', () => {
  assert.deepEqual(gitScopeClaim(['GitHub.com/Acme/Widgets.git:write', 'github.com/acme/*:read']), ['github.com/acme/widgets:write', 'github.com/acme/*:read']);
  assert.throws(() => gitScopeClaim(['github.com/acme/widgets:write', 'github.com/acme/*/x:read']), /^Error: mint-token: --git-repo "github\.com\/acme\/\*\/x:read": "\*" may only be the whole last segment$/);
  assert.deepEqual(gitScopeClaim(['GitHub.com/Acme/Widgets.git:write:refs/heads/Agent/*:delete']), ['github.com/acme/widgets:write:refs/heads/Agent/*:delete'], 'ref names keep their case');
  assert.throws(() => gitScopeClaim(['github.com/acme/widgets:write:refs/heads/a b']), /^Error: mint-token: --git-repo "github\.com\/acme\/widgets:write:refs\/heads\/a b": "refs\/heads\/a b" is not a ref name/);
  for (const text of ['github.com/acme/widgets:write', 'git.corp.example:8443/g/*:read', 'github.com/*:read', 'github.com/acme/widgets:write:refs/heads/agent/run-42/*:refs/tags/v1:delete']) {
    const e = parseScopeEntry(text);
    assert.ok(e.ok);
    assert.equal(formatScopeEntry(e.value), text, 'canonical text reads back to itself');
  }
});
