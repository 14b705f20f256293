// AWS event stream (application/vnd.amazon.eventstream), what Bedrock's
// invoke-with-response-stream answers with: binary frames, each a prelude (total length,
// headers length, the prelude's CRC32), headers, a payload and the message's CRC32. A `chunk`
// event's payload is `{"bytes": "<base64>"}` holding one Anthropic Messages event, which goes to
// the Messages stream reader as an SSE event's data would. The stream itself is relayed
// untouched; this reads a copy, bounded: a frame over the cap, or a bad CRC, ends the reading and
// marks the stream corrupt (recorded as such), never a buffer that grows.
import { crc32 } from 'node:zlib';
import type { EventReader } from './sse.ts';
import { HeldBytes } from '../http/held-bytes.ts';
import type { Redactor } from '../http/redactor.ts';

/** The largest frame read (Bedrock's chunks are small; a message_start with a big prompt echo fits). */
const MAX_FRAME_BYTES = 1024 * 1024;
const PRELUDE_BYTES = 12;

/** A header's value length by type, where fixed: 0/1 bool (none), 2 byte, 3 short, 4 int, 5 long, 8 timestamp, 9 uuid (6 bytes and 7 string say theirs). */
const FIXED_VALUE_BYTES: Readonly<Record<number, number>> = { 0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16 };

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
    if (type === 6 || type === 7) {
      if (i + 2 > bytes.length) return undefined;
      const length = bytes.readUInt16BE(i);
      if (type === 7) out.set(name, bytes.subarray(i + 2, i + 2 + length).toString('utf8'));
      i += 2 + length;
    } else if (type !== undefined && FIXED_VALUE_BYTES[type] !== undefined) {
      i += FIXED_VALUE_BYTES[type];
    } else {
      return undefined;
    }
    if (i > bytes.length) return undefined;
  }
  return out;
}

/**
 * The bytes of a frame still arriving (HeldBytes), looked at once the frame's length (or its
 * prelude) is all there.
 */
class Arriving {
  readonly #held = new HeldBytes();
  /** How many bytes must be there before they are worth looking at (the prelude, then the frame's length). */
  #need = PRELUDE_BYTES;

  /** Adds a chunk; all the bytes held, once `need` of them are there (else undefined). */
  add(chunk: Buffer): Buffer | undefined {
    this.#held.add(chunk);
    return this.#held.length < this.#need ? undefined : this.#held.take();
  }

  /** Keeps what is left of those bytes (a partial frame), with the length it needs to be whole. */
  keep(rest: Buffer): void {
    this.#need = rest.length >= PRELUDE_BYTES ? Math.max(PRELUDE_BYTES, rest.readUInt32BE(0)) : PRELUDE_BYTES;
    this.#held.keep(rest, Math.min(this.#need, MAX_FRAME_BYTES));
  }

  clear(): Buffer {
    this.#need = PRELUDE_BYTES;
    return this.#held.take();
  }
}

export class EventStreamFramer {
  readonly #reader: EventReader;
  readonly #arriving = new Arriving();
  /** A frame failed its CRC, its headers or the size cap: nothing more is read. */
  corrupt = false;
  /** The upstream sent an exception frame (`:message-type` exception). */
  exception: string | undefined;

  constructor(reader: EventReader) {
    this.#reader = reader;
  }

  push(chunk: Buffer): void {
    if (this.corrupt) return;
    let pending = this.#arriving.add(chunk);
    if (pending === undefined) return;
    while (pending.length >= PRELUDE_BYTES) {
      const total = pending.readUInt32BE(0);
      const headersLength = pending.readUInt32BE(4);
      if (total > MAX_FRAME_BYTES || total < PRELUDE_BYTES + headersLength + 4 || crc32(pending.subarray(0, 8)) !== pending.readUInt32BE(8)) return this.#fail();
      if (pending.length < total) break;
      const frame = pending.subarray(0, total);
      pending = pending.subarray(total);
      if (crc32(frame.subarray(0, total - 4)) !== frame.readUInt32BE(total - 4)) return this.#fail();
      const headers = frameHeaders(frame.subarray(PRELUDE_BYTES, PRELUDE_BYTES + headersLength));
      if (headers === undefined) return this.#fail();
      this.#dispatch(headers, frame.subarray(PRELUDE_BYTES + headersLength, total - 4));
    }
    this.#arriving.keep(pending);
  }

  #fail(): void {
    this.corrupt = true;
    this.#arriving.clear();
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

/** A string field this long or longer, all of it in the base64 or base64url alphabet, is decoded and checked too. */
const ENCODED_FIELD = /^[A-Za-z0-9+/_-]{16,}={0,2}$/;

/**
 * Pure: the strings anywhere in a frame's payload when that is JSON (not only a chunk's `bytes`:
 * a reader that ignores case reads `Bytes` too). Walked with a stack: a payload nested a million
 * deep cannot overflow the call stack and so skip the check.
 */
function payloadStrings(frame: Buffer): string[] {
  const headersLength = frame.length >= 8 ? frame.readUInt32BE(4) : 0;
  let payload: unknown;
  try {
    payload = JSON.parse(frame.subarray(PRELUDE_BYTES + headersLength, Math.max(PRELUDE_BYTES + headersLength, frame.length - 4)).toString('utf8'));
  } catch {
    return []; // not JSON: its bytes are checked as they are
  }
  const strings: string[] = [];
  const stack = [payload];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === 'string') strings.push(value);
    else if (typeof value === 'object' && value !== null) for (const inner of Object.values(value)) stack.push(inner);
  }
  return strings;
}

/**
 * The relay's guard over an event stream: whole frames pass as they complete (a stream whose
 * upstream writes whole frames, as Bedrock does, is not delayed), a partial frame is held until
 * its end arrives, and a frame that carries a secret is not relayed: redacting inside a frame
 * would break its length and CRC, so the stream is cut there (the client sees a broken stream,
 * never the secret). A frame carries one when its bytes hold any form `redactBody` replaces
 * (base64 once or twice included, in a header value, the payload or an exception's message), or
 * when a string in its JSON payload that is all base64 or base64url (a chunk's `bytes`, any other
 * field) decodes to text that does: the event inside a chunk is checked in every form too.
 */
const EMPTY = Buffer.alloc(0);

export class EventStreamGuard {
  readonly #redactor: Redactor;
  readonly #arriving = new Arriving();

  constructor(redactor: Redactor) {
    this.#redactor = redactor;
  }

  push(chunk: Buffer): Buffer {
    const held = this.#arriving.add(chunk);
    if (held === undefined) return EMPTY;
    let cut = 0;
    while (held.length - cut >= PRELUDE_BYTES) {
      const total = held.readUInt32BE(cut);
      if (total < PRELUDE_BYTES + 4 || total > MAX_FRAME_BYTES) throw new Error('a malformed event-stream frame');
      if (held.length - cut < total) break;
      this.#check(held.subarray(cut, cut + total));
      cut += total;
    }
    this.#arriving.keep(held.subarray(cut));
    return held.subarray(0, cut);
  }

  end(): Buffer {
    const rest = this.#arriving.clear();
    if (rest.length > 0) this.#check(rest);
    return rest;
  }

  #check(frame: Buffer): void {
    const carried = this.#redactor.carries(frame) || payloadStrings(frame).some((s) => ENCODED_FIELD.test(s) && this.#redactor.carries(Buffer.from(s, 'base64')));
    if (carried) throw new Error('an event-stream frame carries a credential');
  }
}
