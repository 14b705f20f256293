// One end of a WebSocket connection, on its socket: the frames read (ws-frames.ts) and answered
// where RFC 6455 says the endpoint answers (a ping with its pong, a close with a close), frames
// written, the close handshake with its deadline, and how full the socket's write buffer is, so
// that whoever relays into it can stop reading the other side (backpressure).
//
// Who does what at the close (RFC 6455 sections 5.5.1 and 7.1): the side that closes first sends
// its close frame and stops sending; the other answers with its own (the same code) and stops too.
// The server then ends the TCP connection; a client waits for the server to. A peer that never
// answers is cut when `closeMs` has passed. Frames read after a close frame are not handed on.
import type { Socket } from 'node:net';
import { encodeFrame, FrameReader, OP_BINARY, OP_CLOSE, OP_CONTINUATION, OP_PING, OP_PONG, OP_TEXT, readClose, closePayload, type Violation } from './ws-frames.ts';
import { STREAM_HIGH_WATER_MARK } from './sockets.ts';

/** What an endpoint tells its owner. */
export interface EndpointEvents {
  /** A piece of a data message (FrameSink.data), until a close frame was sent or received. */
  data(piece: Buffer, text: boolean, first: boolean, last: boolean): void;
  /** A ping, already answered with its pong. */
  ping(payload: Buffer): void;
  /** The peer's close frame (code undefined: it gave none); the answer is sent. */
  closed(code: number | undefined, reason: string): void;
  /** The peer broke the protocol: a close with the violation's code is sent, the connection ends. */
  refused(v: Violation): void;
  /** The socket is closed. */
  gone(): void;
  /** The socket's write buffer is back under the mark. */
  drained(): void;
}

export interface EndpointOptions {
  /** 'server': the peer is a client, whose frames are masked; 'client': the peer is a server. */
  readonly role: 'server' | 'client';
  readonly maxMessageBytes: number;
  /** How long the peer has to answer our close frame (or to end the connection, for a client). */
  readonly closeMs: number;
}

export class WsEndpoint {
  readonly #reader: FrameReader;
  #closeSent = false;
  #closeReceived = false;
  #closeTimer: NodeJS.Timeout | undefined;
  #failed = false;
  /** The code of the close frame we sent, and the one the peer sent (for the connection's record). */
  sentCode: number | undefined;
  receivedCode: number | undefined;

  constructor(
    readonly socket: Socket,
    private readonly options: EndpointOptions,
    private readonly events: EndpointEvents,
  ) {
    const masked = options.role === 'server';
    this.#reader = new FrameReader(masked, options.maxMessageBytes, {
      data: (piece, text, first, last) => {
        if (!this.#closeSent && !this.#closeReceived) events.data(piece, text, first, last);
      },
      control: (opcode, payload) => this.#control(opcode, payload),
    });
  }

  /** Starts reading, with the bytes that came after the handshake's head. */
  start(head: Buffer): void {
    const socket = this.socket;
    socket.setNoDelay(true);
    socket.setTimeout(0);
    socket.on('data', (chunk: Buffer) => this.#read(chunk));
    socket.on('error', () => {}); // 'close' follows; the owner learns of it there
    // The peer ended its side without a close handshake: end ours as well.
    socket.on('end', () => socket.end());
    socket.on('drain', () => this.events.drained());
    socket.once('close', () => {
      clearTimeout(this.#closeTimer);
      this.events.gone();
    });
    if (head.length > 0) this.#read(head);
  }

  #read(chunk: Buffer): void {
    // After the peer's close frame, or frames refused, what comes is read (so that its end is
    // seen) and dropped.
    if (this.#closeReceived || this.#failed || this.socket.destroyed) return;
    const refused = this.#reader.push(chunk);
    if (refused === undefined) return;
    this.#failed = true;
    this.close(refused.code, refused.reason, true);
    this.events.refused(refused);
  }

  #control(opcode: number, payload: Buffer): void {
    if (opcode === OP_PING) {
      if (!this.#closeSent) this.#write(encodeFrame(OP_PONG, payload, true, this.#masks));
      this.events.ping(payload);
    } else if (opcode === OP_CLOSE) {
      this.#closeReceived = true;
      const close = readClose(payload);
      const code = close.ok ? close.code : undefined;
      this.receivedCode = code;
      // The answer echoes the peer's code (none for none); a server then ends the connection.
      if (!this.#closeSent) this.#sendClose(code === undefined ? Buffer.alloc(0) : closePayload(code, ''), code);
      if (this.options.role === 'server') this.socket.end();
      this.events.closed(code, close.ok ? close.reason : '');
    }
    // A pong answers our ping (or none): nothing to do.
  }

  get #masks(): boolean {
    return this.options.role === 'client';
  }

  /** Whether a close frame went out or came in: no data is sent or handed on after it. */
  get closing(): boolean {
    return this.#closeSent || this.#closeReceived;
  }

  /** The socket's write buffer holds more than a relay should add to. */
  get congested(): boolean {
    return this.socket.writableLength > STREAM_HIGH_WATER_MARK;
  }

  /** A piece of a message: the first piece opens it (text or binary), the last ends it. */
  sendData(piece: Buffer, text: boolean, first: boolean, last: boolean): void {
    if (this.#closeSent) return;
    this.#write(encodeFrame(first ? (text ? OP_TEXT : OP_BINARY) : OP_CONTINUATION, piece, last, this.#masks));
  }

  sendPing(payload: Buffer): void {
    if (!this.#closeSent) this.#write(encodeFrame(OP_PING, payload, true, this.#masks));
  }

  /**
   * Starts the close handshake (once): our close frame, then the peer's answer or the deadline.
   * `failing`: the peer broke the protocol; the connection ends without waiting for its answer.
   */
  close(code: number, reason: string, failing = false): void {
    if (this.#closeSent) return;
    this.#sendClose(closePayload(code, reason), code);
    if (failing) this.socket.end();
  }

  #sendClose(payload: Buffer, code: number | undefined): void {
    this.#closeSent = true;
    this.sentCode = code;
    this.#write(encodeFrame(OP_CLOSE, payload, true, this.#masks));
    // The peer has this long to answer (or, for us as a client, to end the connection).
    this.#closeTimer = setTimeout(() => this.socket.destroy(), this.options.closeMs);
    this.#closeTimer.unref?.();
  }

  /** Ends the connection now, without a close handshake (the other leg is gone, a forced shutdown). */
  destroy(): void {
    this.socket.destroy();
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    if (!this.#closeReceived) this.socket.resume();
  }

  #write(parts: Buffer[]): void {
    const socket = this.socket;
    if (socket.destroyed || !socket.writable) return;
    if (parts.length === 1) {
      socket.write(parts[0]!);
      return;
    }
    socket.cork();
    for (const part of parts) socket.write(part);
    socket.uncork();
  }
}
