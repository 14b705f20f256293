// The sentinels' password as the client sends it (src/store/sentinel.ts): a connection to a
// sentinel that wants a password opens with AUTH, and none is opened while its password file
// cannot be read, for the lookups of the master and for the +switch-master subscription alike
// (the sentinel would refuse every command without AUTH; the subscription, on every reconnect).
// A fake sentinel on loopback records the commands each connection sends.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { test } from 'node:test';
import type { SecretRead } from '../../src/http/secret-source.ts';
import { Secret } from '../../src/http/secret-value.ts';
import { encodeCommand, RespReader, type RespValue } from '../../src/store/resp.ts';
import { sentinelMaster, watchSwitches, type SentinelOptions } from '../../src/store/sentinel.ts';
import { eventually } from '../support/eventually.ts';

/** A sentinel that answers AUTH with OK, get-master-addr-by-name with an address, SUBSCRIBE with its confirmation; each connection's commands in order. */
async function fakeSentinel(): Promise<{ port: number; connections: string[][][]; close(): Promise<void> }> {
  const connections: string[][][] = [];
  const server: Server = createServer((socket) => {
    const commands: string[][] = [];
    connections.push(commands);
    const reader = new RespReader();
    socket.on('data', (chunk) => {
      for (const value of reader.push(chunk) as RespValue[]) {
        const command = (value as unknown[]).map(String);
        commands.push(command);
        const name = command[0]!.toUpperCase();
        if (name === 'AUTH') socket.write('+OK\r\n');
        else if (name === 'SENTINEL') socket.write(encodeCommand(['127.0.0.1', '6390']));
        else if (name === 'SUBSCRIBE') socket.write(encodeCommand(['subscribe', '+switch-master', 1]));
      }
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    connections,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A password file that cannot be read until `readable` is set. */
function passwordFile(): { source: { read(): SecretRead }; readable: boolean; reads: number } {
  const file = {
    readable: false,
    reads: 0,
    source: {
      read: (): SecretRead => {
        file.reads++;
        return file.readable ? { ok: true, value: new Secret('sentinel-password') } : { ok: false, reason: 'missing' };
      },
    },
  };
  return file;
}

const options = (port: number, password: SentinelOptions['password']): SentinelOptions => ({ sentinels: [{ host: '127.0.0.1', port }], master: 'mymaster', tls: false, user: undefined, password, timeoutMs: 2000 });

test('sentinel password: a lookup of the master with the password file unreadable opens no connection and names the cause; readable, its connection opens with AUTH', async () => {
  const sentinel = await fakeSentinel();
  try {
    const file = passwordFile();
    const master = sentinelMaster(options(sentinel.port, file.source));
    await assert.rejects(master(), /its password file is missing or empty/);
    assert.equal(file.reads, 1);
    assert.equal(sentinel.connections.length, 0, 'nothing was sent without AUTH');
    file.readable = true;
    assert.deepEqual(await master(), { host: '127.0.0.1', port: 6390 });
    assert.deepEqual(sentinel.connections.map((c) => c.map((command) => command[0])), [['AUTH', 'SENTINEL']]);
    assert.deepEqual(sentinel.connections[0]![0], ['AUTH', 'sentinel-password']);
  } finally {
    await sentinel.close();
  }
});

test('sentinel password: the +switch-master subscription waits while the password file cannot be read, tried again later, and subscribes after AUTH once it can', async () => {
  const sentinel = await fakeSentinel();
  const file = passwordFile();
  const stop = watchSwitches(options(sentinel.port, file.source), () => {});
  try {
    // Asked at once and again after the first pause (100 ms): refused each time, nothing opened.
    await eventually('the password file asked for twice', () => file.reads >= 2, AbortSignal.timeout(10_000));
    assert.equal(sentinel.connections.length, 0, 'no subscription without AUTH');
    file.readable = true;
    await eventually('the subscription', () => sentinel.connections.some((c) => c.some((command) => command[0] === 'SUBSCRIBE')), AbortSignal.timeout(10_000));
    for (const c of sentinel.connections) assert.deepEqual(c[0], ['AUTH', 'sentinel-password'], 'every connection opens with AUTH');
    assert.deepEqual(sentinel.connections.at(-1)!.map((command) => command[0]), ['AUTH', 'SUBSCRIBE']);
  } finally {
    stop();
    await sentinel.close();
  }
});
