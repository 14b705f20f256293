// The messages of a Responses WebSocket (responses-socket.ts), each way. A client's is kept whole
// (it is checked as a body is), its bytes counted in the process's bytes held
// (--max-held-request-bytes) as they arrive. An upstream's is relayed as its pieces arrive, through
// a stream redactor of the provider's secrets that reads the message as one text however its
// frames were cut (so a key split across frames is still one key, held back only by the tail a
// secret could still end in), and copied to the turn's protocol reader for the usage and the end.
import type { BodyHold, HeldBodies } from '../http/held-bodies.ts';
import type { StreamRedactor } from '../http/redact.ts';
import type { Redactor } from '../http/redactor.ts';
import type { WsEndpoint } from '../http/ws-endpoint.ts';
import type { StreamReader } from './protocols/protocol.ts';
import { DEFAULT_MAX_EVENT_BYTES as EVENT_COPY_BYTES, type LargeEventConsumer } from './sse.ts';

/** A copy of one upstream message for the protocol's reader: whole up to the size the SSE reader keeps an event whole, in pieces to its large-event consumer past that. */
class EventCopy {
  #parts: Buffer[] = [];
  #bytes = 0;
  /** Past the size: the consumer, or null when the reader has none. */
  #large: LargeEventConsumer | null | undefined;

  constructor(private readonly reader: StreamReader) {}

  push(piece: Buffer): void {
    if (this.#large !== undefined) return this.#large?.push(piece);
    if (this.#bytes + piece.length <= EVENT_COPY_BYTES) {
      this.#parts.push(piece);
      this.#bytes += piece.length;
      return;
    }
    this.#large = this.reader.largeEvent() ?? null;
    for (const part of [...this.#parts, piece]) this.#large?.push(part);
    this.#parts = [];
  }

  /** The message is whole: read; its bytes when it was kept whole. */
  end(): Buffer | undefined {
    if (this.#large !== undefined) {
      this.#large?.end();
      return undefined;
    }
    const whole = this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts);
    this.reader.event(whole);
    return whole;
  }
}

export class UpstreamMessage {
  readonly #redactor: StreamRedactor;
  readonly #copy: EventCopy | undefined;
  #sent = false;

  constructor(
    redactor: Redactor,
    private readonly client: WsEndpoint,
    reader: StreamReader | undefined,
  ) {
    this.#redactor = redactor.stream(false);
    this.#copy = reader && new EventCopy(reader);
  }

  /**
   * A piece: what of it may go is relayed now, redacted (at the last piece, all that was held
   * back), and a copy read. At the last piece, the whole message when it was kept whole (for its
   * facts). Throws (UnreadableText) for a message too ambiguous to be checked: its rest is never sent.
   */
  push(piece: Buffer, last: boolean): Buffer | undefined {
    let out = this.#redactor.push(piece);
    if (last) {
      const tail = this.#redactor.end();
      if (tail.length > 0) out = out.length === 0 ? tail : Buffer.concat([out, tail]);
    }
    if (out.length > 0 || last) {
      this.client.sendData(out, true, !this.#sent, last);
      this.#sent = true;
    }
    this.#copy?.push(piece);
    return last ? this.#copy?.end() : undefined;
  }
}

/** A client message being received: its pieces, and their share of the process's bytes held. */
export class ClientMessage {
  #pieces: Buffer[] = [];
  #bytes = 0;
  readonly #hold: BodyHold;

  constructor(held: HeldBodies) {
    this.#hold = held.open();
  }

  /** Keeps a piece; false when the process's cap leaves no room for it (nothing more is kept). */
  add(piece: Buffer): boolean {
    this.#bytes += piece.length;
    if (!this.#hold.holdUpTo(this.#bytes)) {
      this.#pieces = [];
      return false;
    }
    if (piece.length > 0) this.#pieces.push(piece);
    return true;
  }

  /** The whole message, and its hold, which its turn gives back. */
  take(): { readonly bytes: Buffer; readonly hold: BodyHold } {
    const bytes = this.#pieces.length === 1 ? this.#pieces[0]! : Buffer.concat(this.#pieces, this.#bytes);
    this.#pieces = [];
    return { bytes, hold: this.#hold };
  }

  /** A message that will not be whole (the connection ended): its bytes given back. */
  release(): void {
    this.#pieces = [];
    this.#hold.release();
  }
}
