// The TLS listener against real clients on loopback: a peer that connects and sends nothing is
// capped from its arrival and closed after the handshake timeout; a client CA removed from the
// bundle ends the connections it verified; a refused handshake names its client. The files are
// looked at once a second: the tests move a fake clock instead of waiting.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Agent, createServer, request } from 'node:https';
import { connect as connectTcp, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { TLSSocket } from 'node:tls';
import type { LogRecord } from '../../src/http/log.ts';
import type { Listener } from '../../src/http/server.ts';
import { startTestListener } from '../support/test-listener.ts';
import { tlsFileSource, wrappedSocket } from '../../src/http/tls-listener.ts';
import { makeMtlsPki, type ClientPair, type MtlsPki } from '../support/mtls-pki.ts';

let pki: MtlsPki;
let work: string;

before(() => {
  pki = makeMtlsPki();
  work = mkdtempSync(join(tmpdir(), 'test-tls-listener-'));
});

after(() => {
  pki?.cleanup();
  if (work) rmSync(work, { recursive: true, force: true });
});

const tick = () => new Promise((r) => setImmediate(r));

interface Harness {
  readonly listener: Listener;
  readonly logs: LogRecord[];
  readonly refused: string[];
  /** Moves the file source's clock a second on, so that its next look sees what changed. */
  nextSecond(): void;
  readonly bundleFile: string;
}

async function harness(name: string, opts: { headerMs: number; caps?: { total: number; perClient: number }; handle?: (req: IncomingMessage, res: ServerResponse) => void | Promise<void> }): Promise<Harness> {
  const bundleFile = join(work, `${name}-client-ca.pem`);
  copyFileSync(pki.caFile, bundleFile);
  const logs: LogRecord[] = [];
  const refused: string[] = [];
  const log = (r: LogRecord) => void logs.push(r);
  let now = 0;
  const tls = tlsFileSource({ certFile: pki.serverCertFile, keyFile: pki.serverKeyFile, clientCaFile: bundleFile }, 'test', log, () => now);
  const listener = await startTestListener({
    timeouts: { headerMs: opts.headerMs, keepAliveMs: 30_000 },
    ...(opts.caps && { caps: opts.caps }),
    ...(opts.handle && { handle: opts.handle }),
    onConnectionRefused: (reason) => refused.push(reason),
    log,
    tls,
  });
  return { listener, logs, refused, bundleFile, nextSecond: () => void (now += 1000) };
}

type Answer = { status: number; body: string; connection: string | undefined; socket: TLSSocket } | { error: string };

/** One GET with the client's certificate, on `agent` (keep-alive) or a fresh connection. */
function get(port: number, client: ClientPair, agent: Agent | false = false): Promise<Answer> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent, ca: pki.caPem, servername: 'localhost', cert: client.cert, key: client.key }, (res) => {
      let body = '';
      const socket = res.socket as TLSSocket; // an agent takes it back once the answer ends
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, connection: res.headers.connection, socket }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
    req.end();
  });
}

function served(answer: Answer, what: string): Extract<Answer, { status: number }> {
  assert.ok(!('error' in answer), `${what}: ${'error' in answer ? answer.error : ''}`);
  assert.equal(answer.status, 200, what);
  return answer;
}

const keepAlive = (client: ClientPair) => new Agent({ keepAlive: true, maxSockets: 1, ca: pki.caPem, cert: client.cert, key: client.key, servername: 'localhost' });

test('TLS handshake bounded: a peer that connects and sends nothing is counted against the connection caps from its arrival and closed after the header timeout, with a tls_refused line naming it', { timeout: 60_000 }, async () => {
  const h = await harness('hold', { headerMs: 300, caps: { total: 0, perClient: 2 } });
  try {
    // Three TCP connections from one address, never a byte of TLS: the third is past the cap.
    const silent: Socket[] = [];
    for (let i = 0; i < 3; i++) {
      const socket = connectTcp({ port: h.listener.port, host: '127.0.0.1', localAddress: '127.0.0.2' });
      socket.on('error', () => {});
      await once(socket, 'connect');
      silent.push(socket);
    }
    while (h.refused.length < 1) await tick();
    assert.deepEqual(h.refused, ['per_client'], 'the handshakes in progress hold the cap');
    assert.equal(h.listener.connections(), 2);
    assert.ok(h.logs.some((l) => l.event === 'connection_refused' && l.client === '127.0.0.2'));
    // Another address completes its handshake and is served meanwhile.
    served(await get(h.listener.port, pki.clients.good), 'another client');
    // The two held sockets are closed by the server (the handshake timeout), not by the client.
    await Promise.all(silent.map((s) => (s.closed ? undefined : once(s, 'close'))));
    while (h.listener.connections() !== 0) await tick();
    const line = h.logs.find((l) => l.event === 'tls_refused');
    assert.deepEqual(line, { event: 'tls_refused', listener: 'test', client: '127.0.0.2', reason: 'ERR_TLS_HANDSHAKE_TIMEOUT', refused: 1 });
    assert.equal(h.logs.filter((l) => l.event === 'tls_refused').length, 1, 'the second within the interval is summed into the next line, not logged alone');
  } finally {
    await h.listener.close(0);
  }
});

test('CA removal ends its connections: once a changed client CA bundle is seen, an idle keep-alive connection it verified is closed at once and a busy one after its answer; new ones are refused at the handshake', { timeout: 60_000 }, async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let holding!: () => void;
  const inProgress = new Promise<void>((r) => (holding = r));
  const h = await harness('removal', {
    headerMs: 5000,
    handle: async (req, res) => {
      if (req.headers['x-hold'] !== undefined) {
        holding();
        await held;
      }
      res.end('ok');
    },
  });
  const idleAgent = keepAlive(pki.clients.good);
  try {
    const first = served(await get(h.listener.port, pki.clients.good, idleAgent), 'before the change');
    assert.notEqual(first.connection, 'close');
    const idleClosed = once(first.socket, 'close');
    // A second connection with a request in progress when the change is seen.
    const busy = new Promise<Answer>((resolve) => {
      const req = request({ host: '127.0.0.1', port: h.listener.port, path: '/', agent: keepAlive(pki.clients.good), ca: pki.caPem, servername: 'localhost', headers: { 'x-hold': '1' } }, (res) => {
        let body = '';
        const socket = res.socket as TLSSocket;
        res.on('data', (c: Buffer) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, connection: res.headers.connection, socket }));
      });
      req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
      req.end();
    });
    await inProgress;
    // The CA is removed; the next connection, a second later, is what makes the listener look.
    writeFileSync(h.bundleFile, pki.otherCaPem);
    h.nextSecond();
    assert.ok('error' in (await get(h.listener.port, pki.clients.good)), 'a new connection is refused at the handshake');
    await idleClosed;
    assert.ok(h.logs.some((l) => l.event === 'tls_reloaded' && l.client_ca_changed === true));
    release();
    const answer = served(await busy, 'the request in progress is answered');
    if (!answer.socket.closed) await once(answer.socket, 'close');
    assert.ok('error' in (await get(h.listener.port, pki.clients.good, idleAgent)), 'the keep-alive client must connect again, and is refused');
  } finally {
    idleAgent.destroy();
    await h.listener.close(0);
  }
});

test('CA removal ends its connections: a keep-alive connection whose next request is what finds the change gets that one answer with Connection: close, then is closed', { timeout: 60_000 }, async () => {
  const h = await harness('reveal', { headerMs: 5000 });
  const agent = keepAlive(pki.clients.good);
  try {
    const first = served(await get(h.listener.port, pki.clients.good, agent), 'before the change');
    writeFileSync(h.bundleFile, pki.otherCaPem);
    h.nextSecond();
    const second = served(await get(h.listener.port, pki.clients.good, agent), 'the request that finds the change');
    assert.equal(second.socket, first.socket, 'on the same connection');
    assert.equal(second.connection, 'close');
    if (!second.socket.closed) await once(second.socket, 'close');
    assert.ok('error' in (await get(h.listener.port, pki.clients.good, agent)), 'then refused at the handshake');
  } finally {
    agent.destroy();
    await h.listener.close(0);
  }
});

test('CA removal ends its connections, a certificate rotated alone does not: with the client CA bundle unchanged, keep-alive connections stay open', { timeout: 60_000 }, async () => {
  const certFile = join(work, 'rotate-cert.pem');
  copyFileSync(pki.serverCertFile, certFile);
  const logs: LogRecord[] = [];
  let now = 0;
  const tls = tlsFileSource({ certFile, keyFile: pki.serverKeyFile, clientCaFile: pki.caFile }, 'test', (r) => void logs.push(r), () => now);
  const listener = await startTestListener({ log: (r) => void logs.push(r), tls });
  const agent = keepAlive(pki.clients.good);
  try {
    const first = served(await get(listener.port, pki.clients.good, agent), 'before');
    writeFileSync(certFile, `${readFileSync(pki.serverCertFile, 'utf8')}\n`);
    now += 1000;
    const second = served(await get(listener.port, pki.clients.good, agent), 'after the rotation');
    assert.ok(logs.some((l) => l.event === 'tls_reloaded' && l.client_ca_changed === false), 'the rotation was seen');
    assert.equal(second.socket, first.socket, 'on the same connection');
    assert.notEqual(second.connection, 'close');
  } finally {
    agent.destroy();
    await listener.close(0);
  }
});

test('TLS socket names the socket it was made from (wrappedSocket), so what was learnt on arrival is found after the handshake', async () => {
  const server = createServer({ cert: readFileSync(pki.serverCertFile), key: readFileSync(pki.serverKeyFile) }, (_req, res) => void res.end('ok'));
  let arrived: Socket | undefined;
  server.prependListener('connection', (socket: Socket) => void (arrived = socket));
  const secured = new Promise<TLSSocket>((resolve) => server.once('secureConnection', resolve));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const answer = await new Promise<Answer>((resolve) => {
      const port = (server.address() as { port: number }).port;
      request({ host: '127.0.0.1', port, path: '/', agent: false, ca: pki.caPem, servername: 'localhost' }, (res) => {
        const socket = res.socket as TLSSocket;
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: '', connection: undefined, socket }));
      }).end();
    });
    served(answer, 'plain TLS');
    const socket = await secured;
    assert.ok(arrived !== undefined);
    assert.equal(wrappedSocket(socket), arrived);
  } finally {
    server.close();
  }
});
