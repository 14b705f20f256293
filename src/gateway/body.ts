// Step 2 of a model call: its JSON body, read whole (it is checked before anything is sent) and
// held in one RequestBody until the upstream's answer begins, when release() lets it go: a call
// is never sent again once answered, so its body (up to --max-request-body) is not kept for the
// length of a stream (SECURITY rule 52).
import type { IncomingMessage } from 'node:http';
import { watchBodyIdle } from '../http/body-idle.ts';
import { ERRORS, type ProxyError } from '../http/errors.ts';
import type { Refusal } from '../http/lifecycle.ts';
import { isJsonContentType } from './rules.ts';

/** The request body, owned here: no step keeps `bytes` in a closure of its own. */
export class RequestBody {
  #bytes: Buffer | undefined;
  readonly size: number;

  constructor(bytes: Buffer) {
    this.#bytes = bytes;
    this.size = bytes.length;
  }

  /** The bytes, while the call may still be sent; undefined once released. */
  get bytes(): Buffer | undefined {
    return this.#bytes;
  }

  /** The answer has begun: the body will not be sent again. */
  release(): void {
    this.#bytes = undefined;
  }
}

export type ReceivedBody = { readonly ok: true; readonly body: RequestBody } | { readonly ok: false; readonly refusal: Refusal } | { readonly ok: false; readonly gone: true };

/** Pure: what the head alone says against reading the body: not JSON, or announced larger than the gateway accepts. */
export function bodyPreflight(headers: IncomingMessage['headers'], maxBytes: number): ProxyError | undefined {
  if (!isJsonContentType(headers['content-type'])) return ERRORS.unsupportedMediaType;
  if (Number(headers['content-length'] ?? 0) > maxBytes) return ERRORS.bodyTooLarge;
  return undefined;
}

/**
 * Reads the request body up to `max` bytes: the buffer, 'too_large', 'aborted', or 'stalled' (no
 * byte for `idleMs`: body-idle.ts).
 */
function readBody(req: IncomingMessage, max: number, idleMs: number): Promise<Buffer | 'too_large' | 'aborted' | 'stalled'> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Every listener goes once the body is settled: they share `resolve`, and through it the
    // promise and its Buffer, which a listener left on the request would keep alive for as long
    // as the connection (a 32 MiB body for the length of a stream).
    const settle = (result: Buffer | 'too_large' | 'aborted' | 'stalled') => {
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

/** The step: the body, or a refusal (a body too large or stalled is never read to its end: the connection closes after the answer), or the client gone. */
export async function receiveJsonBody(req: IncomingMessage, maxBytes: number, idleMs: number): Promise<ReceivedBody> {
  const early = bodyPreflight(req.headers, maxBytes);
  if (early) return { ok: false, refusal: { error: early } };
  const read = await readBody(req, maxBytes, idleMs);
  if (read === 'aborted') return { ok: false, gone: true };
  if (read === 'too_large') return { ok: false, refusal: { error: ERRORS.bodyTooLarge, closeAfter: true } };
  if (read === 'stalled') return { ok: false, refusal: { error: ERRORS.bodyTimeout, closeAfter: true } };
  return { ok: true, body: new RequestBody(read) };
}
