// The limits store's Redis protocol (RESP2): commands encoded as arrays of bulk strings, replies
// parsed incrementally whatever the chunking; and what a server that is not Redis, or a broken
// one, can do to the process: nothing but lose the connection.
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { test } from 'node:test';
import { encodeCommand, parseReply, RespClient, RespError } from '../../src/store/resp.ts';

test('resp: a command is an array of bulk strings, byte lengths counted in UTF-8 (encodeCommand)', () => {
  assert.equal(encodeCommand(['SET', 'k', 'vé', 5]).toString(), '*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nvé\r\n$1\r\n5\r\n');
});

test('resp: every reply type parses, nested arrays too, and an incomplete reply asks for more bytes (parseReply)', () => {
  const wire = Buffer.from('+OK\r\n-ERR no\r\n:42\r\n$3\r\nabc\r\n$-1\r\n*3\r\n$2\r\nok\r\n:1\r\n*1\r\n+x\r\n');
  const values: unknown[] = [];
  let at = 0;
  for (;;) {
    const r = parseReply(wire, at);
    if (!r) break;
    values.push(r.value);
    at = r.next;
  }
  assert.equal(at, wire.length);
  assert.deepEqual(values.map((v) => (v instanceof RespError ? `error:${v.message}` : v)), ['OK', 'error:ERR no', 42, 'abc', null, ['ok', 1, ['x']]]);
  for (let cut = 1; cut < 12; cut++) assert.equal(parseReply(Buffer.from('*2\r\n$3\r\nabc\r\n:7\r\n').subarray(0, cut)), undefined, `cut at ${cut}`);
});

test('resp: a reply of a type RESP2 does not have is an error, not a guess (parseReply)', () => {
  assert.throws(() => parseReply(Buffer.from('HTTP/1.1 400 Bad Request\r\n')), RespError);
});

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
    const client = new RespClient({ host: '127.0.0.1', port: server.port, tls: false, password: undefined, timeoutMs: 60_000, onState: (isUp) => { states.push(isUp); if (isUp) up(); } });
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
