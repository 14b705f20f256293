// Connection caps on a real listener (startListener on loopback): one client's connections
// beyond its cap are closed on arrival while another client's go on, and beyond the total cap
// every new one is. The verdict and the counts it reads are test/unit/connection-caps.test.ts;
// the caps on the proxy as `serve` starts it, test/integration/connection-caps.test.ts.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import type { Listener } from '../../src/http/server.ts';
import { startTestListener } from '../support/test-listener.ts';
import { send } from '../support/http-client.ts';

async function openFrom(port: number, localAddress: string, n: number): Promise<Socket[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const socket = connect({ port, host: '127.0.0.1', localAddress });
      socket.on('error', () => {});
      await once(socket, 'connect');
      return socket;
    }),
  );
}

async function listener(caps: { total: number; perClient: number }, refused: string[], logs: Record<string, unknown>[]): Promise<Listener> {
  return startTestListener({ timeouts: { headerMs: 5000, keepAliveMs: 5000 }, caps, onConnectionRefused: (reason) => refused.push(reason), log: (r) => void logs.push(r) });
}

test('connection caps: one client holding twice its cap has the excess closed on arrival, counted and logged once, while another client is served (startListener)', { timeout: 20_000 }, async () => {
  const refused: string[] = [];
  const logs: Record<string, unknown>[] = [];
  const l = await listener({ total: 0, perClient: 4 }, refused, logs);
  try {
    const hog = await openFrom(l.port, '127.0.0.2', 8);
    // Every connection of the hog has reached the server once its accepted ones are counted
    // there and its refused ones closed; poll the listener's own count, not the clock.
    while (refused.length < 4) await new Promise((r) => setImmediate(r));
    assert.equal(l.connections(), 4, 'the hog keeps exactly its cap');
    assert.deepEqual(refused, ['per_client', 'per_client', 'per_client', 'per_client']);
    const lines = logs.filter((r) => r.event === 'connection_refused');
    assert.equal(lines.length, 1, 'refusals are logged at most once per interval');
    assert.deepEqual(lines[0], { event: 'connection_refused', listener: 'test', reason: 'per_client', client: '127.0.0.2', refused: 1, cap: 4 });
    // Another client (another source address) is served, /healthz too.
    assert.equal((await send(l.port, 'GET', '/anything')).status, 200);
    assert.equal((await send(l.port, 'GET', '/healthz')).status, 200);
    // The hog lets one go: it may open one more.
    const gone = once(hog.find((s) => !s.destroyed)!.destroy(), 'close');
    await gone;
    while (l.connections() !== 3) await new Promise((r) => setImmediate(r));
    const [again] = await openFrom(l.port, '127.0.0.2', 1);
    while (l.connections() !== 4) await new Promise((r) => setImmediate(r));
    assert.equal(refused.length, 4, 'a connection within the cap again is accepted');
    for (const s of [...hog, again!]) s.destroy();
  } finally {
    await l.close(0);
  }
});

test('connection caps: beyond --max-connections in total a new connection is closed on arrival whoever opens it (startListener)', { timeout: 20_000 }, async () => {
  const refused: string[] = [];
  const l = await listener({ total: 3, perClient: 0 }, refused, []);
  try {
    const held = await openFrom(l.port, '127.0.0.3', 3);
    while (l.connections() < 3) await new Promise((r) => setImmediate(r));
    const extra = await openFrom(l.port, '127.0.0.4', 1);
    await once(extra[0]!, 'close');
    assert.deepEqual(refused, ['total']);
    assert.equal(l.connections(), 3);
    for (const s of held) s.destroy();
  } finally {
    await l.close(0);
  }
});
