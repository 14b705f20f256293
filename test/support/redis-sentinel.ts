// Redis as operators run it for tests: a master and its replica (real redis-server processes,
// test/support/redis-server.ts) watched by three sentinels (`redis-server CONF --sentinel`), on
// loopback, optionally all over TLS; and a one-off command to any of them (redisAsk). Start-up
// waits on conditions, never on a time: the replica in sync, every sentinel able to authorise a
// failover (SENTINEL CKQUORUM).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { encodeCommand, RespError, RespReader, type RespValue } from '../../src/store/resp.ts';
import { eventually } from './eventually.ts';
import { freePort, startRedis, type RedisServer } from './redis-server.ts';

/** TLS for every node and sentinel: the server's key and certificate, the CA clients verify them with. */
export interface SetTls {
  readonly certFile: string;
  readonly keyFile: string;
  readonly caFile: string;
}

export interface AskOptions {
  readonly user?: string;
  readonly password?: string;
  readonly tls?: SetTls;
  /**
   * Milliseconds without a byte after which the attempt is given up (rejected, the connection
   * destroyed), for a caller that polls and asks again: a reply that never comes then costs one
   * attempt, not the rest of the wait. Default: none.
   */
  readonly idleMs?: number;
}

/** One command on a connection of its own (after AUTH when a password is given): its reply (an error reply is returned, not thrown). */
export function redisAsk(port: number, args: readonly (string | number)[], opts: AskOptions = {}): Promise<RespValue> {
  return new Promise((resolve, reject) => {
    const socket = opts.tls === undefined ? netConnect(port, '127.0.0.1') : tlsConnect({ host: '127.0.0.1', port, ca: [readFileSync(opts.tls.caFile)] });
    const commands = opts.password === undefined ? [args] : [opts.user === undefined ? ['AUTH', opts.password] : ['AUTH', opts.user, opts.password], args];
    const reader = new RespReader();
    const replies: RespValue[] = [];
    socket.once(opts.tls === undefined ? 'connect' : 'secureConnect', () => socket.write(Buffer.concat(commands.map(encodeCommand))));
    socket.on('data', (chunk: Buffer) => {
      try {
        replies.push(...reader.push(chunk)); // the gateway's own reply limits: ask nothing larger
      } catch (err) {
        socket.destroy();
        return reject(err as Error);
      }
      if (replies.length < commands.length) return;
      socket.destroy();
      if (replies[0] instanceof RespError && commands.length === 2) reject(new Error(`AUTH refused on port ${port}: ${replies[0].message}`));
      else resolve(replies.at(-1)!);
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error(`port ${port} closed the connection before answering ${String(args[0])}`)));
    if (opts.idleMs !== undefined) socket.setTimeout(opts.idleMs, () => socket.destroy(new Error(`port ${port} gave no answer to ${String(args[0])} within ${opts.idleMs} ms`)));
  });
}

/** redisAsk that answers undefined where the port does not answer (a node stopped, starting). */
async function askMaybe(port: number, args: readonly (string | number)[], opts: AskOptions): Promise<RespValue | undefined> {
  try {
    return await redisAsk(port, args, opts);
  } catch {
    return undefined;
  }
}

export interface Sentinel {
  readonly port: number;
  stop(): Promise<void>;
}

export interface SentinelSet {
  /** The name the sentinels monitor the master under. */
  readonly name: string;
  /** nodes[0] starts as the master, nodes[1] as its replica. */
  readonly nodes: readonly RedisServer[];
  readonly sentinels: readonly Sentinel[];
  /** `redis+sentinel://` (rediss+sentinel with TLS) naming every sentinel, and the user when given. */
  url(user?: string): string;
  /** The master's port, as the sentinels agree on it now (every one that answers names it). */
  masterPort(): Promise<number>;
  /** What a node says of itself: ROLE's first item, or undefined when it does not answer. */
  role(port: number): Promise<string | undefined>;
  /** Resolves once `port` is the master for every sentinel, and every other node that answers replicates it, in sync. */
  settled(port: number, signal: AbortSignal): Promise<void>;
  readonly ask: AskOptions;
  readonly askSentinel: AskOptions;
  close(): Promise<void>;
}

export interface SentinelSetOptions {
  /** More flags for both nodes (an ACL, a password), made from the node's port. */
  readonly nodeFlags?: (port: number) => readonly string[];
  /** More lines for each sentinel's configuration file (its own requirepass, say). */
  readonly sentinelConfig?: readonly string[];
  /** How the test's own commands authenticate to the nodes, and to the sentinels. */
  readonly ask?: AskOptions;
  readonly askSentinel?: AskOptions;
  readonly tls?: SetTls;
}

const NAME = 'limits';

function tlsFlags(tls: SetTls | undefined, port: number): string[] {
  if (tls === undefined) return [];
  return ['--port', '0', '--tls-port', String(port), '--tls-cert-file', tls.certFile, '--tls-key-file', tls.keyFile, '--tls-ca-cert-file', tls.caFile, '--tls-auth-clients', 'no', '--tls-replication', 'yes'];
}

/** One sentinel: its configuration file (which it rewrites) in a directory of its own. */
async function startSentinel(masterPort: number, opts: SentinelSetOptions, dir: string): Promise<Sentinel> {
  const port = await freePort();
  const conf = join(dir, `sentinel-${port}.conf`);
  const tls = opts.tls;
  writeFileSync(conf, [
    ...(tls === undefined ? [`port ${port}`] : ['port 0', `tls-port ${port}`, `tls-cert-file ${tls.certFile}`, `tls-key-file ${tls.keyFile}`, `tls-ca-cert-file ${tls.caFile}`, 'tls-auth-clients no', 'tls-replication yes']),
    'bind 127.0.0.1',
    `dir ${dir}`,
    `sentinel monitor ${NAME} 127.0.0.1 ${masterPort} 2`,
    // A stopped master is found down after a second (the default, 30 s, is for real networks).
    `sentinel down-after-milliseconds ${NAME} 1000`,
    `sentinel failover-timeout ${NAME} 10000`,
    ...(opts.sentinelConfig ?? []),
    '',
  ].join('\n'));
  const child: ChildProcess = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
  const ended = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('error', () => {});
  await eventually(`sentinel on port ${port}`, async () => child.exitCode !== null || (await askMaybe(port, ['PING'], { ...opts.askSentinel, tls: opts.tls })) !== undefined, new AbortController().signal, 20);
  if (child.exitCode !== null) throw new Error(`redis-server --sentinel exited at start (${child.exitCode}): is redis-server installed with Sentinel?`);
  return {
    port,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
      await ended;
    },
  };
}

/** A master, its replica and three sentinels (quorum 2), ready to fail over; what started is stopped again when the rest cannot. */
export async function startSentinelSet(opts: SentinelSetOptions = {}): Promise<SentinelSet> {
  const started: { close(): Promise<void> }[] = [];
  try {
    return await startAll(opts, started);
  } catch (err) {
    await Promise.all(started.map((x) => x.close()));
    throw err;
  }
}

async function startAll(opts: SentinelSetOptions, started: { close(): Promise<void> }[]): Promise<SentinelSet> {
  const ask = { ...opts.ask, tls: opts.tls };
  const askSentinel = { ...opts.askSentinel, tls: opts.tls };
  const flags = (port: number, more: readonly string[]) => [...tlsFlags(opts.tls, port), ...(opts.nodeFlags?.(port) ?? []), ...more];
  const master = await startRedis((port) => flags(port, []));
  started.push(master);
  const replica = await startRedis((port) => flags(port, ['--replicaof', '127.0.0.1', String(master.port)]));
  started.push(replica);
  const dir = mkdtempSync(join(tmpdir(), 'test-sentinels-'));
  started.push({ close: async () => rmSync(dir, { recursive: true, force: true }) });
  const sentinels = await Promise.all([0, 1, 2].map(async () => {
    const sentinel = await startSentinel(master.port, opts, dir);
    started.unshift({ close: sentinel.stop });
    return sentinel;
  }));
  const role = async (port: number) => {
    const r = await askMaybe(port, ['ROLE'], ask);
    return Array.isArray(r) && typeof r[0] === 'string' ? r[0] : undefined;
  };
  const named = async () => {
    const answers = await Promise.all(sentinels.map((s) => askMaybe(s.port, ['SENTINEL', 'get-master-addr-by-name', NAME], askSentinel)));
    return answers.filter(Array.isArray).map((a) => Number((a as string[])[1]));
  };
  const nodes = [master, replica];
  const set: SentinelSet = {
    name: NAME,
    nodes,
    sentinels,
    ask,
    askSentinel,
    url: (user) => `${opts.tls === undefined ? 'redis' : 'rediss'}+sentinel://${user === undefined ? '' : `${user}@`}${sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}/${NAME}`,
    role,
    masterPort: async () => {
      const ports = new Set(await named());
      if (ports.size !== 1) throw new Error(`the sentinels do not agree on the master: ${[...ports].join(', ') || 'none answers'}`);
      return [...ports][0]!;
    },
    settled: async (port, signal) => {
      const state = async () => {
        const ports = await named();
        const others = await Promise.all(nodes.filter((n) => n.port !== port).map((n) => askMaybe(n.port, ['ROLE'], ask)));
        const replicating = others.every((r) => r === undefined || (Array.isArray(r) && r[0] === 'slave' && Number(r[2]) === port && r[3] === 'connected'));
        return { ports, master: await role(port), replicating };
      };
      let last: unknown;
      await eventually(`port ${port} the master of every sentinel, every other node its replica in sync`, async () => {
        const s = (last = await state());
        return s.ports.length === sentinels.length && s.ports.every((p) => p === port) && s.master === 'master' && s.replicating;
      }, signal, 50, () => JSON.stringify(last));
    },
    close: async () => {
      await Promise.all(sentinels.map((s) => s.stop()));
      await Promise.all(nodes.map((n) => n.close()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  // Ready to fail over: the replica in sync, and every sentinel knows it and can authorise a failover.
  const signal = new AbortController().signal;
  await set.settled(master.port, signal);
  await eventually('every sentinel able to fail over (SENTINEL CKQUORUM, the replica known)', async () => {
    const checks = await Promise.all(sentinels.map(async (s) => {
      const quorum = await askMaybe(s.port, ['SENTINEL', 'CKQUORUM', NAME], askSentinel);
      const info = await askMaybe(s.port, ['INFO', 'sentinel'], askSentinel);
      return typeof quorum === 'string' && quorum.startsWith('OK 3 ') && typeof info === 'string' && info.includes(`name=${NAME},status=ok,`) && info.includes(',slaves=1,sentinels=3');
    }));
    return checks.every(Boolean);
  }, signal, 50);
  return set;
}
