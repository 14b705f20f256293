// AWS event stream (application/vnd.amazon.eventstream), what Bedrock's
// invoke-with-response-stream answers with: binary frames, each a prelude (total length,
// headers length, the prelude's CRC32), headers, a payload and the message's CRC32. A `chunk`
// event's payload is `{"bytes": "<base64>"}` holding one Anthropic Messages event, which goes to
// the Messages stream reader as an SSE event's data would. The stream itself is relayed
// untouched; this reads a copy, bounded: a frame over the cap, or a bad CRC, ends the reading and
// marks the stream corrupt (recorded as such), never a buffer that grows.
import { crc32 } from 'node:zlib';
import type { EventReader } from './sse.ts';
import { redactBody } from '../http/redact.ts';

/** The largest frame read (Bedrock's chunks are small; a message_start with a big prompt echo fits). */
const MAX_FRAME_BYTES = 1024 * 1024;
const PRELUDE_BYTES = 12;

/** Pure: the headers of one frame whose value type is a string (type 7), by name. */
export function frameHeaders(bytes: Buffer): Map<string, string> | undefined {
  const out = new Map<string, string>();
  let i = 0;
  while (i < bytes.length) {
    const nameLength = bytes[i]!;
    const name = bytes.subarray(i + 1, i + 1 + nameLength).toString('utf8');
    i += 1 + nameLength;
    const type = bytes[i];
    i += 1;
    // Value lengths by type: 0/1 bool (none), 2 byte, 3 short, 4 int, 5 long, 6 bytes, 7 string, 8 timestamp, 9 uuid.
    const fixed: Record<number, number> = { 0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16 };
    if (type === 6 || type === 7) {
      if (i + 2 > bytes.length) return undefined;
      const length = bytes.readUInt16BE(i);
      if (type === 7) out.set(name, bytes.subarray(i + 2, i + 2 + length).toString('utf8'));
      i += 2 + length;
    } else if (type !== undefined && fixed[type] !== undefined) {
      i += fixed[type];
    } else {
      return undefined;
    }
    if (i > bytes.length) return undefined;
  }
  return out;
}

export class EventStreamFramer {
  readonly #reader: EventReader;
  #pending: Buffer = Buffer.alloc(0);
  /** A frame failed its CRC, its headers or the size cap: nothing more is read. */
  corrupt = false;
  /** The upstream sent an exception frame (`:message-type` exception). */
  exception: string | undefined;

  constructor(reader: EventReader) {
    this.#reader = reader;
  }

  push(chunk: Buffer): void {
    if (this.corrupt) return;
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    while (this.#pending.length >= PRELUDE_BYTES) {
      const total = this.#pending.readUInt32BE(0);
      const headersLength = this.#pending.readUInt32BE(4);
      if (total > MAX_FRAME_BYTES || total < PRELUDE_BYTES + headersLength + 4 || crc32(this.#pending.subarray(0, 8)) !== this.#pending.readUInt32BE(8)) return this.#fail();
      if (this.#pending.length < total) return;
      const frame = this.#pending.subarray(0, total);
      this.#pending = this.#pending.subarray(total);
      if (crc32(frame.subarray(0, total - 4)) !== frame.readUInt32BE(total - 4)) return this.#fail();
      const headers = frameHeaders(frame.subarray(PRELUDE_BYTES, PRELUDE_BYTES + headersLength));
      if (headers === undefined) return this.#fail();
      this.#dispatch(headers, frame.subarray(PRELUDE_BYTES + headersLength, total - 4));
    }
  }

  #fail(): void {
    this.corrupt = true;
    this.#pending = Buffer.alloc(0);
  }

  #dispatch(headers: Map<string, string>, payload: Buffer): void {
    if (headers.get(':message-type') === 'exception') {
      this.exception = headers.get(':exception-type') ?? 'exception';
      return;
    }
    if (headers.get(':event-type') !== 'chunk') return;
    try {
      const bytes = (JSON.parse(payload.toString('utf8')) as { bytes?: unknown }).bytes;
      if (typeof bytes === 'string') this.#reader.event(Buffer.from(bytes, 'base64'));
    } catch {
      this.#fail();
    }
  }
}

/**
 * The relay's guard over an event stream: whole frames pass as they complete (a stream whose
 * upstream writes whole frames, as Bedrock does, is not delayed), a partial frame is held until
 * its end arrives, and a frame whose bytes or decoded payload carry a secret in any form is not
 * relayed: redacting inside a frame would break its length and CRC, so the stream is cut there
 * (the client sees a broken stream, never the secret).
 */
export class EventStreamGuard {
  readonly #secrets: readonly string[];
  #held: Buffer = Buffer.alloc(0);

  constructor(secrets: readonly string[]) {
    this.#secrets = secrets;
  }

  push(chunk: Buffer): Buffer {
    this.#held = this.#held.length === 0 ? chunk : Buffer.concat([this.#held, chunk]);
    let cut = 0;
    while (this.#held.length - cut >= PRELUDE_BYTES) {
      const total = this.#held.readUInt32BE(cut);
      if (total < PRELUDE_BYTES + 4 || total > MAX_FRAME_BYTES) throw new Error('a malformed event-stream frame');
      if (this.#held.length - cut < total) break;
      this.#check(this.#held.subarray(cut, cut + total));
      cut += total;
    }
    const out = this.#held.subarray(0, cut);
    this.#held = this.#held.subarray(cut);
    return out;
  }

  end(): Buffer {
    const rest = this.#held;
    this.#held = Buffer.alloc(0);
    if (rest.length > 0) this.#check(rest);
    return rest;
  }

  #check(frame: Buffer): void {
    if (redactBody(frame, this.#secrets) !== frame) throw new Error('an event-stream frame carries a credential');
    const headersLength = frame.length >= 8 ? frame.readUInt32BE(4) : 0;
    const payload = frame.subarray(PRELUDE_BYTES + headersLength, Math.max(PRELUDE_BYTES + headersLength, frame.length - 4));
    try {
      const bytes = (JSON.parse(payload.toString('utf8')) as { bytes?: unknown }).bytes;
      if (typeof bytes === 'string') {
        const decoded = Buffer.from(bytes, 'base64');
        if (redactBody(decoded, this.#secrets) !== decoded) throw new Error('an event-stream frame carries a credential');
      }
    } catch (err) {
      if ((err as Error).message.includes('credential')) throw err;
      // not JSON: checked as bytes above
    }
  }
}
