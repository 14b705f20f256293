// Request framing on the upstream leg, replayed as an attacker would, against the proxy as `serve` starts it, in
// front of the real `git http-backend` behind an HTTPS server that answers a GET before reading
// any body it announced (as Node's, and most servers, do: the unread body is then read off the
// connection and discarded).
//
// The attack this guards against: a GET that announces `Content-Length: N` is forwarded with that
// header but without a body. The upstream answers it, then reads the first N bytes of the proxy's
// NEXT request on the pooled connection as the GET's body and parses the rest as a request of its
// own. With N chosen to end inside a header value the workload controls (User-Agent), the rest is a
// request line the workload wrote followed by the proxy's own Host and Authorization: a push to any
// repository the host token reaches, outside the workload's scope, never seen by the proxy's log.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { signBotToken } from '../../src/auth/jwt.ts';
import { gitEnv, makeGitHome, runGit } from '../support/git-client.ts';
import { startGitServer, type GitServer } from '../support/git-server.ts';
import { rawExchange, statusOf } from '../support/http-client.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const HOST_TOKEN = `framing_${randomBytes(16).toString('hex')}`;
const SIGNING_KEY = randomBytes(32).toString('hex');
const CRLF = '\r\n';

let pki: TestPki;
let server: GitServer;
let proxy: ProxyProcess;
let readToken: string;
let gitHome: { home: string; cleanup(): void };

function workloadToken(scope: string[]): string {
  const now = Math.floor(Date.now() / 1000);
  return signBotToken({ sub: 'bot-1', workflow: 'wf', run_id: 'run-1', iat: now, exp: now + 600, git: scope }, Buffer.from(SIGNING_KEY));
}

before(async () => {
  pki = makeTestPki();
  server = await startGitServer({ pki, auth: { type: 'bearer', token: HOST_TOKEN } });
  server.createBareRepo('org/a.git');
  server.createBareRepo('org/b.git');
  proxy = await startServe({
    env: { GIT_HOST_A: server.hostKey, GIT_HOST_A_TOKEN: HOST_TOKEN, GIT_PROXY_SIGNING_KEY: SIGNING_KEY, NODE_EXTRA_CA_CERTS: pki.caFile },
  });
  readToken = workloadToken([`${server.hostKey}/org/a:read`]);
  gitHome = makeGitHome();
});

after(async () => {
  await proxy?.stop();
  await server?.close();
  gitHome?.cleanup();
  pki?.cleanup();
});

const refOf = (repo: string, ref: string): string | undefined => {
  try {
    return execFileSync('git', ['--git-dir', `${server.root}/${repo}`, 'rev-parse', '--verify', '--quiet', ref], { env: gitEnv(gitHome.home), encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
};

function pktLine(payload: string): string {
  return (payload.length + 4).toString(16).padStart(4, '0') + payload;
}

/** A receive-pack request body that creates `ref` at an object the repository already has: one command and an empty pack. */
function createRefBody(sha: string, ref: string): Buffer {
  const commands = pktLine(`${'0'.repeat(40)} ${sha} ${ref}\0report-status\n`) + '0000';
  const packHead = Buffer.concat([Buffer.from('PACK'), Buffer.from([0, 0, 0, 2, 0, 0, 0, 0])]);
  const pack = Buffer.concat([packHead, createHash('sha1').update(packHead).digest()]);
  return Buffer.concat([Buffer.from(commands, 'latin1'), pack]);
}

/** A GET of ref discovery that announces a body of `n` bytes and sends it. */
function getWithBody(repo: string, n: number, token: string): string {
  return (
    [`GET /${server.hostKey}/${repo}/info/refs?service=git-upload-pack HTTP/1.1`, 'Host: proxy', `Authorization: Bearer ${token}`, `Content-Length: ${n}`, 'Connection: close'].join(CRLF) +
    CRLF + CRLF + 'A'.repeat(n)
  );
}

test('framing: a GET announcing a body cannot smuggle a push into a repository outside a read-only scope (the three-request replay against git http-backend)', async () => {
  const target = refOf('org/b.git', 'refs/heads/main')!;
  assert.ok(target, 'org/b has a main branch to point the smuggled ref at');
  // What the proxy writes upstream for the second request begins with its request line and then
  // the client's first allowlisted header: the GET's announced length ends inside that value.
  const smuggledLine = 'POST /org/b.git/git-receive-pack HTTP/1.1';
  const eaten = `POST /org/a.git/git-upload-pack HTTP/1.1${CRLF}user-agent: x `;
  const body = createRefBody(target, 'refs/heads/pwned');

  // 1: in scope (read org/a), announcing exactly as many bytes as the upstream must swallow.
  const first = await rawExchange(proxy.ports.git!, getWithBody('org/a.git', eaten.length, readToken));
  // 2: in scope too (an upload-pack on org/a), carrying the smuggled request line in User-Agent.
  const second = await rawExchange(
    proxy.ports.git!,
    Buffer.concat([
      Buffer.from(
        [`POST /${server.hostKey}/org/a.git/git-upload-pack HTTP/1.1`, `User-Agent: x ${smuggledLine}`, 'Content-Type: application/x-git-receive-pack-request', `Content-Length: ${body.length}`, 'Host: proxy', `Authorization: Bearer ${readToken}`, 'Connection: close'].join(CRLF) + CRLF + CRLF,
      ),
      body,
    ]),
  );
  // 3: an ordinary in-scope request, which pushes whatever the upstream still has queued to a client.
  await rawExchange(proxy.ports.git!, getWithBody('org/a.git', 0, readToken));

  assert.equal(refOf('org/b.git', 'refs/heads/pwned'), undefined, 'the smuggled push created a ref in org/b');
  assert.ok(!server.requests.some((r) => r.url.includes('/org/b.git')), 'the upstream saw a request for org/b');
  assert.equal(statusOf(first), 400, 'a GET that carries a body is refused');
  assert.match(first, /GET or HEAD request may not carry a body/);
  assert.notEqual(statusOf(second), 0);
  // The GET that carried a body never reached the upstream; every request that did announced no body.
  for (const r of server.requests) {
    if (r.method === 'GET') {
      assert.equal(r.headers['content-length'], undefined, `GET ${r.url} reached the upstream with a Content-Length`);
      assert.equal(r.headers['transfer-encoding'], undefined, `GET ${r.url} reached the upstream with a Transfer-Encoding`);
    }
  }
});

test('framing: after a GET announcing a body, another workload on the pooled connection still gets its own repository (cross-workload poisoning replay)', async () => {
  const before = server.requests.length;
  // Workload 1 announces a body long enough to swallow the head of whatever request comes next.
  const first = await rawExchange(proxy.ports.git!, getWithBody('org/a.git', 180, readToken));
  // Workload 2, the real git, reads org/a with its own token.
  const other = workloadToken([`${server.hostKey}/org/*:read`]);
  const result = await runGit(
    ['-c', `http.extraHeader=Authorization: Bearer ${other}`, 'ls-remote', `http://127.0.0.1:${proxy.ports.git}/${server.hostKey}/org/a.git`],
    { home: gitHome.home },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, new RegExp(`^${refOf('org/a.git', 'refs/heads/main')}\\trefs/heads/main$`, 'm'));
  const seen = server.requests.slice(before);
  assert.ok(seen.length > 0 && seen.every((r) => r.url.startsWith('/org/a.git/') && r.authorized), JSON.stringify(seen.map((r) => r.url)));
  assert.equal(statusOf(first), 400, 'a GET that carries a body is refused');
});
