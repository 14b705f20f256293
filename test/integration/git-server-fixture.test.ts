// Exercises the git smart-HTTP test fixture directly (no proxy in between),
// with the real git client, so other tests can rely on it.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeGitHome, runGit, type GitResult } from '../support/git-client.ts';
import { authorizationFor, startGitServer, type GitServer, type GitServerAuth } from '../support/git-server.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

function assertOk(result: GitResult, what: string): void {
  assert.equal(result.code, 0, `${what} failed (exit ${result.code}):\n${result.stderr}`);
}

/** Sets up a server plus a git HOME that trusts the test CA and sends the right credential. */
async function setup(t: TestContext, pki: TestPki, auth: GitServerAuth) {
  const server = await startGitServer({ pki, auth });
  t.after(() => server.close());
  const { home, cleanup } = makeGitHome();
  t.after(cleanup);
  for (const [key, value] of [
    ['http.sslCAInfo', pki.caFile],
    ['http.extraHeader', `Authorization: ${authorizationFor(auth)}`],
  ]) {
    assertOk(await runGit(['config', '--global', key, value], { home }), `git config ${key}`);
  }
  const work = mkdtempSync(join(tmpdir(), 'test-git-work-'));
  t.after(() => rmSync(work, { recursive: true, force: true }));
  server.createBareRepo('org/repo.git');
  const url = `https://${server.hostKey}/org/repo.git`;
  const clone = async (name: string): Promise<string> => {
    const dir = join(work, name);
    assertOk(await runGit(['clone', '--quiet', url, dir], { home }), `clone into ${name}`);
    return dir;
  };
  return { server, home, clone };
}

const INFO_REFS = '/org/repo.git/info/refs?service=git-upload-pack';

/** A plain HTTPS GET to the fixture, trusting only the test CA. */
function get(server: GitServer, pki: TestPki, path: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: server.port, path, ca: pki.caPem, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

test('git server fixture', async (t) => {
  const pki = makeTestPki();
  t.after(() => pki.cleanup());

  await t.test('bearer auth: clone, push, re-clone over protocol v2', async (t) => {
    const { server, home, clone } = await setup(t, pki, { type: 'bearer', token: 'secret-bearer-token' });

    const first = await clone('first');
    assert.equal(readFileSync(join(first, 'README.md'), 'utf8'), 'hello\n');
    assert.ok(
      server.requests.some((r) => String(r.headers['git-protocol'] ?? '').includes('version=2')),
      'expected a request asking for protocol v2',
    );
    assert.ok(server.requests.every((r) => r.authorized));

    writeFileSync(join(first, 'README.md'), 'hello again\n');
    assertOk(await runGit(['commit', '--quiet', '-am', 'update readme'], { cwd: first, home }), 'commit');
    assertOk(await runGit(['push', '--quiet', 'origin', 'main'], { cwd: first, home }), 'push');

    const second = await clone('second');
    assert.equal(readFileSync(join(second, 'README.md'), 'utf8'), 'hello again\n');
  });

  await t.test('large push (chunked body) and large fetch negotiation (gzipped body)', async (t) => {
    const { server, home, clone } = await setup(t, pki, { type: 'bearer', token: 'another-token' });
    const first = await clone('first');

    // Over http.postBuffer (1 MiB), git streams the pack with chunked encoding.
    writeFileSync(join(first, 'random.bin'), randomBytes(3 * 1024 * 1024));
    assertOk(await runGit(['add', 'random.bin'], { cwd: first, home }), 'add');
    assertOk(await runGit(['commit', '--quiet', '-m', 'big blob'], { cwd: first, home }), 'commit');
    // Many branches on distinct commits make a clone's list of wants exceed
    // 1 KiB, which git sends gzipped.
    const branches = 40;
    for (let i = 0; i < branches; i++) {
      assertOk(
        await runGit(['commit', '--quiet', '--allow-empty', '-m', `empty ${i}`], { cwd: first, home }),
        'commit',
      );
    }
    const refspecs = Array.from({ length: branches }, (_, i) => `HEAD~${i}:refs/heads/b${i}`);
    assertOk(await runGit(['push', '--quiet', 'origin', 'main', ...refspecs], { cwd: first, home }), 'push');
    assert.ok(
      server.requests.some((r) => r.method === 'POST' && r.headers['transfer-encoding'] === 'chunked'),
      'expected a chunked POST',
    );

    const second = await clone('second');
    assert.equal(readFileSync(join(second, 'random.bin')).length, 3 * 1024 * 1024);
    const refs = await runGit(['for-each-ref', '--format=%(refname)', 'refs/remotes/origin/'], {
      cwd: second,
      home,
    });
    assertOk(refs, 'for-each-ref');
    assert.ok(refs.stdout.includes(`refs/remotes/origin/b${branches - 1}\n`));
    assert.ok(
      server.requests.some((r) => r.method === 'POST' && r.headers['content-encoding'] === 'gzip'),
      'expected a gzipped POST',
    );
  });

  await t.test('basic auth: clone works, wrong credentials get 401', async (t) => {
    const auth: GitServerAuth = { type: 'basic', username: 'x-access-token', token: 'secret-basic-token' };
    const { server, clone } = await setup(t, pki, auth);

    const dir = await clone('basic');
    assert.equal(readFileSync(join(dir, 'README.md'), 'utf8'), 'hello\n');

    assert.equal((await get(server, pki, INFO_REFS, { Authorization: authorizationFor(auth) })).status, 200);
    for (const authorization of [
      undefined,
      'Bearer secret-basic-token',
      authorizationFor({ ...auth, token: 'wrong' }),
      authorizationFor({ ...auth, username: 'someone-else' }),
    ]) {
      const before = server.requests.length;
      const headers: Record<string, string> = authorization === undefined ? {} : { Authorization: authorization };
      const res = await get(server, pki, INFO_REFS, headers);
      assert.equal(res.status, 401, `Authorization: ${authorization}`);
      assert.equal(res.headers['www-authenticate'], 'Basic realm="test"');
      assert.equal(server.requests.length, before + 1);
      assert.equal(server.requests.at(-1)?.authorized, false);
    }
  });

  await t.test('bearer auth: 401 for a wrong token, v2 advertisement, 404 for an unknown repo', async (t) => {
    const { server } = await setup(t, pki, { type: 'bearer', token: 'right' });
    assert.equal((await get(server, pki, INFO_REFS, { Authorization: 'Bearer wrong' })).status, 401);

    // The backend really speaks v2 when asked (Git-Protocol reaches it as GIT_PROTOCOL).
    const v2 = await get(server, pki, INFO_REFS, { Authorization: 'Bearer right', 'Git-Protocol': 'version=2' });
    assert.equal(v2.status, 200);
    assert.equal(v2.headers['content-type'], 'application/x-git-upload-pack-advertisement');
    assert.match(v2.body, /^000eversion 2\n/);

    const missing = await get(server, pki, '/org/missing.git/info/refs?service=git-upload-pack', {
      Authorization: 'Bearer right',
    });
    assert.equal(missing.status, 404);
  });
});
