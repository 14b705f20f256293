// What the REAL git and git-lfs print when the proxy refuses something: the proxy's answers are
// only useful if the clients show them. Each test runs the client against the proxy and
// checks its stderr line for line.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { makeGitHome, runGit } from '../support/git-client.ts';
import { assertNoSecrets, type ProxyProcess, stopProxyAndCleanUp } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { startUpstream, type TestUpstream } from '../support/upstream.ts';

const TOKEN_A = `msgA_${randomBytes(12).toString('hex')}`;
const TOKEN_F = `msgF_${randomBytes(12).toString('hex')}`;

let pki: TestPki;
/** Refuses every credential with 401, as a git host does for a revoked token. */
let refusing: TestUpstream;
/** Answers 403 with a text explanation, as GitHub does for a token without access to a repository. */
let forbidding: TestUpstream;
let proxy: ProxyProcess;
let home: { home: string; cleanup(): void };
let work: string;

before(async () => {
  pki = makeTestPki();
  [refusing, forbidding] = await Promise.all([startUpstream(pki), startUpstream(pki)]);
  refusing.handle((_req, res) => {
    res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"', 'content-type': 'text/plain' });
    res.end('Invalid username or password.\n');
  });
  forbidding.handle((_req, res) => {
    res.writeHead(403, { 'content-type': 'text/plain' });
    res.end('Permission to acme/widgets.git denied to ci-bot.\n');
  });
  work = mkdtempSync(join(tmpdir(), 'git-messages-'));
  const hostsFile = join(work, 'hosts.json');
  writeFileSync(hostsFile, JSON.stringify({ hosts: [{ host: forbidding.hostKey, auth: 'bearer', tokenEnv: 'TOKEN_F' }] }));
  proxy = await startServe({
    env: { GIT_HOST_A: refusing.hostKey, GIT_HOST_A_TOKEN: TOKEN_A, TOKEN_F, NODE_EXTRA_CA_CERTS: pki.caFile },
    args: ['--git-auth-listen', '127.0.0.1:0', '--git-hosts', hostsFile],
  });
  home = makeGitHome();
});

after(() => stopProxyAndCleanUp(proxy, { close: [refusing, forbidding], cleanup: [home, pki], dirs: [work] }));

const viaProxy = (host: string, repo: string) => `http://127.0.0.1:${proxy.ports.git}/${host}/${repo}`;

test("git prints the proxy's line for an upstream 401 and does not ask for a username", async () => {
  const r = await runGit(['clone', viaProxy(refusing.hostKey, 'acme/widgets.git'), join(work, 'refused')], { home: home.home });
  assert.equal(r.code, 128);
  assert.ok(
    r.stderr.includes(`remote: git-auth-proxy: the git host refused the proxy's credential for ${refusing.hostKey}; the operator must check its token\n`),
    r.stderr,
  );
  assert.doesNotMatch(r.stderr, /Username|Authentication failed/);
  assertNoSecrets(r.stderr, [TOKEN_A], "git's stderr");
});

test("git prints the git host's own explanation of an upstream 403, and does not ask for a username", async () => {
  const r = await runGit(['clone', viaProxy(forbidding.hostKey, 'acme/widgets.git'), join(work, 'forbidden')], { home: home.home });
  assert.equal(r.code, 128);
  assert.ok(r.stderr.includes('remote: Permission to acme/widgets.git denied to ci-bot.\n'), r.stderr);
  assert.match(r.stderr, /The requested URL returned error: 403/);
  assert.doesNotMatch(r.stderr, /Username/);
});

test("git-lfs prints the proxy's LFS message on push and on download, and no LFS request reaches the git host", async () => {
  const repo = join(work, 'lfs-repo');
  const git = async (args: string[]) => runGit(args, { cwd: repo, home: home.home });
  const must = async (args: string[]) => {
    const r = await git(args);
    assert.equal(r.code, 0, `git ${args.join(' ')}: ${r.stderr}`);
    return r;
  };
  await runGit(['init', '--quiet', '-b', 'main', repo], { home: home.home });
  await must(['lfs', 'install', '--local']);
  await must(['lfs', 'track', '*.bin']);
  writeFileSync(join(repo, 'model.bin'), randomBytes(4096));
  await must(['add', '.gitattributes', 'model.bin']);
  await must(['commit', '--quiet', '-m', 'an LFS object']);
  await must(['remote', 'add', 'origin', viaProxy(forbidding.hostKey, 'acme/widgets.git')]);
  const before = forbidding.requests.length;

  const push = await git(['lfs', 'push', 'origin', 'main']);
  assert.notEqual(push.code, 0);
  assert.ok(push.stderr.includes('batch response: git-auth-proxy: Git LFS is not available through this proxy\n'), push.stderr);
  assert.doesNotMatch(push.stderr, /Authorization error|Authentication|proper access|locksverify/);

  // Download: the object is gone locally, so the checkout's smudge filter asks the LFS API.
  rmSync(join(repo, '.git', 'lfs', 'objects'), { recursive: true, force: true });
  rmSync(join(repo, 'model.bin'));
  const checkout = await git(['checkout', '--', 'model.bin']);
  assert.notEqual(checkout.code, 0);
  assert.match(checkout.stderr, /Smudge error: Error downloading model\.bin \([0-9a-f]+\): batch response: git-auth-proxy: Git LFS is not available through this proxy/);

  const lfsSeenUpstream = forbidding.requests.slice(before).filter((r) => r.url.includes('/info/lfs'));
  assert.deepEqual(lfsSeenUpstream, []);
  // A log line is written once its answer is out, a moment after git-lfs may have exited.
  const lfsLogged = () => proxy.records().filter((r) => r.event === 'request' && String(r.path).includes('/info/lfs/'));
  await proxy.waitForRecord(() => lfsLogged().length >= 2, 'the log lines of the LFS requests');
  assert.ok(lfsLogged().every((r) => r.status === 501 && r.error === 'lfs_not_supported'), JSON.stringify(lfsLogged()));
});
