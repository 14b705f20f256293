// A small Redis client (the limits and the revocation stores use it; it knows neither): RESP2 over
// node:net or node:tls (node.ts), commands pipelined in order on one connection, a reconnect with
// backoff (to where the sentinels say the master is, when there are), a node that is not the
// master left; nothing else (no runtime dependency).
import type { Socket } from 'node:net';
import type { SecretSource } from '../config/secret.ts';
import { authCommand, nodeStateError, openSocket, roleOf, showAddress, type StoreAddress, type StoreTls } from './node.ts';

export type RespValue = string | number | null | RespValue[] | RespError;

export class RespError extends Error {
  override readonly name = 'RespError';
}

/** Pure: one command as RESP: an array of bulk strings. */
export function encodeCommand(args: readonly (string | number)[]): Buffer {
  // One string, encoded once: a buffer per argument, its length line and its CRLF (three each,
  // then a concat) cost five times as much for a script call's twenty arguments.
  let text = `*${args.length}\r\n`;
  for (const arg of args) {
    const s = String(arg);
    text += `$${Buffer.byteLength(s, 'utf8')}\r\n${s}\r\n`;
  }
  return Buffer.from(text, 'utf8');
}

/**
 * What one reply may be. The gateway's own replies are small: ADMIT answers at most three short
 * strings, MGET one value for each key it checks (three), CONFIG GET a name and its value, the
 * state marker one short line, an error one line (a script error names the script's line: a few
 * hundred bytes), ROLE of a master its replicas (an array of arrays: three deep, one short array
 * per replica). 16 KiB is fifty times the largest of them, 32 items ten times the longest array
 * but ROLE's (30 replicas), and depth 3 is ROLE's. A reply past any of these is not an answer to
 * what the gateway asked: the connection is dropped, and opened again.
 */
const REPLY_LIMITS = { maxBytes: 16 * 1024, maxItems: 32, maxDepth: 3 } as const;

/**
 * How far an incomplete reply was read. parseReply resumes there, so that no byte is read twice
 * however the reply is split: a reply dripped one byte at a time costs what it costs whole.
 */
export interface ReplyProgress {
  /** Where the reply begins (below 0 once RespReader has dropped the bytes before `at`). */
  start: number;
  /** Where its next element begins: everything before is in `open`. */
  at: number;
  /** Where the search for the end of the next line goes on (the bytes before hold no CRLF). */
  scanFrom: number;
  /** Arrays begun and not complete, outermost first: the items read so far, and how many were announced. */
  readonly open: { readonly items: RespValue[]; readonly count: number }[];
}

const replyAt = (at: number): ReplyProgress => ({ start: at, at, scanFrom: at, open: [] });

/** Pure: a length or count line (`-1` for null, else 0..max); anything else is not RESP2. */
function sizeLine(line: string, what: string, max: number): number {
  if (!/^(?:-1|\d{1,10})$/.test(line)) throw new RespError(`malformed ${what} ${JSON.stringify(line.slice(0, 20))}`);
  const n = Number(line);
  if (n > max) throw new RespError(`${what} ${n} (at most ${max})`);
  return n;
}

/**
 * The reply that starts at `from` (an offset), or goes on from where an earlier call stopped
 * (`from` a ReplyProgress, advanced in place), and where the next reply begins; undefined when
 * more bytes are needed. Throws a RespError when the bytes are not RESP2 or the reply passes
 * REPLY_LIMITS, whether it is complete or not (a bulk string is judged by the length it announces).
 */
export function parseReply(buf: Buffer, from: number | ReplyProgress = 0): { value: RespValue; next: number } | undefined {
  const p = typeof from === 'number' ? replyAt(from) : from;
  const tooLarge = (end: number) => {
    if (end - p.start > REPLY_LIMITS.maxBytes) throw new RespError(`a reply larger than ${REPLY_LIMITS.maxBytes} bytes`);
  };
  for (;;) {
    const lineEnd = buf.indexOf('\r\n', Math.max(p.at, p.scanFrom));
    if (lineEnd < 0) {
      // Next time the search goes on from the last byte here (it may be the CR of the CRLF).
      p.scanFrom = Math.max(p.at, buf.length - 1);
      tooLarge(buf.length);
      return undefined;
    }
    const type = String.fromCharCode(buf[p.at]!);
    const line = buf.toString('utf8', p.at + 1, lineEnd);
    let next = lineEnd + 2;
    let value: RespValue;
    switch (type) {
      case '+':
        value = line;
        break;
      case '-':
        value = new RespError(line);
        break;
      case ':':
        if (!/^-?\d{1,19}$/.test(line)) throw new RespError(`malformed integer ${JSON.stringify(line.slice(0, 20))}`);
        value = Number(line);
        break;
      case '$': {
        const length = sizeLine(line, 'bulk string length', REPLY_LIMITS.maxBytes);
        if (length < 0) {
          value = null;
          break;
        }
        tooLarge(next + length + 2);
        if (buf.length < next + length + 2) {
          // The header is read again next time (a short line): the body is only waited for.
          p.scanFrom = p.at;
          return undefined;
        }
        if (buf[next + length] !== 0x0d || buf[next + length + 1] !== 0x0a) throw new RespError('a bulk string longer than its length');
        value = buf.toString('utf8', next, next + length);
        next += length + 2;
        break;
      }
      case '*': {
        const count = sizeLine(line, 'array count', REPLY_LIMITS.maxItems);
        if (count > 0) {
          if (p.open.length >= REPLY_LIMITS.maxDepth) throw new RespError(`arrays nested deeper than ${REPLY_LIMITS.maxDepth}`);
          p.open.push({ items: [], count });
          p.at = p.scanFrom = next;
          tooLarge(next);
          continue;
        }
        value = count < 0 ? null : [];
        break;
      }
      default:
        throw new RespError(`unexpected reply type ${JSON.stringify(type)}`);
    }
    p.at = p.scanFrom = next;
    tooLarge(next);
    // The element completes the arrays it ends, innermost first.
    for (;;) {
      const top = p.open.at(-1);
      if (top === undefined) {
        p.start = next; // the next reply begins here
        return { value, next };
      }
      top.items.push(value);
      if (top.items.length < top.count) break;
      p.open.pop();
      value = top.items;
    }
  }
}

/**
 * The replies of one connection, read as their bytes arrive. Bytes are appended to a buffer that
 * grows by doubling and the bytes of finished elements are dropped, so each byte is copied and
 * searched a bounded number of times, and an incomplete reply never holds more than
 * REPLY_LIMITS.maxBytes.
 */
export class RespReader {
  #buf: Buffer = Buffer.alloc(0);
  #length = 0;
  readonly #progress: ReplyProgress = replyAt(0);

  /** The replies `chunk` completes, in order; throws a RespError as parseReply does. */
  push(chunk: Buffer): RespValue[] {
    if (this.#length + chunk.length > this.#buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#length + chunk.length, 4096));
      this.#buf.copy(grown, 0, 0, this.#length);
      this.#buf = grown;
    }
    chunk.copy(this.#buf, this.#length);
    this.#length += chunk.length;
    const bytes = this.#buf.subarray(0, this.#length);
    const replies: RespValue[] = [];
    for (let reply = parseReply(bytes, this.#progress); reply !== undefined; reply = parseReply(bytes, this.#progress)) replies.push(reply.value);
    const done = this.#progress.at;
    if (done > 0) {
      this.#buf.copy(this.#buf, 0, done, this.#length);
      this.#length -= done;
      this.#progress.start -= done;
      this.#progress.at -= done;
      this.#progress.scanFrom -= done;
    }
    return replies;
  }
}

export interface RespOptions {
  /** Where the store is: one address, or one asked for before every connection (the master the sentinels name). */
  readonly address: StoreAddress | (() => Promise<StoreAddress>);
  readonly tls: StoreTls | false;
  /** The ACL user (AUTH user password); undefined: the default user (AUTH password). */
  readonly user?: string;
  /** Read on every connection, so a rotated password file is used from the next reconnect on. */
  readonly password: SecretSource | undefined;
  /**
   * Each connection asks ROLE before it carries anything, and is dropped when its node says it is
   * not the master (a replica answers writes with READONLY). `required`: a node that does not
   * answer ROLE is dropped too (Sentinel: the sentinels' answer is verified); `if-answered`: it is
   * used (a Redis that refuses ROLE to the user). Undefined: not asked.
   */
  readonly role?: 'required' | 'if-answered';
  /** Told when the connection comes up (with the node's address) or goes down (with why). */
  readonly onState: (up: boolean, why?: string, at?: StoreAddress) => void;
  /** A command not answered within this fails (the store counts as down for it); a connection not up within it is dropped. */
  readonly timeoutMs?: number;
  /** What the server is to its users, in messages (`the limits store`); default `the store`. */
  readonly name?: string;
  /**
   * Run on every connection once the password (if any) is accepted, before it carries any other
   * command (the store's state marker is checked there): the connection is up once it resolves,
   * and dropped, and opened again, when it rejects.
   */
  readonly handshake?: (command: (args: readonly (string | number)[]) => Promise<RespValue>) => Promise<void>;
  /** The waits before each reconnect in turn, the last one repeated (default: 100 ms growing to 5 s); tests shorten them. */
  readonly reconnectDelaysMs?: readonly number[];
}

const BACKOFF_MS = [100, 200, 500, 1000, 2000, 5000];


/** One connection, reconnected with backoff; a command sent while it is down fails at once. */
export class RespClient {
  readonly #opts: RespOptions;
  #socket: Socket | undefined;
  /** Connected, and the password (if any) accepted: commands may go. */
  #ready = false;
  #pending: { resolve(v: RespValue): void; reject(e: Error): void; timer: NodeJS.Timeout }[] = [];
  #attempt = 0;
  #closed = false;
  /** Why the last connection failed, and the reason last reported down (each new reason is told once). */
  #lastError: string | undefined;
  #reportedDown: string | undefined;
  #wasUp = false;
  /** The node of the connection up now. */
  #at: StoreAddress | undefined;

  constructor(opts: RespOptions) {
    this.#opts = opts;
    this.#connect();
  }

  get #name(): string {
    return this.#opts.name ?? 'the store';
  }

  get #timeoutMs(): number {
    return this.#opts.timeoutMs ?? 2000;
  }

  get up(): boolean {
    return this.#ready;
  }

  command(args: readonly (string | number)[]): Promise<RespValue> {
    if (!this.#ready || this.#socket === undefined) return Promise.reject(new Error(`${this.#name} is not connected`));
    return this.#send(args);
  }

  close(): void {
    this.#closed = true;
    this.#socket?.destroy();
  }

  /** Drops the connection when it is to a node other than `at` (the sentinels moved the master there): the next one asks them again. */
  leaveUnlessAt(at: StoreAddress, why: string): void {
    const now = this.#at;
    if (this.#ready && now !== undefined && (now.host !== at.host || now.port !== at.port)) this.#socket?.destroy(new Error(why));
  }

  #send(args: readonly (string | number)[]): Promise<RespValue> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.#socket?.destroy(new Error(`${this.#name} did not answer in time`)), this.#timeoutMs);
      this.#pending.push({ resolve, reject, timer });
      this.#socket!.write(encodeCommand(args));
    });
  }

  /** Where to connect (the sentinels are asked, when there are), then the connection. */
  #connect(): void {
    if (this.#closed) return;
    const { address } = this.#opts;
    const located = typeof address === 'function' ? address() : Promise.resolve(address);
    located.then(
      (at) => this.#open(at),
      (err: Error) => this.#ended(err.message),
    );
  }

  #open(at: StoreAddress): void {
    if (this.#closed) return;
    let opened: ReturnType<typeof openSocket>;
    try {
      opened = openSocket(at, this.#opts.tls);
    } catch (err) {
      this.#ended((err as Error).message);
      return;
    }
    const { socket } = opened;
    this.#socket = socket;
    socket.setNoDelay(true);
    // An address whose machine is gone may never answer: the connection is given up on, as a command would be.
    const notConnected = setTimeout(() => socket.destroy(new Error(`${this.#name} at ${showAddress(at)} did not accept the connection in time`)), this.#timeoutMs);
    notConnected.unref();
    socket.once(opened.ready, () => {
      clearTimeout(notConnected);
      this.#greet(socket, at).then(
        () => {
          if (socket.destroyed) return;
          this.#attempt = 0;
          this.#reportedDown = undefined;
          this.#ready = this.#wasUp = true;
          this.#at = at;
          this.#opts.onState(true, undefined, at);
        },
        (err: Error) => socket.destroy(err),
      );
    });
    const reader = new RespReader();
    socket.on('data', (chunk: Buffer) => this.#replies(socket, reader, chunk));
    socket.on('error', (err) => (this.#lastError = err.message));
    socket.once('close', () => {
      clearTimeout(notConnected);
      this.#ready = false;
      for (const waiter of this.#pending.splice(0)) {
        clearTimeout(waiter.timer);
        waiter.reject(new Error(`${this.#name} connection closed`));
      }
      const why = this.#lastError ?? 'the connection closed';
      this.#lastError = undefined;
      this.#ended(why);
    });
  }

  /** The password, ROLE (Sentinel) and the caller's handshake, before the connection carries anything else. */
  async #greet(socket: Socket, at: StoreAddress): Promise<void> {
    const password = this.#opts.password?.read();
    if (password?.ok === false) throw new Error(`${this.#name} password file is missing or empty`);
    if (password !== undefined && (await this.#send(authCommand(this.#opts.user, password.value))) instanceof RespError) {
      throw new Error(this.#opts.user === undefined ? `${this.#name} refused the password` : `${this.#name} refused the user ${this.#opts.user} or its password`);
    }
    if (this.#opts.role !== undefined) {
      const role = await this.#send(['ROLE']);
      const required = this.#opts.role === 'required';
      if (role instanceof RespError && required) throw new Error(`${this.#name} at ${showAddress(at)} refused ROLE (${role.message.split(' ')[0]}): the user needs it to check that the node the sentinels name is the master`);
      if (!(role instanceof RespError) && roleOf(role) !== 'master') throw new Error(`${this.#name} at ${showAddress(at)} is not the master (ROLE ${String(roleOf(role))})${required ? ': asking the sentinels again' : ''}`);
    }
    if (socket.destroyed) return;
    try {
      await this.#opts.handshake?.((args) => this.#send(args));
    } catch (err) {
      throw new Error(`${this.#name}: ${(err as Error).message}`);
    }
  }

  #replies(socket: Socket, reader: RespReader, chunk: Buffer): void {
    let replies: RespValue[];
    try {
      replies = reader.push(chunk);
    } catch (err) {
      // Not Redis, or a broken one, or a reply larger than any we ask for: the connection is
      // dropped (and opened again), never the process.
      socket.destroy(new Error(`${this.#name} sent ${(err as Error).message}`));
      return;
    }
    for (const value of replies) {
      const waiter = this.#pending.shift();
      if (!waiter) continue;
      clearTimeout(waiter.timer);
      const state = value instanceof RespError ? nodeStateError(value.message) : undefined;
      if (state === undefined) {
        waiter.resolve(value);
        continue;
      }
      // Not an answer to the command: the command failed as in an outage (a charge is kept and
      // sent again), and a replica's connection is dropped so that the next one finds the master.
      const why = `${this.#name} answered ${(value as RespError).message.split(' ')[0]}${state === 'replica' ? ': it is a replica now' : ''}`;
      waiter.reject(new Error(why));
      if (state === 'replica') socket.destroy(new Error(why));
    }
  }

  /** A connection ended, or could not be opened: told (once per reason while down), then opened again after a backoff. */
  #ended(why: string): void {
    // Down is told when an up connection goes, and when the reason it cannot come up changes
    // (a refused password, a missing password file), never once per retry.
    if (this.#wasUp || (why !== this.#reportedDown && !this.#closed)) {
      this.#wasUp = false;
      this.#reportedDown = why;
      this.#opts.onState(false, why);
    }
    if (this.#closed) return;
    const delays = this.#opts.reconnectDelaysMs ?? BACKOFF_MS;
    const delay = delays[Math.min(this.#attempt++, delays.length - 1)]!;
    setTimeout(() => this.#connect(), delay).unref();
  }
}
