// Answers an upstream may echo a credential in (error pages, redirects), relayed by both listeners
// only once read whole, decoded and redacted in every form.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Exchange } from './forward.ts';
import { decodeBody, type DecodedBody } from './redact.ts';
import type { Redactor } from './redactor.ts';
import { UnreadableText } from './spelled-secrets.ts';

/** Error bodies are read whole, to be checked; one larger than this (decoded) is refused rather than relayed unread. */
const MAX_ERROR_BODY_BYTES = 1024 * 1024;

/**
 * Relays an upstream answer that is read whole first (an error): decoded from any
 * Content-Encoding (bounded), every form of the call's secrets redacted (`redactor`), sent with its own length. A body
 * that is too large, corrupt, in an unknown encoding or too ambiguous to be checked for the
 * secrets (UnreadableText) is not relayed: the caller answers 502 with the reason. Used by both listeners for the answers an upstream may echo a credential in.
 */
export async function relayRedactedBody(res: ServerResponse, upstream: IncomingMessage, headers: readonly string[], redactor: Redactor, exchange: Exchange): Promise<{ readonly ok: true } | { readonly ok: false; readonly reason: string }> {
  const raw = await readWhole(upstream, MAX_ERROR_BODY_BYTES);
  if (res.destroyed) return { ok: false, reason: 'client_aborted' };
  const decoded: DecodedBody = raw === undefined ? { ok: false, reason: 'too_large' } : decodeBody(raw, upstream.headers['content-encoding'], MAX_ERROR_BODY_BYTES);
  if (!decoded.ok) return { ok: false, reason: `upstream_error_body_${decoded.reason}` };
  const body = redactedOrRefused(decoded.body, redactor);
  if (body === undefined) return { ok: false, reason: 'upstream_error_body_unreadable' };
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!.toLowerCase();
    if (name !== 'content-length' && name !== 'content-encoding' && name !== 'transfer-encoding') out.push(headers[i]!, headers[i + 1]!);
  }
  out.push('Content-Length', String(body.length));
  exchange.bytesOut = body.length;
  res.writeHead(upstream.statusCode ?? 502, out);
  res.end(body);
  return { ok: true };
}

/** `body` redacted, or undefined when it is too ambiguous to be checked. */
function redactedOrRefused(body: Buffer, redactor: Redactor): Buffer | undefined {
  try {
    return redactor.body(body);
  } catch (err) {
    if (err instanceof UnreadableText) return undefined;
    throw err;
  }
}

/** The whole body, or undefined past `max` bytes or on a failure (the stream is then destroyed). */
function readWhole(stream: IncomingMessage, max: number): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        stream.destroy();
        resolve(undefined);
      } else chunks.push(c);
    });
    stream.once('end', () => resolve(Buffer.concat(chunks)));
    stream.once('error', () => resolve(undefined));
    // Destroyed without an error (the client left and took the upstream request with it): after 'end', a no-op.
    stream.once('close', () => resolve(undefined));
  });
}
