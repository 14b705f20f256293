// The limits store's Redis client (RespClient) against a server on loopback that is not Redis,
// or a broken one: the command fails and the connection is dropped, never the process, and the
// client connects again. The protocol's pure parts are test/unit/resp.test.ts.
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { test } from 'node:test';
import { RespClient, RespError, RespReader } from '../../src/store/resp.ts';
import { bufferWork } from '../support/buffer-work.ts';

/** A server that answers whatever it is sent with `reply`, and counts its connections. */
async function fakeServer(reply: (socket: Socket) => void): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.once('data', () => reply(socket));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    close: () => new Promise((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r());
    }),
  };
}

for (const [what, reply] of [
  ['an answer that is not RESP (an HTTP server on the port)', (s: Socket) => s.write('HTTP/1.1 400 Bad Request\r\n\r\n')],
  ['a reply that never ends (a bulk string announced at 512 MiB, sent on and on)', (s: Socket) => {
    s.write('$536870912\r\n');
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const pump = () => { while (!s.destroyed && s.write(chunk)); };
    s.on('drain', pump);
    pump();
  }],
] as const) {
  test(`resp: ${what} fails the command and drops the connection, never the process, and the client connects again`, async () => {
    const server = await fakeServer(reply);
    const states: boolean[] = [];
    let up!: () => void;
    const upOnce = new Promise<void>((r) => (up = r));
    // A long command timeout: only the reply-size cap can end the endless reply in time.
    const client = new RespClient({ address: { host: '127.0.0.1', port: server.port }, tls: false, password: undefined, timeoutMs: 60_000, onState: (isUp) => { states.push(isUp); if (isUp) up(); } });
    try {
      await upOnce;
      await assert.rejects(client.command(['PING']), /connection closed/);
      assert.deepEqual(states.slice(0, 2), [true, false]);
      while (server.connections() < 2) await new Promise((r) => setTimeout(r, 10)); // the reconnect (after its backoff)
    } finally {
      client.close();
      await server.close();
    }
  });
}

/** `head`, then `body` over and over, pushed into a RespReader until it refuses the reply or `upTo` bytes are in; the bytes pushed. */
function dripInto(reader: RespReader, head: string, body: string, upTo: number): number {
  let fed = 0;
  try {
    for (let chunk = Buffer.from(head); fed < upTo; chunk = Buffer.from(body)) {
      fed += chunk.length;
      reader.push(chunk);
    }
  } catch (err) {
    if (!(err instanceof RespError)) throw err;
  }
  return fed;
}

/** Answers with `head`, then `body` over and over, a few bytes at a time, one write per turn of the event loop (or per `everyMs`). */
function drip(head: string, body: string, everyMs?: number): (s: Socket) => void {
  return (s) => {
    s.setNoDelay(true);
    s.write(head);
    const next = () => {
      if (s.destroyed || !s.writable) return;
      s.write(body);
      if (everyMs === undefined) setImmediate(next);
      else setTimeout(next, everyMs);
    };
    next();
  };
}

for (const [what, head, body, everyMs, timeoutMs] of [
  // The review's reproduction (finding 8): 300,000 items after an array header, dripped.
  ['an array announced with 300,000 items, its items dripped', '*300000\r\n', ':1\r\n', undefined, 60_000],
  ['a line that never ends, dripped 16 bytes at a time', '*3\r\n+', 'a'.repeat(16), undefined, 60_000],
  ['a reply within the limits, dripped slower than the command timeout', '*2\r\n$12000\r\n', 'a'.repeat(8), 10, 300],
] as const) {
  // The event loop is not held: the reader's work is counted, not timed (a test timed on a
  // shared machine fails under load). Each byte pushed is searched for a line end and copied a
  // few times at most, however the reply is cut (reading it again from its start on every chunk
  // would be quadratic: the line that never ends would cost about 8 million bytes searched).
  test(`resp: ${what}: each byte is searched and copied a bounded number of times, the command fails, the connection is dropped and opened again`, async () => {
    let fed = 0;
    const { searched, copied } = bufferWork(() => (fed = dripInto(new RespReader(), head, body, 64 * 1024)));
    assert.ok(searched <= 2 * fed + 64, `${searched} bytes searched for ${fed} pushed`);
    assert.ok(copied <= 4 * fed + 4096, `${copied} bytes copied for ${fed} pushed`);

    const server = await fakeServer(drip(head, body, everyMs));
    let up!: () => void;
    const upOnce = new Promise<void>((r) => (up = r));
    const client = new RespClient({ address: { host: '127.0.0.1', port: server.port }, tls: false, password: undefined, timeoutMs, onState: (isUp) => isUp && up() });
    try {
      await upOnce;
      await assert.rejects(client.command(['EVALSHA', 'x', 0]), /connection closed/);
      while (server.connections() < 2) await new Promise((r) => setTimeout(r, 10)); // opened again (after its backoff)
    } finally {
      client.close();
      await server.close();
    }
  });
}
