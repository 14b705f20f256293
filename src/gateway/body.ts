// Step 2 of a model call: its JSON body, read whole (it is checked before anything is sent) and
// held in one RequestBody until the upstream's answer begins, when release() lets it go: a call
// is never sent again once answered, so its body (up to --max-request-body) is not kept for the
// length of a stream (SECURITY rule 52). Its bytes count against the process's cap on request
// bodies held at once (--max-held-request-bytes, SECURITY rule 100) through the call's BodyHold:
// a declared length before a byte is read, a chunked body as it arrives.
import type { IncomingMessage } from 'node:http';
import { watchBodyIdle } from '../http/body-idle.ts';
import { ERRORS, type ProxyError } from '../http/errors.ts';
import { mediaType } from '../http/headers.ts';
import type { BodyHold } from '../http/held-bodies.ts';
import type { Refusal } from '../http/lifecycle.ts';

/**
 * How long a call refused for the bodies held waits (Retry-After, seconds): bodies are let go as
 * their answers begin, within seconds of being read for a stream.
 */
const BODIES_FULL_RETRY_AFTER_S = 1;

/**
 * The refusal of a body the cap has no room for. The connection closes once the answer is out:
 * the rest of the body is never read, since reading it to keep the connection would spend on
 * bytes already refused the time and bandwidth the cap protects, and a chunked body has no end
 * it must reach.
 */
const BODIES_FULL: Refusal = { error: ERRORS.requestBodiesFull, headers: { 'retry-after': String(BODIES_FULL_RETRY_AFTER_S) }, closeAfter: true };

/** The request body, owned here: no step keeps `bytes` in a closure of its own. */
export class RequestBody {
  #bytes: Buffer | undefined;
  readonly #hold: BodyHold;
  readonly size: number;

  constructor(bytes: Buffer, hold: BodyHold) {
    this.#bytes = bytes;
    this.#hold = hold;
    this.size = bytes.length;
  }

  /** The bytes, while the call may still be sent; undefined once released. */
  get bytes(): Buffer | undefined {
    return this.#bytes;
  }

  /** The answer has begun: the body will not be sent again, and its bytes leave the process's count. */
  release(): void {
    this.#bytes = undefined;
    this.#hold.release();
  }
}

export type ReceivedBody = { readonly ok: true; readonly body: RequestBody } | { readonly ok: false; readonly refusal: Refusal } | { readonly ok: false; readonly gone: true };

/** The length the head declares (Node's parser has checked it); 0 for a chunked body. */
const declaredLength = (headers: IncomingMessage['headers']) => Number(headers['content-length'] ?? 0);

/** Pure: what the head alone says against reading the body: not JSON, or announced larger than the gateway accepts. */
export function bodyPreflight(headers: IncomingMessage['headers'], maxBytes: number): ProxyError | undefined {
  if (!isJsonContentType(headers['content-type'])) return ERRORS.unsupportedMediaType;
  if (declaredLength(headers) > maxBytes) return ERRORS.bodyTooLarge;
  return undefined;
}

type ReadResult = Buffer | 'too_large' | 'no_room' | 'aborted' | 'stalled';

/**
 * Reads the request body up to `max` bytes, each counted in `hold`: the buffer, 'too_large',
 * 'no_room' (the process's cap reached), 'aborted', or 'stalled' (no byte for `idleMs`: body-idle.ts).
 */
function readBody(req: IncomingMessage, max: number, idleMs: number, hold: BodyHold): Promise<ReadResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Every listener goes once the body is settled: they share `resolve`, and through it the
    // promise and its Buffer, which a listener left on the request would keep alive for as long
    // as the connection (a 32 MiB body for the length of a stream).
    const settle = (result: ReadResult) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      chunks.length = 0;
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        req.pause();
        settle('too_large');
        return;
      }
      // Within a declared length this holds already; a chunked body takes its bytes as they come.
      if (!hold.holdUpTo(size)) {
        req.pause();
        settle('no_room');
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => settle(Buffer.concat(chunks, size));
    const onClose = () => settle('aborted');
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('close', onClose);
    watchBodyIdle(req, idleMs, () => {
      req.pause();
      settle('stalled');
    });
  });
}

/**
 * The step: the body, or a refusal (a body too large, stalled or without room under the cap is
 * never read to its end: the connection closes after the answer), or the client gone. The bytes
 * go into `hold`, the call's, which the call gives back in its finish whatever happens here; a
 * declared length is held before a byte is read, so a body that cannot fit is refused unread.
 */
export async function receiveJsonBody(req: IncomingMessage, hold: BodyHold, maxBytes: number, idleMs: number): Promise<ReceivedBody> {
  const early = bodyPreflight(req.headers, maxBytes);
  if (early) return { ok: false, refusal: { error: early } };
  if (!hold.holdUpTo(declaredLength(req.headers))) return { ok: false, refusal: BODIES_FULL };
  const read = await readBody(req, maxBytes, idleMs, hold);
  if (read === 'aborted') return { ok: false, gone: true };
  if (read === 'too_large') return { ok: false, refusal: { error: ERRORS.bodyTooLarge, closeAfter: true } };
  if (read === 'no_room') return { ok: false, refusal: BODIES_FULL };
  if (read === 'stalled') return { ok: false, refusal: { error: ERRORS.bodyTimeout, closeAfter: true } };
  return { ok: true, body: new RequestBody(read, hold) };
}


/** Media type, not string comparison: `application/json; charset=utf-8` and `+json` types pass. */
export function isJsonContentType(value: string | undefined): boolean {
  const type = mediaType(value);
  return type !== undefined && (type === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(type));
}
