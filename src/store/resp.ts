// A small Redis client (the limits and the revocation stores use it; it knows neither): RESP2 over node:net or node:tls, commands pipelined
// in order on one connection, a reconnect with backoff, and nothing else (no runtime dependency).
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { SecretSource } from '../config/secret.ts';

export type RespValue = string | number | null | RespValue[] | RespError;

export class RespError extends Error {
  override readonly name = 'RespError';
}

/** Pure: one command as RESP: an array of bulk strings. */
export function encodeCommand(args: readonly (string | number)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = Buffer.from(String(arg), 'utf8');
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

/** Pure: the reply that starts at `at`, and where the next begins; undefined when more bytes are needed. */
export function parseReply(buf: Buffer, at = 0): { value: RespValue; next: number } | undefined {
  const lineEnd = buf.indexOf('\r\n', at);
  if (lineEnd < 0) return undefined;
  const type = String.fromCharCode(buf[at]!);
  const line = buf.toString('utf8', at + 1, lineEnd);
  const after = lineEnd + 2;
  switch (type) {
    case '+':
      return { value: line, next: after };
    case '-':
      return { value: new RespError(line), next: after };
    case ':':
      return { value: Number(line), next: after };
    case '$': {
      const length = Number(line);
      if (length < 0) return { value: null, next: after };
      if (buf.length < after + length + 2) return undefined;
      return { value: buf.toString('utf8', after, after + length), next: after + length + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, next: after };
      const items: RespValue[] = [];
      let next = after;
      for (let i = 0; i < count; i++) {
        const item = parseReply(buf, next);
        if (item === undefined) return undefined;
        items.push(item.value);
        next = item.next;
      }
      return { value: items, next };
    }
    default:
      throw new RespError(`unexpected reply type ${JSON.stringify(type)}`);
  }
}

export interface RespOptions {
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
  /** Read on every connection, so a rotated password file is used from the next reconnect on. */
  readonly password: SecretSource | undefined;
  /** Told when the connection comes up or goes down (the failure policy's log line and metric). */
  readonly onState: (up: boolean, why?: string) => void;
  /** A command not answered within this fails (the store counts as down for it). */
  readonly timeoutMs?: number;
  /** What the server is to its users, in messages (`the limits store`); default `the store`. */
  readonly name?: string;
}

/** The largest reply kept while it is incomplete. */
const MAX_REPLY_BYTES = 1024 * 1024;

const BACKOFF_MS = [100, 200, 500, 1000, 2000, 5000];

/** One connection, reconnected with backoff; a command sent while it is down fails at once. */
export class RespClient {
  readonly #opts: RespOptions;
  #socket: Socket | undefined;
  /** Connected, and the password (if any) accepted: commands may go. */
  #ready = false;
  #buffer: Buffer = Buffer.alloc(0);
  #pending: { resolve(v: RespValue): void; reject(e: Error): void; timer: NodeJS.Timeout }[] = [];
  #attempt = 0;
  #closed = false;
  /** Why the last connection failed, and the reason last reported down (each new reason is told once). */
  #lastError: string | undefined;
  #reportedDown: string | undefined;

  constructor(opts: RespOptions) {
    this.#opts = opts;
    this.#connect();
  }

  get #name(): string {
    return this.#opts.name ?? 'the store';
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

  #send(args: readonly (string | number)[]): Promise<RespValue> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.#socket?.destroy(new Error(`${this.#name} did not answer in time`)), this.#opts.timeoutMs ?? 2000);
      this.#pending.push({ resolve, reject, timer });
      this.#socket!.write(encodeCommand(args));
    });
  }

  #connect(): void {
    if (this.#closed) return;
    const { host, port } = this.#opts;
    const socket = this.#opts.tls ? tlsConnect({ host, port, servername: host }) : netConnect({ host, port });
    this.#socket = socket;
    socket.setNoDelay(true);
    socket.once(this.#opts.tls ? 'secureConnect' : 'connect', () => {
      const password = this.#opts.password?.read();
      if (password?.ok === false) {
        socket.destroy(new Error(`${this.#name} password file is missing or empty`));
        return;
      }
      const auth = password === undefined ? Promise.resolve<RespValue>('OK') : this.#send(['AUTH', password.value]);
      auth.then(
        (reply) => {
          if (reply instanceof RespError) {
            socket.destroy(new Error(`${this.#name} refused the password`));
            return;
          }
          this.#attempt = 0;
          this.#reportedDown = undefined;
          this.#ready = true;
          this.#opts.onState(true);
        },
        () => {},
      );
    });
    socket.on('data', (chunk: Buffer) => {
      this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
      let at = 0;
      try {
        for (;;) {
          const reply = parseReply(this.#buffer, at);
          if (reply === undefined) break;
          at = reply.next;
          const waiter = this.#pending.shift();
          if (waiter) {
            clearTimeout(waiter.timer);
            waiter.resolve(reply.value);
          }
        }
      } catch (err) {
        // Not Redis, or a broken one: the connection is dropped (and retried), never the process.
        socket.destroy(err as Error);
        return;
      }
      this.#buffer = this.#buffer.subarray(at);
      // The limits' replies are a few bytes: one that keeps growing is not a reply we asked for.
      if (this.#buffer.length > MAX_REPLY_BYTES) socket.destroy(new Error(`${this.#name} sent a reply larger than 1 MiB`));
    });
    socket.on('error', (err) => (this.#lastError = err.message));
    socket.once('close', () => {
      const wasUp = this.#ready;
      const why = this.#lastError ?? 'the connection closed';
      this.#lastError = undefined;
      this.#ready = false;
      this.#buffer = Buffer.alloc(0);
      for (const waiter of this.#pending.splice(0)) {
        clearTimeout(waiter.timer);
        waiter.reject(new Error(`${this.#name} connection closed`));
      }
      // Down is told when an up connection goes, and when the reason it cannot come up changes
      // (a refused password, a missing password file), never once per retry.
      if (wasUp || (why !== this.#reportedDown && !this.#closed)) {
        this.#reportedDown = why;
        this.#opts.onState(false, why);
      }
      if (this.#closed) return;
      const delay = BACKOFF_MS[Math.min(this.#attempt++, BACKOFF_MS.length - 1)]!;
      setTimeout(() => this.#connect(), delay).unref();
    });
  }
}
