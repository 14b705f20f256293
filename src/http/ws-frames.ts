// WebSocket framing (RFC 6455, section 5), written here rather than taken from a dependency: a
// reader that is a small state machine over the bytes as they arrive (the head of a frame, its
// extended length and mask, then its payload), resuming wherever a chunk ends, and the writers of
// frames. Pure: no sockets, no timers. ws-endpoint.ts puts it on a socket.
//
// The reader refuses, with the close code RFC 6455 gives for each (section 7.4.1), everything the
// protocol forbids or this proxy does not accept:
//   - a frame masked the wrong way: every client frame is masked, no server frame is (5.1, 5.3);
//   - reserved bits set: no extension is negotiated, so none may be used (5.2); permessage-deflate
//     (RFC 7692) is never negotiated, on either leg, so a compressed frame is a protocol error;
//   - an opcode RFC 6455 does not define (5.2);
//   - a control frame longer than 125 bytes, or fragmented (5.5); a close frame of one byte, with a
//     code no endpoint may send, or a reason that is not UTF-8 (5.5.1, 7.4);
//   - a continuation with no message begun, or a new message while one is still in fragments
//     (5.4); control frames between the fragments are fine;
//   - a message larger than the limit (1009), checked against each frame's announced length before
//     any of its payload is kept;
//   - a text message that is not UTF-8 (1007), checked as its pieces arrive.
// A data message is handed on in pieces, as its payload arrives (unmasked), never buffered here;
// a control frame (at most 125 bytes) is handed on whole.
import { isUtf8 } from 'node:buffer';
import { createHash, randomFillSync } from 'node:crypto';

export const OP_CONTINUATION = 0x0;
export const OP_TEXT = 0x1;
export const OP_BINARY = 0x2;
export const OP_CLOSE = 0x8;
export const OP_PING = 0x9;
export const OP_PONG = 0xa;

/** The close codes this proxy sends (RFC 6455 section 7.4.1; 1014 from IANA's registry). */
export const CLOSE = {
  normal: 1000,
  goingAway: 1001,
  protocolError: 1002,
  unsupportedData: 1003,
  invalidPayload: 1007,
  policyViolation: 1008,
  tooBig: 1009,
  internalError: 1011,
  tryAgainLater: 1013,
  badGateway: 1014,
} as const;

/** Why a peer's frames were refused: the close code sent, and a fixed reason (the close frame's text, the metric's label). */
export interface Violation {
  readonly code: number;
  readonly reason: ViolationReason;
}

export type ViolationReason =
  | 'unmasked_frame'
  | 'masked_frame'
  | 'reserved_bits'
  | 'unknown_opcode'
  | 'control_too_long'
  | 'fragmented_control'
  | 'continuation_without_start'
  | 'message_interleaved'
  | 'too_large'
  | 'invalid_utf8'
  | 'bad_close_frame';

const violation = (code: number, reason: ViolationReason): Violation => Object.freeze({ code, reason });
const PROTOCOL = (reason: ViolationReason) => violation(CLOSE.protocolError, reason);

/**
 * Pure: whether a peer may send `code` in a close frame: 1000-1003 and 1007-1014 (1004 is
 * reserved, 1005, 1006 and 1015 stand for "no code" and "no close frame" and never go on the
 * wire), or 3000-4999 (libraries' and applications' own).
 */
export function closeCodeAllowed(code: number): boolean {
  return (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) || (code >= 3000 && code <= 4999);
}

/** A close frame as read: its code (undefined: it had none) and reason, or why it is refused. */
export type PeerClose = { readonly ok: true; readonly code: number | undefined; readonly reason: string } | { readonly ok: false; readonly violation: Violation };

/** Pure: a close frame's payload read (no code at all is allowed), or the violation it is. */
export function readClose(payload: Buffer): PeerClose {
  if (payload.length === 0) return { ok: true, code: undefined, reason: '' };
  if (payload.length === 1) return { ok: false, violation: PROTOCOL('bad_close_frame') };
  const code = payload.readUInt16BE(0);
  if (!closeCodeAllowed(code)) return { ok: false, violation: PROTOCOL('bad_close_frame') };
  const reason = payload.subarray(2);
  if (!isUtf8(reason)) return { ok: false, violation: violation(CLOSE.invalidPayload, 'invalid_utf8') };
  return { ok: true, code, reason: reason.toString('utf8') };
}

/** Pure: a close frame's payload: the code, and a reason cut to what a control frame holds (125 bytes in all). */
export function closePayload(code: number, reason: string): Buffer {
  let text = Buffer.from(reason, 'utf8');
  if (text.length > 123) text = Buffer.from(reason.slice(0, 40), 'utf8');
  const out = Buffer.alloc(2 + text.length);
  out.writeUInt16BE(code, 0);
  text.copy(out, 2);
  return out;
}

/** Pure: where the last character of `bytes` (from `from` on) begins when the piece's end cuts it short; else the end. */
export function unfinishedTail(bytes: Buffer, from: number): number {
  for (let i = bytes.length - 1; i >= Math.max(from, bytes.length - 3); i--) {
    const b = bytes[i]!;
    if (b < 0x80) return bytes.length;
    if (b < 0xc0) continue; // a continuation byte
    const length = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
    return bytes.length - i < length ? i : bytes.length;
  }
  return bytes.length;
}

/**
 * UTF-8 checked piece by piece (a character may be split between pieces): the states of the
 * well-formed byte sequences of Unicode's table 3-7, so overlong forms, surrogates and code points
 * past U+10FFFF are refused at their first wrong byte.
 */
export class Utf8Check {
  /** Continuation bytes still expected, and the range the next one must be in. */
  #need = 0;
  #low = 0x80;
  #high = 0xbf;

  /** False at the first byte that cannot be UTF-8. Only a character cut between pieces is checked byte by byte here (a piece's loop cost 9 ms a MiB). */
  push(bytes: Buffer): boolean {
    let at = 0;
    while (this.#need > 0 && at < bytes.length) if (!this.#byte(bytes[at++]!)) return false;
    const tail = unfinishedTail(bytes, at);
    if (at === 0 && tail === bytes.length) return isUtf8(bytes); // whole characters: the usual piece
    if (tail > at && !isUtf8(bytes.subarray(at, tail))) return false;
    for (let i = tail; i < bytes.length; i++) if (!this.#byte(bytes[i]!)) return false;
    return true;
  }

  #byte(b: number): boolean {
    if (this.#need > 0) {
      if (b < this.#low || b > this.#high) return false;
      this.#need--;
      this.#low = 0x80;
      this.#high = 0xbf;
      return true;
    }
    return b < 0x80 || this.#lead(b);
  }

  /** The message is over: true when no character was left unfinished. */
  end(): boolean {
    const complete = this.#need === 0;
    this.#need = 0;
    return complete;
  }

  #lead(b: number): boolean {
    if (b >= 0xc2 && b <= 0xdf) this.#need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      this.#need = 2;
      if (b === 0xe0) this.#low = 0xa0; // overlong
      if (b === 0xed) this.#high = 0x9f; // surrogates
    } else if (b >= 0xf0 && b <= 0xf4) {
      this.#need = 3;
      if (b === 0xf0) this.#low = 0x90; // overlong
      if (b === 0xf4) this.#high = 0x8f; // past U+10FFFF
    } else return false;
    return true;
  }
}

/** What the reader hands on. */
export interface FrameSink {
  /** A piece of a data message's payload, unmasked, in order: `first` begins a message, `last` ends it. */
  data(piece: Buffer, text: boolean, first: boolean, last: boolean): void;
  /** A control frame, whole (close, ping, pong), its close payload already checked. */
  control(opcode: number, payload: Buffer): void;
}

const enum Stage {
  Head,
  Payload,
  Refused,
}

const EMPTY_PAYLOAD = Buffer.alloc(0);

/**
 * The frames of one direction of one connection, read as the bytes arrive. `masked`: what every
 * frame must be (true for what a client sends, false for what a server sends). `maxMessageBytes`
 * bounds a data message, all its fragments together.
 */
export class FrameReader {
  #stage = Stage.Head;
  /** The frame head as it arrives: 2 bytes, then up to 8 of length and 4 of mask. */
  readonly #head = Buffer.alloc(14);
  #headBytes = 0;
  #opcode = 0;
  #fin = false;
  #mask: Buffer | undefined;
  /** Payload bytes of this frame still to come, and how many have come (the mask's offset). */
  #left = 0;
  #done = 0;
  /** The data message in fragments: its kind (0: none), its bytes so far. */
  #message = 0;
  #messageBytes = 0;
  #firstPiece = false;
  #control: Buffer[] = [];
  readonly #utf8 = new Utf8Check();

  constructor(
    private readonly masked: boolean,
    private readonly maxMessageBytes: number,
    private readonly sink: FrameSink,
  ) {}

  /** Reads the next bytes; the first violation stops the reader, and is returned again for every later chunk. */
  push(chunk: Buffer): Violation | undefined {
    let at = 0;
    while (at < chunk.length || (this.#stage === Stage.Payload && this.#left === 0)) {
      if (this.#stage === Stage.Refused) return this.#refused;
      if (this.#stage === Stage.Head) {
        const taken = this.#takeHead(chunk, at);
        at += taken.used;
        if (taken.violation) return this.#refuse(taken.violation);
        if (this.#stage === Stage.Head) return undefined; // the head is not complete yet
        continue;
      }
      const n = Math.min(this.#left, chunk.length - at);
      const piece = chunk.subarray(at, at + n);
      at += n;
      const refused = this.#payload(piece);
      if (refused) return this.#refuse(refused);
    }
    return this.#stage === Stage.Refused ? this.#refused : undefined;
  }

  #refused: Violation | undefined;
  #refuse(v: Violation): Violation {
    this.#stage = Stage.Refused;
    this.#refused = v;
    this.#control = [];
    return v;
  }

  /** Copies head bytes from `chunk`; once the head is whole, checks it and starts the payload. */
  #takeHead(chunk: Buffer, at: number): { used: number; violation?: Violation } {
    let used = 0;
    for (;;) {
      const need = this.#headLength();
      if (this.#headBytes >= need) break;
      if (at + used >= chunk.length) return { used };
      const n = Math.min(need - this.#headBytes, chunk.length - at - used);
      chunk.copy(this.#head, this.#headBytes, at + used, at + used + n);
      this.#headBytes += n;
      used += n;
    }
    return { used, ...this.#startFrame() };
  }

  /** The head's length in all, as far as its first two bytes tell (2 until they are here). */
  #headLength(): number {
    if (this.#headBytes < 2) return 2;
    const len7 = this.#head[1]! & 0x7f;
    return 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (this.#head[1]! & 0x80 ? 4 : 0);
  }

  #startFrame(): { violation?: Violation } {
    const b0 = this.#head[0]!;
    const b1 = this.#head[1]!;
    this.#headBytes = 0;
    const fin = (b0 & 0x80) !== 0;
    const opcode = b0 & 0x0f;
    const masked = (b1 & 0x80) !== 0;
    const len7 = b1 & 0x7f;
    if (b0 & 0x70) return { violation: PROTOCOL('reserved_bits') };
    if (masked !== this.masked) return { violation: PROTOCOL(this.masked ? 'unmasked_frame' : 'masked_frame') };
    const control = opcode >= 0x8;
    if (control ? opcode > OP_PONG : opcode > OP_BINARY) return { violation: PROTOCOL('unknown_opcode') };
    let length: number;
    if (len7 === 126) length = this.#head.readUInt16BE(2);
    else if (len7 === 127) {
      const high = this.#head.readUInt32BE(2);
      // A length past 2^53 cannot be read exactly; past the limit it is refused anyway.
      length = high >= 0x200000 ? Number.MAX_SAFE_INTEGER : high * 0x100000000 + this.#head.readUInt32BE(6);
    } else length = len7;
    if (control) {
      if (!fin) return { violation: PROTOCOL('fragmented_control') };
      if (length > 125) return { violation: PROTOCOL('control_too_long') };
    } else if (opcode === OP_CONTINUATION) {
      if (this.#message === 0) return { violation: PROTOCOL('continuation_without_start') };
    } else {
      if (this.#message !== 0) return { violation: PROTOCOL('message_interleaved') };
      this.#message = opcode;
      this.#messageBytes = 0;
      this.#firstPiece = true;
    }
    if (!control) {
      // Checked before a byte of the payload is kept: the announced length is enough.
      if (length > this.maxMessageBytes - this.#messageBytes) return { violation: violation(CLOSE.tooBig, 'too_large') };
      this.#messageBytes += length;
    }
    this.#opcode = opcode;
    this.#fin = fin;
    const maskAt = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0);
    this.#mask = masked ? Buffer.from(this.#head.subarray(maskAt, maskAt + 4)) : undefined;
    this.#left = length;
    this.#done = 0;
    this.#stage = Stage.Payload;
    return {};
  }

  /** A piece of the current frame's payload (possibly empty, for an empty frame). */
  #payload(piece: Buffer): Violation | undefined {
    if (this.#mask) unmask(piece, this.#mask, this.#done);
    this.#done += piece.length;
    this.#left -= piece.length;
    const frameEnd = this.#left === 0;
    if (frameEnd) this.#stage = Stage.Head;
    if (this.#opcode >= 0x8) {
      if (piece.length > 0) this.#control.push(Buffer.from(piece));
      if (!frameEnd) return undefined;
      const payload = this.#control.length === 1 ? this.#control[0]! : Buffer.concat(this.#control);
      this.#control = [];
      if (this.#opcode === OP_CLOSE) {
        const close = readClose(payload);
        if (!close.ok) return close.violation;
      }
      this.sink.control(this.#opcode, payload);
      return undefined;
    }
    const text = this.#message === OP_TEXT;
    const last = frameEnd && this.#fin;
    if (text && !this.#utf8.push(piece)) return violation(CLOSE.invalidPayload, 'invalid_utf8');
    if (text && last && !this.#utf8.end()) return violation(CLOSE.invalidPayload, 'invalid_utf8');
    // An empty piece says nothing, unless it begins or ends a message.
    if (piece.length > 0 || last || this.#firstPiece) {
      const first = this.#firstPiece;
      this.#firstPiece = false;
      if (last) this.#message = 0;
      this.sink.data(piece.length === 0 ? EMPTY_PAYLOAD : piece, text, first, last);
    }
    return undefined;
  }
}

/** XORs `bytes` in place with the mask, the first byte being the payload's `offset`-th. */
function unmask(bytes: Buffer, mask: Buffer, offset: number): void {
  for (let i = 0; i < bytes.length; i++) bytes[i] ^= mask[(offset + i) & 3]!;
}

/**
 * Pure: a frame's bytes: its head, then its payload, masked with a fresh random key when `masked`
 * (what a client sends; the payload is copied, never changed in place).
 */
export function encodeFrame(opcode: number, payload: Buffer, fin: boolean, masked: boolean): Buffer[] {
  const n = payload.length;
  const lengthBytes = n < 126 ? 0 : n < 0x10000 ? 2 : 8;
  const head = Buffer.alloc(2 + lengthBytes + (masked ? 4 : 0));
  head[0] = (fin ? 0x80 : 0) | opcode;
  head[1] = (masked ? 0x80 : 0) | (lengthBytes === 0 ? n : lengthBytes === 2 ? 126 : 127);
  if (lengthBytes === 2) head.writeUInt16BE(n, 2);
  else if (lengthBytes === 8) {
    head.writeUInt32BE(Math.floor(n / 0x100000000), 2);
    head.writeUInt32BE(n >>> 0, 6);
  }
  if (!masked || n === 0) {
    if (masked) randomFillSync(head, 2 + lengthBytes, 4);
    return n === 0 ? [head] : [head, payload];
  }
  const mask = head.subarray(2 + lengthBytes);
  randomFillSync(mask);
  const out = Buffer.from(payload);
  unmask(out, mask, 0);
  return [head, out];
}

const HANDSHAKE_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

/** Pure: the Sec-WebSocket-Accept answer to a Sec-WebSocket-Key (RFC 6455 section 4.2.2). */
export function acceptFor(key: string): string {
  return createHash('sha1').update(key + HANDSHAKE_GUID).digest('base64');
}

/** Pure: whether a Sec-WebSocket-Key is what RFC 6455 asks: 16 bytes, base64. */
export function keyWellFormed(key: string | undefined): boolean {
  return key !== undefined && /^[A-Za-z0-9+/]{21}[AQgw]==$/.test(key);
}

/** A fresh Sec-WebSocket-Key for a connection the proxy opens. */
export function newKey(): string {
  return randomFillSync(Buffer.alloc(16)).toString('base64');
}
