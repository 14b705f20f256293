// How a git request can end, through the git handler in this process (the harness): each ending
// is recorded once and gives the workload's concurrency slot back.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { after, before, test } from 'node:test';
import type { RevocationVerdict } from '../../src/auth/identity.ts';
import { signBotToken } from '../../src/auth/jwt.ts';
import { eventually } from '../support/eventually.ts';
import { send } from '../support/http-client.ts';
import { commandLine, FLUSH, GIT_CAPS, oid, pkt, ZERO } from '../support/push-bodies.ts';
import { startGitInProcess } from '../support/harness.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { startUpstream, type TestUpstream } from '../support/upstream.ts';
import { Secret } from '../../src/http/secret-value.ts';

let pki: TestPki;
let upstream: TestUpstream;
const key = randomBytes(32);

before(async () => {
  pki = makeTestPki();
  upstream = await startUpstream(pki);
});
after(async () => {
  await upstream.close();
  pki.cleanup();
});

function token(instance: string, hostKey = upstream.hostKey): string {
  const now = Math.floor(Date.now() / 1000);
  return signBotToken({ sub: instance, workflow: 'w', run_id: `run-${instance}`, iat: now, exp: now + 600, git: [`${hostKey}/acme/widgets:write`] }, key);
}

const refs = (port: number, instance: string, hostKey = upstream.hostKey) =>
  send(port, 'GET', `/${hostKey}/acme/widgets.git/info/refs?service=git-upload-pack`, { headers: { authorization: `Bearer ${token(instance, hostKey)}` } });

test('git endings: a throw in a step answers 500, is recorded once as internal, and gives the workload slot back (GitCall.endFailed, finish)', async () => {
  let broken = true;
  const git = await startGitInProcess({
    hostKey: upstream.hostKey,
    pki,
    workloadAuth: { key, maxLifetimeSec: 3600 },
    maxConcurrentPerWorkload: 1,
    token: { read: () => (broken ? (() => { throw new Error('boom in the token source'); })() : { ok: true, value: new Secret('ghp_ok_0123456789') }) },
  });
  try {
    assert.equal((await refs(git.port, 'g-throw')).status, 500);
    const rec = await git.records.nth(1);
    assert.deepEqual([rec.status, rec.error, rec.instance_id], [500, 'internal', 'g-throw']);
    assert.equal(git.logs.filter((l) => l.event === 'handler_error').length, 1);
    broken = false;
    assert.equal((await refs(git.port, 'g-throw')).status, 200, 'the slot came back: not 429 workload_busy');
  } finally {
    await git.close();
  }
});

test('git endings: a request whose client leaves while the deny list is asked is never forwarded, is recorded, and holds no slot (admitWorkload)', async () => {
  let answer!: (v: RevocationVerdict) => void;
  let asked!: () => void;
  const askedOnce = new Promise<void>((r) => (asked = r));
  let first = true;
  const git = await startGitInProcess({
    hostKey: upstream.hostKey,
    pki,
    workloadAuth: { key, maxLifetimeSec: 3600 },
    maxConcurrentPerWorkload: 1,
    revoked: () => {
      if (!first) return { kind: 'ok' };
      first = false;
      asked();
      return new Promise<RevocationVerdict>((r) => (answer = r));
    },
  });
  try {
    const before = upstream.requests.length;
    const path = `/${upstream.hostKey}/acme/widgets.git/info/refs?service=git-upload-pack`;
    const socket = connect(git.port, '127.0.0.1', () => socket.end(`GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token('g-fin')}\r\n\r\n`));
    socket.on('error', () => {});
    socket.resume();
    await askedOnce;
    await git.clientsGone();
    answer({ kind: 'ok' });
    const rec = await git.records.nth(1);
    assert.deepEqual([rec.status, rec.error], [0, 'client_aborted']);
    assert.equal(upstream.requests.length, before, 'nothing was forwarded');
    assert.equal((await refs(git.port, 'g-fin')).status, 200, 'no slot was held');
  } finally {
    await git.close();
  }
});

test('git endings: an upstream status of 000 is answered 502 upstream_protocol and recorded, never a crash (relayGitAnswer)', async () => {
  const raw = createTlsServer({ key: pki.keyPem, cert: pki.certPem }, (socket) => {
    socket.on('error', () => {});
    socket.once('data', () => socket.end('HTTP/1.1 000 Odd\r\nContent-Length: 0\r\n\r\n'));
  });
  await new Promise<void>((r) => raw.listen(0, '127.0.0.1', r));
  const hostKey = `127.0.0.1:${(raw.address() as { port: number }).port}`;
  const git = await startGitInProcess({ hostKey, pki, workloadAuth: { key, maxLifetimeSec: 3600 }, maxConcurrentPerWorkload: 1 });
  try {
    const r = await refs(git.port, 'g-odd', hostKey);
    assert.equal(r.status, 502);
    assert.match(String(r.body), /^git-auth-proxy: /);
    const rec = await git.records.nth(1);
    assert.deepEqual([rec.status, rec.error], [502, 'upstream_bad_status']);
    assert.equal((await refs(git.port, 'g-odd', hostKey)).status, 502, 'the slot came back: not 429');
  } finally {
    await git.close();
    await new Promise((r) => raw.close(r));
  }
});

test('git endings: a request the listener refuses (HTTP/1.0 without Host) gets a record like every other refusal (refuseAtGit)', async () => {
  const git = await startGitInProcess({ hostKey: upstream.hostKey, pki });
  try {
    const answer = await new Promise<string>((resolve) => {
      let text = '';
      const socket = connect(git.port, '127.0.0.1', () => socket.write(`GET /${upstream.hostKey}/acme/widgets.git/info/refs HTTP/1.0\r\n\r\n`));
      socket.on('data', (c: Buffer) => (text += c.toString()));
      socket.on('close', () => resolve(text));
    });
    assert.match(answer, /^HTTP\/1\.1 400 [^]*git-auth-proxy: a Host header is required/);
    const rec = await git.records.nth(1);
    assert.deepEqual([rec.status, rec.error, rec.method], [400, 'host_header_missing', 'GET']);
  } finally {
    await git.close();
  }
});

/**
 * An upstream that answers a push at once, before its body has ended, as git http-backend does
 * with a malformed upload: the answer is complete while the body still streams. `closed` turns
 * true when the upstream's connection for it is closed.
 */
function answerBeforeTheBody(): { closed: () => boolean; restore: () => void } {
  let closed = false;
  // As the soak's git server (and a host behind a load balancer that keeps connections): an idle
  // connection is never closed from the upstream's side.
  const keepAliveTimeout = upstream.server.keepAliveTimeout;
  upstream.server.keepAliveTimeout = 0;
  upstream.handle((req, res) => {
    req.socket.once('close', () => (closed = true));
    res.writeHead(200, { 'content-type': 'application/x-git-receive-pack-result', 'content-length': 4 });
    res.end('0000');
  });
  return {
    closed: () => closed,
    restore: () => {
      upstream.handle(undefined);
      upstream.server.keepAliveTimeout = keepAliveTimeout;
    },
  };
}

/** The first chunk of a push: its command list whole, then the start of its pack (the proxy reads up to there before it opens the upstream). */
const FIRST_CHUNK = Buffer.concat([pkt(commandLine(ZERO, oid(1), 'refs/heads/x', GIT_CAPS)), FLUSH, Buffer.from('PACK\0\0\0\x02', 'latin1')]);

/** A chunked push with its first chunk only; resolves with the socket once the whole answer ('0000') is read. */
async function pushWithoutEnd(port: number): Promise<{ socket: ReturnType<typeof connect>; closed: Promise<void> }> {
  const path = `/${upstream.hostKey}/acme/widgets.git/git-receive-pack`;
  const socket = connect(port, '127.0.0.1', () =>
    socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-receive-pack-request\r\nTransfer-Encoding: chunked\r\n\r\n${FIRST_CHUNK.length.toString(16)}\r\n${FIRST_CHUNK.toString('latin1')}\r\n`),
  );
  socket.on('error', () => {});
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  let text = '';
  await new Promise<void>((answered) => socket.on('data', (c: Buffer) => (text += c.toString('latin1')).endsWith('\r\n\r\n0000') && answered()));
  return { socket, closed };
}

test('request end lets go of its upstream: a push its git host answered before the body ended has the upstream connection closed when the request ends, not held by the rest of the body (RequestLifecycle.finish)', { timeout: 30_000 }, async (t) => {
  const upstreamSide = answerBeforeTheBody();
  // The body's idle limit is off: only the request's end may let the upstream connection go.
  const git = await startGitInProcess({ hostKey: upstream.hostKey, pki, bodyIdleMs: 0 });
  try {
    const client = await pushWithoutEnd(git.port);
    client.socket.destroy();
    const rec = await git.records.nth(1);
    assert.deepEqual([rec.status, rec.error], [200, undefined]);
    await eventually('the upstream connection of the answered push to close', upstreamSide.closed, t.signal);
  } finally {
    upstreamSide.restore();
    await git.close();
  }
});

test('request end lets go of its upstream: a client that keeps its connection after the answer to a push whose body has not ended has it closed once the answer is out, and the upstream connection with it (RequestLifecycle.finish)', { timeout: 30_000 }, async (t) => {
  const upstreamSide = answerBeforeTheBody();
  // No timer of the listener's may close the connection: only the request's end.
  const git = await startGitInProcess({ hostKey: upstream.hostKey, pki, bodyIdleMs: 0, keepAliveMs: 0 });
  try {
    // The whole answer was read (pushWithoutEnd): only then does the proxy close the connection.
    const client = await pushWithoutEnd(git.port);
    await client.closed;
    await eventually('the upstream connection of the answered push to close', upstreamSide.closed, t.signal);
    assert.equal((await git.records.nth(1)).status, 200);
  } finally {
    upstreamSide.restore();
    await git.close();
  }
});
