// A WebSocket client for the tests, on a raw socket: it sends the upgrade head and whatever bytes
// a test gives it (well-formed frames, or hostile ones from ws-wire.ts), and reads back the HTTP
// answer, then frames, messages and the close. It judges nothing the peer sends; the tests do.
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { acceptOf, clientText, closeBody, frame, FrameSplitter, OP, upgradeHead, type ReadFrame } from './ws-wire.ts';

/** The HTTP answer to an upgrade: 101 with the socket switched, or another status with its body. */
export interface UpgradeResult {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly client: SocketClient | undefined;
}

export class SocketClient {
  readonly frames: ReadFrame[] = [];
  readonly #splitter = new FrameSplitter();
  #waiters: (() => void)[] = [];
  #fragments: Buffer[] = [];
  #messages: string[] = [];
  #read = 0;
  ended = false;
  /** Whether a close from the peer is answered (a test of a client that never answers says false). */
  answersClose = true;

  constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => this.push(chunk));
    socket.on('close', () => {
      this.ended = true;
      this.#wake();
    });
    socket.on('error', () => {});
  }

  /** A close frame went out (ours first, or our answer to the peer's). */
  #closeSent = false;

  push(chunk: Buffer): void {
    for (const f of this.#splitter.push(chunk)) {
      this.frames.push(f);
      // As a client does: a close is answered with the same code.
      if (f.opcode === OP.close && !this.#closeSent && this.answersClose) this.send(frame({ opcode: OP.close, payload: f.payload.subarray(0, 2), mask: true }));
      if (f.opcode === OP.text || f.opcode === OP.binary || f.opcode === OP.cont) {
        this.#fragments.push(f.payload);
        if (f.fin) {
          this.#messages.push(Buffer.concat(this.#fragments).toString('utf8'));
          this.#fragments = [];
        }
      }
    }
    this.#wake();
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }

  /** Resolves once `ready()` holds (checked at every frame and at the close). */
  async until<T>(ready: () => T | undefined, what: string): Promise<T> {
    for (;;) {
      const value = ready();
      if (value !== undefined) return value;
      if (this.ended) throw new Error(`the connection closed before ${what}`);
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  /** The next whole text message, as JSON. */
  async nextEvent(): Promise<Record<string, unknown>> {
    const text = await this.until(() => (this.#read < this.#messages.length ? this.#messages[this.#read++] : undefined), 'the next message');
    return JSON.parse(text) as Record<string, unknown>;
  }

  /** Messages until (and with) one whose type is in `types`. */
  async eventsUntil(...types: string[]): Promise<Record<string, unknown>[]> {
    const out: Record<string, unknown>[] = [];
    for (;;) {
      const e = await this.nextEvent();
      out.push(e);
      if (types.includes(String(e.type))) return out;
    }
  }

  /** A response.create (masked, one frame). */
  sendTurn(body: Record<string, unknown>): void {
    this.socket.write(clientText(JSON.stringify({ type: 'response.create', ...body })));
  }

  send(bytes: Buffer): void {
    if (bytes.length >= 2 && (bytes[0]! & 0x0f) === OP.close) this.#closeSent = true;
    if (!this.socket.destroyed) this.socket.write(bytes);
  }

  close(code = 1000): void {
    this.send(frame({ opcode: OP.close, payload: closeBody(code), mask: true }));
  }

  /** The close frame the peer sent, once it did: its code (1005 for none). */
  async closeFrame(): Promise<number> {
    const f = await this.until(() => this.frames.find((x) => x.opcode === OP.close) ?? (this.ended ? null : undefined), 'a close frame').catch(() => null);
    if (!f) throw new Error('the connection ended without a close frame');
    return f.payload.length >= 2 ? f.payload.readUInt16BE(0) : 1005;
  }

  /** Resolves when the socket is closed. */
  async gone(): Promise<void> {
    if (this.ended) return;
    await new Promise<void>((resolve) => this.socket.once('close', () => resolve()));
  }
}

/** TLS to the listener (mutual TLS with `cert` and `key`), verified against `ca` for `servername`. */
export interface SocketTls {
  readonly ca: string;
  readonly servername: string;
  readonly cert?: string;
  readonly key?: string;
}

/** Opens a connection to 127.0.0.1:`port` and sends the upgrade head for `path`; the answer, and the client when it switched. */
export async function openSocket(port: number, path = '/v1/responses', headers: Record<string, string> = {}, key = randomBytes(16).toString('base64'), tls?: SocketTls): Promise<UpgradeResult> {
  const socket = tls ? tlsConnect({ host: '127.0.0.1', port, ...tls }) : connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => socket.once(tls ? 'secureConnect' : 'connect', resolve).once('error', reject));
  socket.write(upgradeHead(path, `127.0.0.1:${port}`, key, headers));
  let buffered = Buffer.alloc(0);
  const head = await new Promise<{ head: string; rest: Buffer }>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      socket.off('end', onEnd);
      resolve({ head: buffered.subarray(0, end).toString('latin1'), rest: buffered.subarray(end + 4) });
    };
    const onEnd = () => reject(new Error(`the connection ended before an answer: ${buffered.toString('latin1').slice(0, 200)}`));
    socket.on('data', onData);
    socket.once('end', onEnd);
  });
  const [statusLine, ...lines] = head.head.split('\r\n');
  const status = Number(statusLine!.split(' ')[1]);
  const headersOut: Record<string, string> = {};
  for (const line of lines) {
    const at = line.indexOf(':');
    headersOut[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
  }
  if (status === 101) {
    if (headersOut['sec-websocket-accept'] !== acceptOf(key)) throw new Error(`wrong Sec-WebSocket-Accept: ${headersOut['sec-websocket-accept']}`);
    const client = new SocketClient(socket);
    if (head.rest.length > 0) client.push(head.rest);
    return { status, headers: headersOut, body: '', client };
  }
  // Another answer: its body, as far as Content-Length says (the connection then closes).
  const length = Number(headersOut['content-length'] ?? 0);
  let body = head.rest;
  while (body.length < length) {
    const more = await new Promise<Buffer | null>((resolve) => {
      socket.once('data', resolve);
      socket.once('end', () => resolve(null));
    });
    if (more === null) break;
    body = Buffer.concat([body, more]);
  }
  socket.destroy();
  return { status, headers: headersOut, body: body.toString('utf8'), client: undefined };
}
