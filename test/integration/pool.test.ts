// The upstream connection pool (src/http/forward.ts createUpstreamAgent): we end idle pooled
// connections before an upstream does, and a pooled connection the upstream is closing is never
// handed to the next request. Together they make the reset-on-reuse race, after which a POST is
// never sent again, rare. Against a real HTTPS server on loopback.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { createUpstreamAgent, newExchange, openUpstream } from '../../src/http/forward.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

let pki: TestPki;
let server: Server;
let port: number;
/** Server-side sockets, in the order they connected. */
const connections: Socket[] = [];
let delayMs = 0;

before(async () => {
  pki = makeTestPki();
  server = createServer({ key: pki.keyPem, cert: pki.certPem, keepAlive: true }, (req, res) => {
    req.resume();
    setTimeout(() => res.end('ok'), delayMs);
  });
  server.keepAliveTimeout = 0; // the server never ends an idle connection itself
  server.on('secureConnection', (s: Socket) => connections.push(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

after(() => {
  server.closeAllConnections();
  server.close();
  pki.cleanup();
});

/** One GET; resolves once its connection is back in the pool. */
async function get(agent: ReturnType<typeof createUpstreamAgent>): Promise<number> {
  const freed = once(agent, 'free');
  const call = openUpstream({ agent, hostname: '127.0.0.1', port, method: 'GET', path: '/', headers: { host: '127.0.0.1' } }, { connectMs: 5000, responseMs: 5000, idleMs: 5000, bodyIdleMs: 0 }, null, newExchange());
  const res = await call.response;
  res.resume();
  await freed;
  return res.statusCode!;
}

const freeCount = (agent: ReturnType<typeof createUpstreamAgent>) => Object.values(agent.freeSockets).reduce((n, list) => n + (list?.length ?? 0), 0);

test('the upstream pool closes a connection left unused for its idle time, before the upstream does', { timeout: 10_000 }, async () => {
  const agent = createUpstreamAgent({ ca: pki.caPem, tlsInsecureSkipVerify: false, poolIdleMs: 50 });
  try {
    assert.equal(await get(agent), 200);
    const upstreamSide = connections.at(-1)!;
    assert.equal(freeCount(agent), 1, 'the connection went back to the pool');
    const pooled = Object.values(agent.freeSockets)[0]![0]! as Socket;
    // The server never ends an idle connection here: only the pool's idle timeout can.
    await Promise.all([once(upstreamSide, 'close'), once(pooled, 'close')]);
    assert.equal(freeCount(agent), 0);
  } finally {
    agent.destroy();
  }
});

test('a pooled connection whose upstream sent its FIN is destroyed at once, never handed to the next request', { timeout: 10_000 }, async () => {
  const agent = createUpstreamAgent({ ca: pki.caPem, tlsInsecureSkipVerify: false });
  try {
    assert.equal(await get(agent), 200);
    const pooled = Object.values(agent.freeSockets)[0]![0]! as Socket;
    // Node 20 reads the FIN as 'end', and the pool destroys the socket then (keepSocketAlive);
    // the Node 22, 24 and 26 releases tested destroy a free socket that reads anything, a FIN
    // too, before its 'end' (the agent's own guard). Either way no request can take it.
    let destroyedAtEnd: boolean | undefined;
    pooled.once('end', () => (destroyedAtEnd = pooled.destroyed));
    const closed = once(pooled, 'close');
    connections.at(-1)!.end(); // the upstream closes the idle connection
    await closed;
    assert.notEqual(destroyedAtEnd, false, 'destroyed by the time the FIN is seen');
    assert.equal(freeCount(agent), 0);
    const before = connections.length;
    assert.equal(await get(agent), 200);
    assert.equal(connections.length, before + 1, 'the next request opened a new connection');
  } finally {
    agent.destroy();
  }
});

test('a request on a reused connection that takes longer than the pool idle time is not cut by it', { timeout: 10_000 }, async () => {
  const agent = createUpstreamAgent({ ca: pki.caPem, tlsInsecureSkipVerify: false, poolIdleMs: 20 });
  try {
    assert.equal(await get(agent), 200);
    const before = connections.length;
    delayMs = 200;
    assert.equal(await get(agent), 200);
    assert.equal(connections.length, before, 'the pooled connection was reused');
  } finally {
    delayMs = 0;
    agent.destroy();
  }
});
