// WebSocket bytes for the tests, written apart from src/http/ws-frames.ts on purpose (a fake that
// shared the proxy's framing could share its mistakes): frames built byte by byte, any of their
// fields set as a hostile peer would set them, and a reader of whole frames that only splits bytes
// into frames and judges nothing. Also the two handshake heads.
import { createHash, randomBytes } from 'node:crypto';

export const OP = { cont: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 } as const;

export interface FrameSpec {
  opcode: number;
  payload?: Buffer | string;
  fin?: boolean;
  /** A masking key (4 bytes), or true for a random one; false or absent: unmasked. */
  mask?: Buffer | boolean;
  /** The reserved bits (0-7), for a test that sets them. */
  rsv?: number;
  /** The length to announce instead of the payload's (a lie), written in the shortest form that holds it unless `lengthForm` says. */
  announce?: number;
  lengthForm?: 7 | 16 | 64;
}

/** The bytes of one frame, as specified. */
export function frame(spec: FrameSpec): Buffer {
  const payload = typeof spec.payload === 'string' ? Buffer.from(spec.payload, 'utf8') : (spec.payload ?? Buffer.alloc(0));
  const length = spec.announce ?? payload.length;
  const form = spec.lengthForm ?? (length < 126 ? 7 : length < 65536 ? 16 : 64);
  const bytes: number[] = [((spec.fin ?? true) ? 0x80 : 0) | ((spec.rsv ?? 0) << 4) | spec.opcode];
  const maskKey = spec.mask === true ? randomBytes(4) : spec.mask === false || spec.mask === undefined ? undefined : spec.mask;
  const maskBit = maskKey ? 0x80 : 0;
  if (form === 7) bytes.push(maskBit | length);
  else if (form === 16) bytes.push(maskBit | 126, (length >> 8) & 0xff, length & 0xff);
  else {
    bytes.push(maskBit | 127);
    const big = BigInt(length);
    for (let shift = 56n; shift >= 0n; shift -= 8n) bytes.push(Number((big >> shift) & 0xffn));
  }
  if (maskKey) bytes.push(...maskKey);
  const body = Buffer.from(payload);
  if (maskKey) for (let i = 0; i < body.length; i++) body[i] = body[i]! ^ maskKey[i % 4]!;
  return Buffer.concat([Buffer.from(bytes), body]);
}

/** A client's (masked) text frame. */
export const clientText = (text: string, fin = true): Buffer => frame({ opcode: OP.text, payload: text, mask: true, fin });
/** A server's (unmasked) text frame. */
export const serverText = (text: string): Buffer => frame({ opcode: OP.text, payload: text });

/** A close frame's payload: code and reason. */
export function closeBody(code: number, reason = ''): Buffer {
  const b = Buffer.alloc(2 + Buffer.byteLength(reason));
  b.writeUInt16BE(code, 0);
  b.write(reason, 2);
  return b;
}

export interface ReadFrame {
  fin: boolean;
  rsv: number;
  opcode: number;
  masked: boolean;
  payload: Buffer;
}

/** Splits bytes into whole frames (unmasking them); what is left over is kept for the next call. */
export class FrameSplitter {
  #pending = Buffer.alloc(0);

  push(chunk: Buffer): ReadFrame[] {
    this.#pending = Buffer.concat([this.#pending, chunk]);
    const out: ReadFrame[] = [];
    for (;;) {
      const b = this.#pending;
      if (b.length < 2) return out;
      let at = 2;
      let len = b[1]! & 0x7f;
      if (len === 126) {
        if (b.length < 4) return out;
        len = b.readUInt16BE(2);
        at = 4;
      } else if (len === 127) {
        if (b.length < 10) return out;
        len = Number(b.readBigUInt64BE(2));
        at = 10;
      }
      const masked = (b[1]! & 0x80) !== 0;
      const key = masked ? b.subarray(at, at + 4) : undefined;
      if (masked) at += 4;
      if (b.length < at + len) return out;
      const payload = Buffer.from(b.subarray(at, at + len));
      if (key) for (let i = 0; i < payload.length; i++) payload[i] = payload[i]! ^ key[i % 4]!;
      out.push({ fin: (b[0]! & 0x80) !== 0, rsv: (b[0]! >> 4) & 7, opcode: b[0]! & 0x0f, masked, payload });
      this.#pending = b.subarray(at + len);
    }
  }
}

export const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

export function acceptOf(key: string): string {
  return createHash('sha1').update(`${key}${WS_GUID}`).digest('base64');
}

/** A client's upgrade request head for `path`, with its key and any extra headers (one named like a default replaces it). */
export function upgradeHead(path: string, host: string, key: string, extra: Record<string, string> = {}): string {
  const defaults: Record<string, string> = { Host: host, Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': key };
  const named = new Set(Object.keys(extra).map((k) => k.toLowerCase()));
  const lines = [`GET ${path} HTTP/1.1`, ...Object.entries(defaults).filter(([k]) => !named.has(k.toLowerCase())).map(([k, v]) => `${k}: ${v}`)];
  for (const [k, v] of Object.entries(extra)) lines.push(`${k}: ${v}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}
