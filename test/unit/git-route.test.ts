import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseGitRoute } from '../../src/git/route.ts';
import { pathForLog } from '../../src/http/log.ts';
import { HOSTILE_TARGETS } from '../support/hostile-targets.ts';

const HOST = 'github.com';
const registered = (key: string) => key === HOST || key === 'git.example.com:8443';

test('rule 1-3: the host is the first segment and the rest, with the query, is the upstream path', () => {
  const r = parseGitRoute('GET', '/github.com/org/repo.git/info/refs?service=git-upload-pack', registered);
  assert.deepEqual(r, {
    ok: true,
    hostKey: 'github.com',
    route: 'info-refs',
    upstreamPath: '/org/repo.git/info/refs?service=git-upload-pack',
    repo: ['org', 'repo.git'],
    access: 'read',
  });
});

test('each route names its repository path and whether it reads or writes (push discovery writes)', () => {
  const cases: [string, string, string[], string][] = [
    ['GET', '/github.com/o/r.git/info/refs?service=git-upload-pack', ['o', 'r.git'], 'read'],
    ['GET', '/github.com/o/r/info/refs?service=git-receive-pack', ['o', 'r'], 'write'],
    ['POST', '/github.com/group/sub/r.git/git-upload-pack', ['group', 'sub', 'r.git'], 'read'],
    ['POST', '/github.com/o/My%20Project/git-receive-pack', ['o', 'My%20Project'], 'write'],
  ];
  for (const [method, target, repo, access] of cases) {
    const r = parseGitRoute(method, target, registered);
    assert.ok(r.ok, target);
    assert.deepEqual([r.repo, r.access], [repo, access], target);
  }
});

test('the four smart-HTTP routes are accepted, with or without .git', () => {
  const cases: [string, string, string][] = [
    ['GET', '/github.com/o/r.git/info/refs?service=git-upload-pack', 'info-refs'],
    ['GET', '/github.com/o/r/info/refs?service=git-receive-pack', 'info-refs'],
    ['POST', '/github.com/o/r.git/git-upload-pack', 'upload-pack'],
    ['POST', '/github.com/o/r/git-receive-pack', 'receive-pack'],
  ];
  for (const [method, target, route] of cases) {
    const r = parseGitRoute(method, target, registered);
    assert.ok(r.ok, target);
    assert.equal(r.route, route);
    assert.equal(r.upstreamPath, target.slice('/github.com'.length));
  }
});

test('the host segment is compared case-insensitively', () => {
  const r = parseGitRoute('POST', '/GitHub.COM/o/r.git/git-upload-pack', registered);
  assert.ok(r.ok);
  assert.equal(r.hostKey, 'github.com');
});

test('a host key with a port and nested group paths are accepted', () => {
  const r = parseGitRoute('POST', '/git.example.com:8443/group/sub/repo.git/git-receive-pack', registered);
  assert.ok(r.ok);
  assert.equal(r.upstreamPath, '/group/sub/repo.git/git-receive-pack');
});

test('harmless percent-escapes in repository names pass through unchanged', () => {
  const r = parseGitRoute('GET', '/github.com/org/My%20Project/_git/repo/info/refs?service=git-upload-pack', registered);
  assert.ok(r.ok);
  assert.equal(r.upstreamPath, '/org/My%20Project/_git/repo/info/refs?service=git-upload-pack');
});

test('the upstream query is rebuilt from the service name, never copied', () => {
  const r = parseGitRoute('GET', '/github.com/o/r/info/refs?service=git-receive-pack', registered);
  assert.ok(r.ok);
  assert.ok(r.upstreamPath.endsWith('?service=git-receive-pack'));
});

test('a wrong method on a git route is 405 with the allowed method', () => {
  const r = parseGitRoute('GET', '/github.com/o/r.git/git-upload-pack', registered);
  assert.equal(r.ok, false);
  assert.equal(!r.ok && r.error.status, 405);
  assert.equal(!r.ok && r.allow, 'POST');
});

test('Git LFS requests (<repo>/info/lfs/...) are lfs_not_supported (501) whatever the method, and never a route', () => {
  for (const [method, target] of [
    ['POST', '/github.com/o/r.git/info/lfs/objects/batch'],
    ['POST', '/github.com/o/r.git/info/lfs/locks/verify'],
    ['GET', '/github.com/o/r.git/info/lfs/locks'],
    ['PUT', '/github.com/group/sub/r.git/info/lfs/objects/abc'],
    ['POST', '/github.com/o/r/info/lfs/objects/batch'],
  ]) {
    const r = parseGitRoute(method!, target!, registered);
    assert.equal(r.ok, false, target);
    assert.equal(!r.ok && r.error.code, 'lfs_not_supported', target);
    assert.equal(!r.ok && r.error.status, 501, target);
  }
  // Only under a registered host, and only with a repository before it.
  const unregistered = parseGitRoute('POST', '/evil.example/o/r.git/info/lfs/objects/batch', registered);
  assert.equal(!unregistered.ok && unregistered.error.code, 'host_not_registered');
  const noRepo = parseGitRoute('POST', '/github.com/info/lfs/objects/batch', registered);
  assert.equal(!noRepo.ok && noRepo.error.code, 'not_git_route');
});

test('every hostile target in the table gets its expected status from the route parser', () => {
  assert.ok(HOSTILE_TARGETS.length >= 50, 'the table holds at least 50 targets');
  for (const h of HOSTILE_TARGETS) {
    if (h.parser) continue; // refused by Node's HTTP parser; covered by the integration test
    const r = parseGitRoute(h.method, h.target.replaceAll('{host}', HOST), registered);
    assert.equal(r.ok, false, `${h.why}: ${h.target} must be refused`);
    assert.equal(!r.ok && r.error.status, h.status, `${h.why}: ${h.target}`);
  }
});

test('no accepted upstream path ever contains a dot segment or an encoded separator', () => {
  const pieces = ['o', 'r.git', '..', '.', '%2e', '%2E', '%2f', '%5c', '%25', 'a%20b', '...', 'info', 'refs', 'git-upload-pack', ';', 'x;y', '%3b', ''];
  let accepted = 0;
  // Every combination of up to four pieces before each route suffix.
  const combos = (n: number): string[][] => (n === 0 ? [[]] : combos(n - 1).flatMap((c) => pieces.map((p) => [...c, p])));
  for (const n of [1, 2, 3]) {
    for (const parts of combos(n)) {
      for (const [method, suffix] of [['GET', 'info/refs?service=git-upload-pack'], ['POST', 'git-receive-pack']] as const) {
        const r = parseGitRoute(method, `/github.com/${parts.join('/')}/${suffix}`, registered);
        if (!r.ok) continue;
        accepted++;
        const path = r.upstreamPath.split('?')[0]!;
        for (const seg of path.split('/').slice(1)) {
          assert.notEqual(seg, '.');
          assert.notEqual(seg, '..');
          assert.doesNotMatch(seg, /%(2e|2f|5c|25|3b)/i);
          assert.doesNotMatch(seg, /[;\\]/);
        }
      }
    }
  }
  assert.ok(accepted > 100, 'the generator produced accepted routes to check');
});

test('the access log path never includes the query', () => {
  assert.equal(pathForLog('/github.com/o/r/info/refs?service=git-upload-pack'), '/github.com/o/r/info/refs');
  assert.equal(pathForLog('/x'.repeat(600)).length, 513);
});
