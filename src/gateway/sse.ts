/**
 * Server-sent events framing for the gateway's usage inspection, shared by every wire protocol.
 *
 * SseFramer reads a copy of an upstream `text/event-stream` body: the relay forwards the real
 * bytes itself, so nothing here can delay or alter them. It finds events as the WHATWG rules
 * for interpreting an event stream say
 * (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation)
 * and hands each event's data to the protocol's EventReader, which decides what it means.
 *
 * It runs on every streamed byte, so it stays cheap and bounded:
 * - only `data` lines are kept; comments and the event, id and retry fields carry nothing a
 *   reader needs, and are skipped without being copied;
 * - line ends are found with byte searches (memchr), so data bytes are copied once, into the
 *   event being built;
 * - an event's data is kept up to maxEventBytes. Past that it is streamed to the reader's
 *   largeEvent consumer piece by piece (the Responses API repeats the whole output, megabytes,
 *   in its final event), or dropped if the reader has no use for it: memory stays
 *   O(maxEventBytes) whatever upstream sends.
 */
import { Char } from '../json/chars.ts';

/** Receives the data of an event that outgrew the cap, in pieces, then its end. */
export interface LargeEventConsumer {
  push(bytes: Buffer): void;
  end(): void;
}

/** What a wire protocol does with events. */
export interface EventReader {
  /** A complete event's data (data lines joined by "\n"), at most maxEventBytes long. */
  event(data: Buffer): void;
  /** An event whose data is over the cap: a consumer for it, or undefined to skip it. */
  largeEvent(): LargeEventConsumer | undefined;
}

const DATA_FIELD = Buffer.from('data');
const NEWLINE = Buffer.from('\n');
const UTF8_BOM = [0xef, 0xbb, 0xbf];

export const DEFAULT_MAX_EVENT_BYTES = 1024 * 1024;

const enum Line {
  /** Nothing of the current line seen yet. */
  Start,
  /** Matching the field name against "data"; `fieldMatched` bytes matched so far. */
  Field,
  /** Just after "data:": one space may follow and is not part of the value. */
  AfterColon,
  /** In the value of a data line. */
  Value,
  /** In any other line (comment, another field): skipped to its end. */
  Skip,
}

export class SseFramer {
  private readonly reader: EventReader;

  private line = Line.Start;
  private fieldMatched = 0;
  /** Bytes of a byte order mark seen at the very start of the stream. */
  private bomMatched = 0;
  private atStreamStart = true;
  /** The previous chunk ended with CR, so an LF starting this chunk ends no new line. */
  private previousChunkEndedWithCr = false;

  /** The data of the event being built (data lines joined by "\n"). */
  private readonly data: BoundedBytes;
  private eventHasData = false;
  /** The event outgrew the cap: its bytes go to `large` (or nowhere when undefined). */
  private overCap = false;
  private large: LargeEventConsumer | undefined;

  constructor(reader: EventReader, maxEventBytes = DEFAULT_MAX_EVENT_BYTES) {
    if (!Number.isSafeInteger(maxEventBytes) || maxEventBytes < 1) throw new RangeError('maxEventBytes must be a positive integer');
    this.reader = reader;
    this.data = new BoundedBytes(maxEventBytes);
  }

  /** Feeds the next bytes of the stream; chunk boundaries may fall anywhere. */
  push(chunk: Buffer): void {
    const n = chunk.length;
    if (n === 0) return; // keeps a pending CR for the chunk that brings its LF
    let i = 0;
    if (this.previousChunkEndedWithCr && chunk[0] === Char.LF) i = 1;
    this.previousChunkEndedWithCr = false;
    // The next LF and CR at or after i, each searched again only once i has passed it (and
    // never after a miss), so each search looks at every byte of the chunk at most once.
    let nextLf = -2;
    let nextCr = -2;
    while (i < n) {
      if (this.line === Line.Value || this.line === Line.Skip) {
        if (nextLf !== -1 && nextLf < i) nextLf = chunk.indexOf(Char.LF, i);
        if (nextCr !== -1 && nextCr < i) nextCr = chunk.indexOf(Char.CR, i);
        const end = nextLf === -1 ? nextCr : nextCr === -1 ? nextLf : Math.min(nextLf, nextCr);
        if (this.line === Line.Value) this.appendData(chunk.subarray(i, end === -1 ? n : end));
        if (end === -1) return;
        i = this.endLine(chunk, end);
        continue;
      }
      const c = chunk[i]!;
      if (this.atStreamStart && this.bomMatched < UTF8_BOM.length && c === UTF8_BOM[this.bomMatched]) {
        // Decoding the stream as UTF-8 strips a leading byte order mark.
        this.bomMatched++;
        i++;
        continue;
      }
      if (this.atStreamStart && this.bomMatched > 0 && this.bomMatched < UTF8_BOM.length) {
        // Part of a BOM and then something else: not UTF-8 text any reader could use.
        this.atStreamStart = false;
        this.line = Line.Skip;
        continue;
      }
      this.atStreamStart = false;
      if (c === Char.LF || c === Char.CR) {
        if (this.line === Line.Start) this.dispatch();
        else if (this.line === Line.Field && this.fieldMatched === DATA_FIELD.length) this.startDataLine(); // "data" alone: empty value
        i = this.endLine(chunk, i);
        continue;
      }
      if (this.line === Line.Start) {
        this.line = Line.Field;
        this.fieldMatched = 0;
      }
      if (this.line === Line.Field) {
        if (this.fieldMatched === DATA_FIELD.length) {
          if (c === Char.COLON) {
            this.startDataLine();
            this.line = Line.AfterColon;
          } else this.line = Line.Skip; // "datax": another field
        } else if (c === DATA_FIELD[this.fieldMatched]) {
          this.fieldMatched++;
        } else {
          this.line = Line.Skip; // a comment (":") or another field
        }
        i++;
        continue;
      }
      // AfterColon
      this.line = Line.Value;
      if (c === Char.SPACE) i++;
    }
  }

  /** Past a line end at `at` (CR, LF or CRLF): returns the index after it. */
  private endLine(chunk: Buffer, at: number): number {
    this.line = Line.Start;
    if (chunk[at] === Char.CR) {
      if (at + 1 === chunk.length) this.previousChunkEndedWithCr = true;
      else if (chunk[at + 1] === Char.LF) return at + 2;
    }
    return at + 1;
  }

  private startDataLine(): void {
    if (this.eventHasData) this.appendData(NEWLINE);
    this.eventHasData = true;
  }

  private appendData(bytes: Buffer): void {
    if (bytes.length === 0) return;
    if (this.overCap) {
      this.large?.push(bytes);
      return;
    }
    if (this.data.append(bytes)) return;
    this.overCap = true;
    this.large = this.reader.largeEvent();
    if (this.large) {
      this.large.push(this.data.bytes());
      this.large.push(bytes);
    }
    this.data.clear();
  }

  private dispatch(): void {
    if (this.eventHasData) {
      if (!this.overCap) this.reader.event(this.data.bytes());
      else this.large?.end();
    }
    this.data.clear();
    this.eventHasData = false;
    this.overCap = false;
    this.large = undefined;
  }
}

/** A byte buffer that grows by doubling and never holds more than its cap. */
class BoundedBytes {
  length = 0;
  private storage = Buffer.alloc(0);
  private readonly cap: number;

  constructor(cap: number) {
    this.cap = cap;
  }

  /** Appends all of bytes, or nothing and returns false if that would exceed the cap. */
  append(bytes: Buffer): boolean {
    const needed = this.length + bytes.length;
    if (needed > this.cap) return false;
    if (needed > this.storage.length) {
      const grown = Buffer.alloc(Math.min(this.cap, Math.max(needed, this.storage.length * 2, 256)));
      this.storage.copy(grown, 0, 0, this.length);
      this.storage = grown;
    }
    bytes.copy(this.storage, this.length);
    this.length = needed;
    return true;
  }

  /** A view of the content, valid until the next append or clear. */
  bytes(): Buffer {
    return this.storage.subarray(0, this.length);
  }

  clear(): void {
    this.length = 0;
  }
}
