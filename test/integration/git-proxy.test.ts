// The git proxy's rules, exercised against the proxy as `serve` starts it, with recording HTTPS upstreams.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { request, type IncomingMessage } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { HOSTILE_TARGETS } from '../support/hostile-targets.ts';
import { rawExchange, seenResponses, send, statusOf } from '../support/http-client.ts';
import { assertNoSecrets, type ProxyProcess, stopProxyAndCleanUp } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { digestAndAnswer, startUpstream, type TestUpstream } from '../support/upstream.ts';

const TOKEN_A = `tokA_${randomBytes(12).toString('hex')}`;
const TOKEN_B = `tokB_${randomBytes(12).toString('hex')}`;
const TOKEN_C1 = `tokC1_${randomBytes(12).toString('hex')}`;
const TOKEN_C2 = `tokC2_${randomBytes(12).toString('hex')}`;
const TOKEN_OTHER = `tokO_${randomBytes(12).toString('hex')}`;
const USER_B = 'svc-bot';
const BASIC_B = Buffer.from(`${USER_B}:${TOKEN_B}`).toString('base64');
const SECRETS = [TOKEN_A, TOKEN_B, TOKEN_C1, TOKEN_C2, TOKEN_OTHER, BASIC_B];
const INFO = 'info/refs?service=git-upload-pack';

let pki: TestPki;
let otherPki: TestPki;
let upA: TestUpstream;
let upB: TestUpstream;
let upC: TestUpstream;
let upUntrusted: TestUpstream;
let upInsecure: TestUpstream;
let blackhole: TcpServer;
let closedPort: number;
let dir: string;
let tokenFile: string;
let proxy: ProxyProcess;
let port: number;

function listenTcp(server: TcpServer): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

before(async () => {
  pki = makeTestPki();
  otherPki = makeTestPki('other');
  [upA, upB, upC, upUntrusted, upInsecure] = await Promise.all([
    startUpstream(pki),
    startUpstream(pki),
    startUpstream(pki),
    startUpstream(otherPki),
    startUpstream(otherPki),
  ]);
  // Accepts TCP but never speaks TLS: the handshake can only time out.
  blackhole = createTcpServer(() => {});
  const blackholePort = await listenTcp(blackhole);
  // Port 1: nothing listens there, and no listener on port 0 is ever given it, unlike a port
  // closed after use, which a test running beside this one may be given.
  closedPort = 1;

  dir = mkdtempSync(join(tmpdir(), 'git-proxy-test-'));
  tokenFile = join(dir, 'token-c');
  writeFileSync(tokenFile, `${TOKEN_C1}\n`);
  const hostsFile = join(dir, 'hosts.json');
  const bearer = (host: string, extra: Record<string, unknown>) => ({ host, auth: 'bearer', ...extra });
  writeFileSync(
    hostsFile,
    JSON.stringify({
      hosts: [
        bearer(upC.hostKey, { tokenFile, caFile: pki.caFile }),
        bearer(upUntrusted.hostKey, { tokenEnv: 'TOKEN_OTHER' }),
        bearer(upInsecure.hostKey, { tokenEnv: 'TOKEN_OTHER', tlsInsecureSkipVerify: true }),
        bearer(`127.0.0.1:${closedPort}`, { tokenEnv: 'TOKEN_OTHER' }),
        bearer(`127.0.0.1:${blackholePort}`, { tokenEnv: 'TOKEN_OTHER' }),
        bearer('empty.example', { tokenEnv: 'EMPTY_TOKEN' }),
        bearer('crlf.example', { tokenEnv: 'CRLF_TOKEN' }),
      ],
    }),
  );
  proxy = await startServe({
    env: {
      GIT_HOST_A: upA.hostKey,
      GIT_HOST_A_TOKEN: TOKEN_A,
      GIT_HOST_B: upB.hostKey,
      GIT_HOST_B_TOKEN: TOKEN_B,
      GIT_HOST_B_USERNAME: USER_B,
      TOKEN_OTHER,
      EMPTY_TOKEN: '',
      CRLF_TOKEN: 'abc\r\nX-Injected: 1',
      // Hosts A and B are trusted through the process-wide extra CA, as in production.
      NODE_EXTRA_CA_CERTS: pki.caFile,
    },
    args: ['--git-auth-listen', '127.0.0.1:0', '--git-hosts', hostsFile, '--upstream-connect-timeout', '300ms'],
  });
  port = proxy.ports.git!;
});

after(() => stopProxyAndCleanUp(proxy, { close: [upA, upB, upC, upUntrusted, upInsecure, blackhole], cleanup: [pki, otherPki], dirs: [dir] }));

const lastRequest = (u: TestUpstream) => u.requests[u.requests.length - 1]!;

test('rule 1: a registered bearer host gets HTTPS with Authorization: Bearer <token>', async () => {
  const before = upA.requests.length;
  const r = await send(port, 'GET', `/${upA.hostKey}/org/repo.git/${INFO}`);
  assert.equal(r.status, 200);
  assert.equal(upA.requests.length, before + 1);
  const seen = lastRequest(upA);
  assert.equal(seen.headers.authorization, `Bearer ${TOKEN_A}`);
  assert.equal(seen.url, `/org/repo.git/${INFO}`);
  assert.equal(seen.headers.host, upA.hostKey);
});

test('rule 2: a registered basic host gets Authorization: Basic base64(username:token)', async () => {
  const r = await send(port, 'POST', `/${upB.hostKey}/org/repo.git/git-upload-pack`, { body: '0000', headers: { 'content-type': 'application/x-git-upload-pack-request' } });
  assert.equal(r.status, 200);
  assert.equal(lastRequest(upB).headers.authorization, `Basic ${BASIC_B}`);
  assert.equal(lastRequest(upB).url, '/org/repo.git/git-upload-pack');
});

test('rule 3: an unknown host is refused with 403 and never contacted', async () => {
  const r = await send(port, 'GET', `/unknown.example/org/repo.git/${INFO}`);
  assert.equal(r.status, 403);
  assert.match(r.headers['content-type'] ?? '', /^text\/plain/);
  assert.match(r.body.toString(), /not in the proxy registry/);
});

test('rule 4: a bare path is refused with 400', async () => {
  assert.equal((await send(port, 'GET', '/')).status, 400);
});

test('rule 5: /healthz answers 200', async () => {
  const r = await send(port, 'GET', '/healthz');
  assert.equal(r.status, 200);
  assert.equal(r.body.toString(), 'ok\n');
});

test('rule 6: a large chunked POST body is forwarded completely', async () => {
  const body = randomBytes(16 * 1024 * 1024);
  const r = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method: 'POST', path: `/${upA.hostKey}/org/repo.git/git-receive-pack`, headers: { 'content-type': 'application/x-git-receive-pack-request' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (s: string) => (text += s)).on('end', () => resolve({ status: res.statusCode!, text }));
      },
    );
    req.on('error', reject);
    // Several writes without a length: Node frames them with chunked encoding.
    for (let i = 0; i < body.length; i += 1 << 20) req.write(body.subarray(i, i + (1 << 20)));
    req.end();
  });
  assert.equal(r.status, 200);
  assert.deepEqual(JSON.parse(r.text), { bytes: body.length, sha256: createHash('sha256').update(body).digest('hex') });
  assert.equal(lastRequest(upA).headers['transfer-encoding'], 'chunked');
});

test('rule 7: a registered host whose token is empty gets 503 and is never contacted', async () => {
  const r = await send(port, 'GET', `/empty.example/org/repo.git/${INFO}`);
  assert.equal(r.status, 503);
  // The answer names what the operator must set (the variable here; a file when the token is one).
  assert.match(r.body.toString(), /no token is configured for that git host: the variable EMPTY_TOKEN is empty or unset/);
});

test('rule 8: encoded host forms are refused with 403', async () => {
  for (const host of [`${upA.hostKey.replace('1', '%31')}`, `${upA.hostKey}%2fevil.example`, `%31${upA.hostKey.slice(1)}`]) {
    assert.equal((await send(port, 'GET', `/${host}/org/repo.git/${INFO}`)).status, 403, host);
  }
});

test('rule 9: dot-dot traversal after the host is refused with 403', async () => {
  const before = upA.requests.length;
  for (const p of [`/${upA.hostKey}/../${upB.hostKey}/org/repo.git/${INFO}`, `/${upA.hostKey}/org/%2e%2e/repo.git/${INFO}`]) {
    const r = await rawExchange(port, `GET ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    assert.equal(statusOf(r), 403, p);
  }
  assert.equal(upA.requests.length, before);
});

test('a token with an embedded CR/LF gives 503 and is never sent', async () => {
  const r = await send(port, 'GET', `/crlf.example/org/repo.git/${INFO}`);
  assert.equal(r.status, 503);
  assert.match(r.body.toString(), /not a valid header value/);
});

test('the client Authorization, Proxy-Authorization and Cookie never reach the upstream', async () => {
  await send(port, 'GET', `/${upA.hostKey}/org/repo.git/${INFO}`, {
    headers: { authorization: 'Bearer workload-made-this-up', 'proxy-authorization': 'Basic eDp5', cookie: 'session=abc' },
  });
  const seen = lastRequest(upA).headers;
  assert.equal(seen.authorization, `Bearer ${TOKEN_A}`);
  assert.equal(seen['proxy-authorization'], undefined);
  assert.equal(seen.cookie, undefined);
});

test('hop-by-hop headers and headers named in Connection are not forwarded', async () => {
  await send(port, 'GET', `/${upA.hostKey}/org/repo.git/${INFO}`, {
    headers: { connection: 'keep-alive, user-agent, authorization', 'keep-alive': 'timeout=5', te: 'trailers', upgrade: 'h2c', 'x-forwarded-for': '10.0.0.1', 'user-agent': 'git/2.39' },
  });
  const seen = lastRequest(upA).headers;
  for (const h of ['keep-alive', 'te', 'upgrade', 'x-forwarded-for', 'user-agent']) assert.equal(seen[h], undefined, h);
  assert.equal(seen.authorization, `Bearer ${TOKEN_A}`, 'a client cannot strip the credential via Connection');
});

test('Git-Protocol, Content-Type, Content-Encoding, Accept and User-Agent pass through', async () => {
  await send(port, 'POST', `/${upA.hostKey}/org/repo.git/git-upload-pack`, {
    body: Buffer.from([0x1f, 0x8b]),
    headers: { 'git-protocol': 'version=2', 'content-type': 'application/x-git-upload-pack-request', 'content-encoding': 'gzip', accept: 'application/x-git-upload-pack-result', 'user-agent': 'git/2.39.5' },
  });
  const seen = lastRequest(upA).headers;
  assert.equal(seen['git-protocol'], 'version=2');
  assert.equal(seen['content-type'], 'application/x-git-upload-pack-request');
  assert.equal(seen['content-encoding'], 'gzip');
  assert.equal(seen.accept, 'application/x-git-upload-pack-result');
  assert.equal(seen['user-agent'], 'git/2.39.5');
});

test('an upstream error status and body are relayed unchanged', async () => {
  upA.handle((_req, res) => {
    res.writeHead(422, { 'content-type': 'text/plain', 'x-github-request-id': 'ABC:123' });
    res.end('error: failed to push some refs\n');
  });
  try {
    const r = await send(port, 'POST', `/${upA.hostKey}/org/repo.git/git-receive-pack`, { body: 'x' });
    assert.equal(r.status, 422);
    assert.equal(r.body.toString(), 'error: failed to push some refs\n');
    assert.equal(r.headers['x-github-request-id'], 'ABC:123');
  } finally {
    upA.handle(undefined);
  }
});

test("an upstream 401 (the host refused the proxy's credential) is answered 502 with the proxy's line naming the host, logged and counted", async () => {
  upA.handle((_req, res) => {
    res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"', 'content-type': 'text/plain' });
    res.end('Bad credentials\n');
  });
  try {
    const path = `/${upA.hostKey}/org/refused-credential.git/info/refs`;
    const r = await send(port, 'GET', `${path}?service=git-upload-pack`);
    assert.equal(r.status, 502);
    assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(r.headers['www-authenticate'], undefined);
    assert.equal(r.body.toString(), `git-auth-proxy: the git host refused the proxy's credential for ${upA.hostKey}; the operator must check its token\n`);
    const rec = await proxy.waitForRecord((l) => l.event === 'request' && l.path === path);
    assert.equal(rec.status, 502);
    assert.equal(rec.error, 'upstream_rejected_credential');
    const metrics = await send(proxy.ports.metrics!, 'GET', '/metrics');
    assert.match(metrics.body.toString(), new RegExp(`^git_proxy_upstream_credential_rejected_total\\{host="${upA.hostKey.replace(/\./g, '\\.')}"\\} 1$`, 'm'));
  } finally {
    upA.handle(undefined);
  }
});

test('an upstream 403 is relayed unchanged, body included (git does not prompt on it and prints the text)', async () => {
  upA.handle((_req, res) => {
    res.writeHead(403, { 'content-type': 'text/plain' });
    res.end('Permission to org/repo.git denied to bot.\n');
  });
  try {
    const r = await send(port, 'GET', `/${upA.hostKey}/org/repo.git/info/refs?service=git-receive-pack`);
    assert.equal(r.status, 403);
    assert.equal(r.body.toString(), 'Permission to org/repo.git denied to bot.\n');
  } finally {
    upA.handle(undefined);
  }
});

test('a Git LFS request gets 501 with the JSON message git-lfs prints, and is never forwarded', async () => {
  const before = upA.requests.length;
  const r = await send(port, 'POST', `/${upA.hostKey}/org/repo.git/info/lfs/objects/batch`, {
    body: '{"operation":"download","objects":[]}',
    headers: { 'content-type': 'application/vnd.git-lfs+json', accept: 'application/vnd.git-lfs+json' },
  });
  assert.equal(r.status, 501);
  assert.equal(r.headers['content-type'], 'application/vnd.git-lfs+json');
  assert.deepEqual(JSON.parse(r.body.toString()), { message: 'git-auth-proxy: Git LFS is not available through this proxy' });
  assert.equal(upA.requests.length, before);
  const rec = await proxy.waitForRecord((l) => l.event === 'request' && String(l.path).endsWith('/info/lfs/objects/batch'));
  assert.equal(rec.error, 'lfs_not_supported');
});

test('redirects are passed back unchanged, never followed', async () => {
  upA.handle((_req, res) => {
    res.writeHead(301, { location: 'https://elsewhere.example/org/repo.git/info/refs' });
    res.end();
  });
  try {
    const before = upA.requests.length;
    const r = await send(port, 'GET', `/${upA.hostKey}/org/repo.git/${INFO}`);
    assert.equal(r.status, 301);
    assert.equal(r.headers.location, 'https://elsewhere.example/org/repo.git/info/refs');
    assert.equal(upA.requests.length, before + 1);
  } finally {
    upA.handle(undefined);
  }
});

test('Set-Cookie, WWW-Authenticate and any header echoing the token are removed from responses', async () => {
  upA.handle((req, res) => {
    res.writeHead(403, [
      ['Set-Cookie', 'a=1'],
      ['Set-Cookie', 'b=2'],
      ['WWW-Authenticate', 'Basic realm="GitHub"'],
      ['X-Debug-Auth', String(req.headers.authorization)],
      ['X-Kept', 'yes'],
    ].flat());
    res.end();
  });
  try {
    const r = await send(port, 'GET', `/${upA.hostKey}/org/repo.git/${INFO}`);
    assert.equal(r.status, 403);
    assert.equal(r.headers['set-cookie'], undefined);
    assert.equal(r.headers['www-authenticate'], undefined);
    assert.equal(r.headers['x-debug-auth'], undefined);
    assert.equal(r.headers['x-kept'], 'yes');
  } finally {
    upA.handle(undefined);
  }
});

test('a token file rewritten while the proxy runs is used on the next request', async () => {
  await send(port, 'GET', `/${upC.hostKey}/org/repo.git/${INFO}`);
  assert.equal(lastRequest(upC).headers.authorization, `Bearer ${TOKEN_C1}`, 'trailing newline of the file is stripped');
  // Rotation the way a mounted secret does it: a new file renamed over the old one.
  writeFileSync(`${tokenFile}.new`, TOKEN_C2);
  renameSync(`${tokenFile}.new`, tokenFile);
  await send(port, 'GET', `/${upC.hostKey}/org/repo.git/${INFO}`);
  assert.equal(lastRequest(upC).headers.authorization, `Bearer ${TOKEN_C2}`);
});

test('an upstream that refuses the connection gives 502', async () => {
  const r = await send(port, 'GET', `/127.0.0.1:${closedPort}/org/repo.git/${INFO}`);
  assert.equal(r.status, 502);
  assert.match(r.body.toString(), /could not be reached/);
});

test('an upstream that never completes the TLS handshake gives 504 after the connect timeout', async () => {
  const key = `127.0.0.1:${(blackhole.address() as AddressInfo).port}`;
  const r = await send(port, 'POST', `/${key}/org/repo.git/git-receive-pack`, { body: randomBytes(1 << 20) });
  assert.equal(r.status, 504);
  const rec = await proxy.waitForRecord((l) => l.event === 'request' && l.host === key);
  assert.equal(rec.error, 'connect_timeout');
});

test('an upstream certificate from an unknown CA gives 502 and nothing is sent', async () => {
  const r = await send(port, 'GET', `/${upUntrusted.hostKey}/org/repo.git/${INFO}`);
  assert.equal(r.status, 502);
  assert.match(r.body.toString(), /TLS certificate/);
  assert.equal(upUntrusted.requests.length, 0);
});

test('the per-host tlsInsecureSkipVerify opt-in reaches a host with an unknown CA', async () => {
  const r = await send(port, 'GET', `/${upInsecure.hostKey}/org/repo.git/${INFO}`);
  assert.equal(r.status, 200);
  assert.equal(lastRequest(upInsecure).headers.authorization, `Bearer ${TOKEN_OTHER}`);
  const warning = await proxy.waitForRecord((l) => l.event === 'warning' && l.host === upInsecure.hostKey);
  assert.match(String(warning.message), /TLS verification is switched off/);
});

test('an upstream failure mid-response reaches the client as a broken connection', async () => {
  upA.handle((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/x-git-upload-pack-result', 'content-length': '100000' });
    res.write(Buffer.alloc(1000, 0x61), () => res.destroy());
  });
  try {
    const outcome = await new Promise<string>((resolve) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: `/${upA.hostKey}/org/repo.git/git-upload-pack`, agent: false }, (res) => {
        res.on('data', () => {});
        res.on('end', () => resolve('clean end'));
        res.on('error', (e) => resolve(`error: ${(e as NodeJS.ErrnoException).code ?? e.message}`));
      });
      req.on('error', (e) => resolve(`error: ${(e as NodeJS.ErrnoException).code ?? e.message}`));
      req.end('0000');
    });
    assert.match(outcome, /^error: /);
  } finally {
    upA.handle(undefined);
  }
});

test('a client that disconnects mid-response has its upstream request destroyed at once', async () => {
  let upstreamClosed!: () => void;
  const closed = new Promise<void>((r) => (upstreamClosed = r));
  upA.handle((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/x-git-upload-pack-result' });
    res.write('0008NAK\n');
    res.on('close', upstreamClosed);
  });
  try {
    await new Promise<void>((resolve) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: `/${upA.hostKey}/org/repo.git/git-upload-pack`, agent: false }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => {});
      req.end('0000');
    });
    await closed; // resolves only if the proxy tore down the upstream leg
    const rec = await proxy.waitForRecord((l) => l.event === 'request' && l.error === 'client_aborted' && l.route === 'upload-pack');
    assert.equal(rec.status, 200);
  } finally {
    upA.handle(undefined);
  }
});

test('a client that aborts mid-upload has its upstream request destroyed', async () => {
  let record!: { complete: boolean };
  let upstreamClosed!: () => void;
  const closed = new Promise<void>((r) => (upstreamClosed = r));
  upA.handle((req, _res, rec) => {
    record = rec;
    req.on('data', () => {});
    req.on('close', upstreamClosed);
  });
  try {
    await new Promise<void>((resolve) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: `/${upA.hostKey}/org/repo.git/git-receive-pack`, agent: false, headers: { 'content-length': String(10 << 20) } });
      req.on('error', () => {});
      req.write(Buffer.alloc(1 << 20), () => {
        req.destroy();
        resolve();
      });
    });
    await closed;
    assert.equal(record.complete, false);
  } finally {
    upA.handle(undefined);
  }
});

test('every hostile request target gets its expected status and none reaches an upstream', async () => {
  const before = [upA, upB, upC].map((u) => u.requests.length);
  const failures: string[] = [];
  for (const h of HOSTILE_TARGETS) {
    const target = h.target.replaceAll('{host}', upA.hostKey);
    const raw = await rawExchange(port, `${h.method} ${target} HTTP/1.1\r\nHost: proxy\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    if (statusOf(raw) !== h.status) failures.push(`${h.why}: ${target} -> ${statusOf(raw)}, expected ${h.status}`);
  }
  assert.deepEqual(failures, []);
  assert.deepEqual([upA, upB, upC].map((u) => u.requests.length), before);
});

test('CONNECT tunnelling is refused', async () => {
  const raw = await rawExchange(port, `CONNECT ${upA.hostKey} HTTP/1.1\r\nHost: ${upA.hostKey}\r\n\r\n`);
  assert.equal(statusOf(raw), 405);
});

test('each request writes one JSON access log line with the documented fields and no query', async () => {
  const path = `/${upA.hostKey}/org/logged.git/info/refs`;
  await send(port, 'GET', `${path}?service=git-upload-pack`);
  const rec = await proxy.waitForRecord((l) => l.event === 'request' && l.path === path);
  assert.deepEqual(
    Object.keys(rec).sort(),
    ['bytes_in', 'bytes_out', 'duration_ms', 'event', 'host', 'level', 'listener', 'method', 'path', 'request_id', 'route', 'status', 'time'].sort(),
    'network-policy mode: no workload token, so no identity; no traceparent: no trace ids (fields without a value are left out)',
  );
  assert.equal(rec.level, 'info');
  assert.equal(rec.listener, 'git');
  assert.equal(rec.method, 'GET');
  assert.equal(rec.host, upA.hostKey);
  assert.equal(rec.route, 'info-refs');
  assert.equal(rec.status, 200);
  assert.ok(Number(rec.bytes_out) > 0);
  assert.ok(Number(rec.duration_ms) >= 0);
});

test('the start-up line says per host whether a credential is present, never its value', () => {
  const start = proxy.records().find((r) => r.event === 'listening')!;
  const hosts = start.hosts as { host: string; credential: string }[];
  assert.equal(hosts.find((h) => h.host === upA.hostKey)?.credential, 'present');
  assert.equal(hosts.find((h) => h.host === 'empty.example')?.credential, 'missing');
});

test('no token appears in any response, header or log line of this suite', () => {
  assert.ok(seenResponses.length > 20);
  assertNoSecrets(seenResponses.join('\n'), SECRETS, 'a response');
  assertNoSecrets(proxy.output(), SECRETS, 'the proxy output');
});

test('upstream TLS connections are reused across sequential requests', async () => {
  let handshakes = 0;
  const count = () => handshakes++;
  upB.server.on('secureConnection', count);
  try {
    for (let i = 0; i < 5; i++) assert.equal((await send(port, 'GET', `/${upB.hostKey}/org/repo.git/${INFO}`)).status, 200);
  } finally {
    upB.server.off('secureConnection', count);
  }
  assert.ok(handshakes <= 1, `5 requests opened ${handshakes} upstream connections`);
});

test('a ref discovery reset on a reused connection (the host closed it as we reused it) is sent once more, and answered', async () => {
  // Connections that carried a request before: the next request on one is a reused connection.
  const seen = new WeakSet<object>();
  const remember = (req: IncomingMessage) => seen.add(req.socket);
  upB.server.on('request', remember);
  let resetOnReused: boolean | undefined;
  try {
    assert.equal((await send(port, 'GET', `/${upB.hostKey}/org/repo.git/${INFO}`)).status, 200); // leaves a pooled connection
    upB.handle((req, res, record) => {
      if (resetOnReused === undefined) {
        resetOnReused = seen.has(req.socket);
        req.socket.destroy();
        return;
      }
      digestAndAnswer(req, res, record);
    });
    const before = upB.requests.length;
    const r = await send(port, 'GET', `/${upB.hostKey}/org/repo.git/${INFO}`);
    assert.equal(resetOnReused, true, 'the reset came on the pooled connection');
    assert.equal(r.status, 200);
    assert.equal(upB.requests.length, before + 2, 'sent twice: the reset one and the one answered');
  } finally {
    upB.handle(undefined);
    upB.server.off('request', remember);
  }
});

test('a push reset before any answer is never sent again: 502, the upstream saw it once', async () => {
  // As above: the reset must come on a reused connection, the case a GET is sent again for.
  const seen = new WeakSet<object>();
  const remember = (req: IncomingMessage) => seen.add(req.socket);
  upB.server.on('request', remember);
  const resets: boolean[] = [];
  try {
    assert.equal((await send(port, 'GET', `/${upB.hostKey}/org/repo.git/${INFO}`)).status, 200); // leaves a pooled connection
    upB.handle((req) => {
      resets.push(seen.has(req.socket));
      req.socket.destroy();
    });
    const before = upB.requests.length;
    const r = await send(port, 'POST', `/${upB.hostKey}/org/repo.git/git-receive-pack`, { body: Buffer.alloc(1000, 1), headers: { 'content-type': 'application/x-git-receive-pack-request' } });
    assert.deepEqual(resets, [true], 'one reset, on the pooled connection');
    assert.equal(r.status, 502);
    assert.equal(upB.requests.length, before + 1);
  } finally {
    upB.handle(undefined);
    upB.server.off('request', remember);
  }
});
