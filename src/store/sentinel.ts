// Redis Sentinel: which node is the master now. Before every connection to the store the client
// asks the sentinels in turn (SENTINEL get-master-addr-by-name), the one that answered first next
// time, and then checks on the node itself that it is the master (ROLE, in RespClient): a
// sentinel's answer can be out of date during a failover. A connection that is lost, or whose
// node answers READONLY (it was demoted), is opened again the same way, so the gateway follows a
// failover without a restart.
import type { SecretSource } from '../config/secret.ts';
import { authCommand, openSocket, showAddress, type StoreAddress, type StoreTls } from './node.ts';
import { encodeCommand, RespError, RespReader, type RespValue } from './resp.ts';

export interface SentinelOptions {
  readonly sentinels: readonly StoreAddress[];
  /** The name the sentinels monitor the master under. */
  readonly master: string;
  readonly tls: StoreTls | false;
  /** The sentinels' own user and password (their requirepass or ACL), when they have one. */
  readonly user: string | undefined;
  readonly password: SecretSource | undefined;
  /** Each sentinel's answer is waited for this long. */
  readonly timeoutMs: number;
}

/** Pure: the address in a get-master-addr-by-name reply ([host, port]); undefined when the sentinel does not know the name. */
export function masterAddress(reply: RespValue): StoreAddress | undefined {
  if (!Array.isArray(reply) || reply.length !== 2) return undefined;
  const [host, port] = reply;
  if (typeof host !== 'string' || host === '' || typeof port !== 'string' || !/^\d{1,5}$/.test(port) || Number(port) > 65535) return undefined;
  return { host, port: Number(port) };
}

type SentinelSocket = ReturnType<typeof openSocket>['socket'];

/**
 * A connection of its own to a sentinel, `commands` sent once it is up, after AUTH when the
 * sentinels have a password; undefined when the password file cannot be read (nothing is sent
 * without AUTH to a sentinel that wants it: it would refuse every command). `expected`: the
 * replies to wait for, AUTH's first when `authed`.
 */
function connectSentinel(at: StoreAddress, opts: Pick<SentinelOptions, 'tls' | 'user' | 'password'>, commands: readonly (readonly (string | number)[])[]): { socket: SentinelSocket; expected: number; authed: boolean } | undefined {
  const password = opts.password?.read();
  if (password?.ok === false) return undefined;
  const { socket, ready } = openSocket(at, opts.tls);
  const sent = password === undefined ? commands : [authCommand(opts.user, password.value), ...commands];
  socket.once(ready, () => socket.write(Buffer.concat(sent.map(encodeCommand))));
  return { socket, expected: sent.length, authed: password !== undefined };
}

/**
 * Sends `args` on a connection of its own (connectSentinel), and answers its reply; the
 * connection is closed in any case. Fails on a password file that cannot be read, a refused
 * password, a connection that ends or errs, and no answer within `timeoutMs`.
 */
function askOnce(at: StoreAddress, opts: Pick<SentinelOptions, 'tls' | 'user' | 'password' | 'timeoutMs'>, args: readonly (string | number)[]): Promise<RespValue> {
  return new Promise((resolve, reject) => {
    const conn = connectSentinel(at, opts, [args]);
    if (conn === undefined) return reject(new Error('its password file is missing or empty'));
    const { socket } = conn;
    const done = (err: Error | undefined, value?: RespValue) => {
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(value!);
    };
    const timer = setTimeout(() => done(new Error('no answer in time')), opts.timeoutMs);
    const replies: RespValue[] = [];
    const reader = new RespReader();
    socket.on('data', (chunk: Buffer) => {
      try {
        replies.push(...reader.push(chunk));
      } catch (err) {
        return done(err as Error);
      }
      if (conn.authed && replies[0] instanceof RespError) return done(new Error('it refused the user or password'));
      if (replies.length === conn.expected) done(undefined, replies.at(-1));
    });
    socket.once('error', (err) => done(err));
    socket.once('close', () => done(new Error('the connection closed')));
  });
}

/**
 * Where the master is now, as the first sentinel that knows it says (asked in order; that one is
 * asked first from then on, as the Sentinel client guidelines say). Rejects naming every
 * sentinel and why it gave no address.
 */
export function sentinelMaster(opts: SentinelOptions): () => Promise<StoreAddress> {
  const order = [...opts.sentinels];
  return async () => {
    const why: string[] = [];
    for (const sentinel of [...order]) {
      try {
        const reply = await askOnce(sentinel, opts, ['SENTINEL', 'get-master-addr-by-name', opts.master]);
        const at = masterAddress(reply);
        if (at !== undefined) {
          order.splice(order.indexOf(sentinel), 1);
          order.unshift(sentinel);
          return at;
        }
        why.push(`${showAddress(sentinel)}: ${reply instanceof RespError ? reply.message : `does not know ${opts.master}`}`);
      } catch (err) {
        why.push(`${showAddress(sentinel)}: ${(err as Error).message}`);
      }
    }
    throw new Error(`no sentinel named the master of ${opts.master} (${why.join('; ')})`);
  };
}

/** Pure: where a +switch-master message (`NAME OLD-HOST OLD-PORT NEW-HOST NEW-PORT`) moves the master named `master`; undefined for another master or anything else. */
export function switchedTo(message: RespValue, master: string): StoreAddress | undefined {
  if (!Array.isArray(message) || message[0] !== 'message' || message[1] !== '+switch-master' || typeof message[2] !== 'string') return undefined;
  const words = message[2].split(' ');
  return words.length === 5 && words[0] === master ? masterAddress([words[3]!, words[4]!]) : undefined;
}

const WATCH_BACKOFF_MS = [100, 1000, 5000];

/**
 * Follows the sentinels' announcements: a subscription to +switch-master on one sentinel (the
 * next in turn whenever the connection ends, after a pause), and `onSwitch` called with the new
 * master's address as soon as a failover ends, rather than when the old master drops its clients
 * (seconds later: writes it takes meanwhile are lost when it becomes a replica). Stopped by the
 * function it returns.
 */
export function watchSwitches(opts: SentinelOptions, onSwitch: (to: StoreAddress) => void): () => void {
  let stopped = false;
  let turn = 0;
  let failures = 0;
  let socket: SentinelSocket | undefined;
  let timer: NodeJS.Timeout | undefined;
  const next = () => {
    if (stopped) return;
    const at = opts.sentinels[turn++ % opts.sentinels.length]!;
    let conn: ReturnType<typeof connectSentinel>;
    try {
      conn = connectSentinel(at, opts, [['SUBSCRIBE', '+switch-master']]);
    } catch {
      return retry();
    }
    // A password file that cannot be read: tried again later, never subscribed without AUTH.
    if (conn === undefined) return retry();
    const own = conn.socket;
    socket = own;
    own.setKeepAlive(true, 10_000);
    const reader = new RespReader();
    own.on('data', (chunk: Buffer) => {
      try {
        for (const value of reader.push(chunk)) {
          if (value instanceof RespError) {
            own.destroy(); // a refused password or command: the next sentinel, later
            return;
          }
          if (Array.isArray(value) && value[0] === 'subscribe') failures = 0;
          const to = switchedTo(value, opts.master);
          if (to !== undefined) onSwitch(to);
        }
      } catch {
        own.destroy();
      }
    });
    own.on('error', () => {});
    own.once('close', retry);
  };
  const retry = () => {
    if (stopped) return;
    timer = setTimeout(next, WATCH_BACKOFF_MS[Math.min(failures++, WATCH_BACKOFF_MS.length - 1)]).unref();
  };
  next();
  return () => {
    stopped = true;
    clearTimeout(timer);
    socket?.destroy();
  };
}
