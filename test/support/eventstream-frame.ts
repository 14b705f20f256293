// AWS event-stream frames as Bedrock writes them, built apart from the gateway's reader
// (src/gateway/eventstream.ts): for its tests, the cloud fakes and the e2e run.
import { crc32 } from 'node:zlib';

const PRELUDE_BYTES = 12;

/** The headers of a Bedrock stream's `chunk` event. */
export const CHUNK_HEADERS: Readonly<Record<string, string>> = { ':event-type': 'chunk', ':content-type': 'application/json', ':message-type': 'event' };

/** One AWS event-stream frame, as Bedrock writes them: string headers (type 7) and a payload, with both CRCs. */
export function encodeFrame(headers: Readonly<Record<string, string>>, payload: Buffer): Buffer {
  const headerParts = Object.entries(headers).map(([name, value]) => {
    const n = Buffer.from(name, 'utf8');
    const v = Buffer.from(value, 'utf8');
    const head = Buffer.alloc(1 + n.length + 1 + 2);
    head.writeUInt8(n.length, 0);
    n.copy(head, 1);
    head.writeUInt8(7, 1 + n.length);
    head.writeUInt16BE(v.length, 2 + n.length);
    return Buffer.concat([head, v]);
  });
  const headerBytes = Buffer.concat(headerParts);
  const total = PRELUDE_BYTES + headerBytes.length + payload.length + 4;
  const prelude = Buffer.alloc(PRELUDE_BYTES);
  prelude.writeUInt32BE(total, 0);
  prelude.writeUInt32BE(headerBytes.length, 4);
  prelude.writeUInt32BE(crc32(prelude.subarray(0, 8)), 8);
  const body = Buffer.concat([prelude, headerBytes, payload]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body), 0);
  return Buffer.concat([body, crc]);
}
