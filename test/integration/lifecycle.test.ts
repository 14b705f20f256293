// Shutdown of the built bundle: drain in-flight work, refuse new work, never hang.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Agent, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, beforeEach, test } from 'node:test';
import { send } from '../support/http-client.ts';
import { startProxy, type ProxyProcess } from '../support/proxy-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { startUpstream, type TestUpstream } from '../support/upstream.ts';

let pki: TestPki;
let upstream: TestUpstream;
let proxy: ProxyProcess;
/** Responses the upstream is holding until the test releases them. */
let held: ServerResponse[];
let heldArrived: Promise<void>;

async function start(extra: string[] = []): Promise<void> {
  proxy = await startProxy({
    env: { GIT_HOST_A: upstream.hostKey, GIT_HOST_A_TOKEN: `tok_${randomBytes(8).toString('hex')}`, NODE_EXTRA_CA_CERTS: pki.caFile },
    args: ['--git-auth-listen', '127.0.0.1:0', ...extra],
  });
}

beforeEach(async () => {
  pki = makeTestPki();
  upstream = await startUpstream(pki);
  held = [];
  let arrived!: () => void;
  heldArrived = new Promise((r) => (arrived = r));
  upstream.handle((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/x-git-upload-pack-result' });
      held.push(res);
      arrived();
    });
  });
});

afterEach(async () => {
  await proxy?.stop('SIGKILL');
  await upstream?.close();
  pki?.cleanup();
});

/** A git request through the proxy that the upstream will hold; resolves with how it ended. */
function heldRequest(): Promise<string> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port: proxy.ports.git, method: 'POST', path: `/${upstream.hostKey}/o/r.git/git-upload-pack`, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (s: string) => (body += s));
      res.on('end', () => resolve(`${res.statusCode} ${body}`));
      res.on('error', () => resolve('broken'));
    });
    req.on('error', () => resolve('broken'));
    req.end('0000');
  });
}

test('SIGTERM drains: the in-flight request finishes, /healthz on the metrics port says draining, new proxy connections are refused, exit 0', { timeout: 20_000 }, async () => {
  await start();
  const port = proxy.ports.git!;
  const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
  const health = () =>
    new Promise<number>((resolve, reject) => {
      request({ host: '127.0.0.1', port, path: '/healthz', agent: keepAlive }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      })
        .on('error', reject)
        .end();
    });
  assert.equal(await health(), 200);
  const inFlight = heldRequest();
  await heldArrived;

  proxy.signal('SIGTERM');
  await proxy.waitForRecord((r) => r.event === 'shutdown' && r.phase === 'draining');
  await assert.rejects(send(port, 'GET', '/healthz'), { code: 'ECONNREFUSED' });
  const probe = await send(proxy.ports.metrics!, 'GET', '/healthz');
  assert.equal(probe.status, 503);
  assert.equal(probe.body.toString(), 'draining\n');
  assert.equal((await send(proxy.ports.metrics!, 'GET', '/metrics')).status, 200, 'still scrapeable while draining');

  held[0]!.end('0008NAK\n');
  assert.equal(await inFlight, '200 0008NAK\n');
  const exit = await proxy.exited;
  assert.equal(exit.code, 0);
  assert.ok(proxy.records().some((r) => r.event === 'shutdown' && r.phase === 'done'));
  keepAlive.destroy();
});

test('an idle keep-alive connection does not hold up the shutdown', { timeout: 20_000 }, async () => {
  await start(['--idle-timeout', '10m']);
  const port = proxy.ports.git!;
  const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
  // An idle keep-alive connection, opened before the shutdown.
  const idle = await new Promise<number>((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: '/healthz', agent: keepAlive }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    })
      .on('error', reject)
      .end();
  });
  assert.equal(idle, 200);
  const inFlight = heldRequest();
  await heldArrived;
  proxy.signal('SIGTERM');
  await proxy.waitForRecord((r) => r.event === 'shutdown' && r.phase === 'draining');
  held[0]!.end('0008NAK\n');
  await inFlight;
  // The proxy exits although a client might keep its connection for 10 minutes.
  assert.equal((await proxy.exited).code, 0);
  keepAlive.destroy();
});

/** A raw client connection that writes `text` (maybe nothing) and never finishes a request. */
async function rawConnection(port: number, text: string): Promise<{ closed: Promise<void> }> {
  const socket = connect(port, '127.0.0.1');
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => {}); // a reset when the proxy cuts it is what is expected
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  if (text) socket.write(text);
  return { closed };
}

/** Polls the metrics listener until the git listener holds `n` client connections. */
async function gitConnections(n: number): Promise<void> {
  for (;;) {
    const text = (await send(proxy.ports.metrics!, 'GET', '/metrics')).body.toString();
    if (Number(/^proxy_active_connections\{listener="git"\} (\d+)$/m.exec(text)?.[1]) === n) return;
    await delay(20);
  }
}

/**
 * A stream in flight at SIGTERM plus a connection that has no request in progress: the drain
 * closes that connection while the stream goes on, and the process exits once the stream ends,
 * not after --shutdown-grace (60 s here; the header timeout is as long, so it rescues nothing).
 */
async function drainWithStray(t: { diagnostic(s: string): void }, strayText: string): Promise<void> {
  await start(['--shutdown-grace', '60s', '--header-timeout', '60s', '--idle-timeout', '60s']);
  const inFlight = heldRequest();
  await heldArrived;
  const stray = await rawConnection(proxy.ports.git!, strayText);
  await gitConnections(2);
  let streamEnded = false;
  void inFlight.then(() => (streamEnded = true));

  proxy.signal('SIGTERM');
  await proxy.waitForRecord((r) => r.event === 'shutdown' && r.phase === 'draining');
  await stray.closed;
  assert.equal(streamEnded, false, 'the stray connection was closed while the stream was still in flight');

  held[0]!.end('0008NAK\n');
  assert.equal(await inFlight, '200 0008NAK\n');
  const lastResponse = performance.now();
  const exit = await proxy.exited;
  const after = performance.now() - lastResponse;
  t.diagnostic(`exit ${Math.round(after)} ms after the last in-flight response`);
  assert.equal(exit.code, 0);
  assert.ok(proxy.records().some((r) => r.event === 'shutdown' && r.phase === 'done'));
  // The drain did not wait for the 60 s grace: the stray connection was closed at once (above),
  // and the test's own timeout (30 s, a hang guard) is half the grace.
}

test('drain: a connection that never sent a byte is closed at once and does not hold up the shutdown', { timeout: 30_000 }, async (t) => {
  await drainWithStray(t, '');
});

test('drain: a connection that sent half a request head is cut after a short deadline and does not hold up the shutdown', { timeout: 30_000 }, async (t) => {
  await drainWithStray(t, `POST /${upstream.hostKey}/o/r.git/git-upload-pack HTTP/1.1\r\nHost: proxy\r\nContent-Ty`);
});

test('a second signal exits at once, cutting what is still in flight', { timeout: 20_000 }, async () => {
  await start();
  const inFlight = heldRequest();
  await heldArrived;
  proxy.signal('SIGTERM');
  await proxy.waitForRecord((r) => r.event === 'shutdown' && r.phase === 'draining');
  proxy.signal('SIGTERM');
  assert.equal((await proxy.exited).code, 0);
  assert.equal(await inFlight, 'broken');
  assert.ok(proxy.records().some((r) => r.event === 'shutdown' && r.phase === 'forced'));
});

test('after the grace period the remaining requests are cut and the process exits 0', { timeout: 20_000 }, async () => {
  await start(['--shutdown-grace', '300ms']);
  const inFlight = heldRequest();
  await heldArrived;
  proxy.signal('SIGTERM');
  assert.equal(await inFlight, 'broken');
  assert.equal((await proxy.exited).code, 0);
});
