// A real redis-server (Debian's package, installed by .ci/run) for tests: on a free loopback port,
// in its own directory, without persistence; stopped and started again on the same port.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually } from './eventually.ts';

export interface RedisServer {
  readonly port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Resolves once the port accepts connections, or early when `gone()` says the server will not come (the caller reports why). No test
 *  context here (redis-server starts in before() hooks and between steps), so only eventually's 120 s hang guard bounds the wait. */
async function accepting(port: number, gone: () => boolean): Promise<void> {
  const connects = () =>
    new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
  await eventually(`redis-server accepting connections on port ${port}`, async () => gone() || (await connects()), new AbortController().signal, 20);
}

/**
 * `extra` are more redis-server flags (e.g. `--requirepass`), kept across stop and start; given as
 * a function, they are made from the port (`--port 0 --tls-port PORT` serves TLS alone on it).
 */
export async function startRedis(extra: readonly string[] | ((port: number) => readonly string[]) = []): Promise<RedisServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'test-redis-'));
  const flags = typeof extra === 'function' ? extra(port) : extra;
  let child: ChildProcess | undefined;
  const start = async () => {
    const c = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...flags], { stdio: 'ignore' });
    child = c;
    const missing = new Promise<never>((_, reject) =>
      c.once('error', (err: NodeJS.ErrnoException) =>
        reject(new Error(err.code === 'ENOENT' ? 'redis-server is not installed: the limits tests need it (Debian: apt-get install redis-server; .ci/run installs it)' : `redis-server did not start: ${err.message}`)),
      ),
    );
    let failed = false;
    missing.catch(() => (failed = true));
    await Promise.race([accepting(port, () => failed || c.exitCode !== null), missing]);
    if (c.exitCode !== null) throw new Error(`redis-server exited at start (${c.exitCode})`);
  };
  const stop = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    await new Promise((resolve) => {
      c.once('exit', resolve);
      c.kill('SIGKILL');
    });
  };
  await start();
  return { port, start, stop, close: async () => (await stop(), rmSync(dir, { recursive: true, force: true })) };
}
