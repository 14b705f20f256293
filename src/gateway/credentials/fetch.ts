// The credential sources' own requests (a token endpoint, the metadata server, STS): bounded in
// time (a total deadline, 10 s by default) and size (64 KiB), TLS verified for https. Their
// answers are parsed by the sources.
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tunnelAgentFor } from '../../http/forward.ts';
import type { Egress } from '../../http/tunnel.ts';

/**
 * The longest one fetch may take, from the request to the last byte of its answer. A total
 * deadline, not an idle timeout: an endpoint that drips its answer a byte at a time never goes
 * idle, and would otherwise hold the refresh (and every call waiting on it) for as long as it likes.
 */
export const FETCH_DEADLINE_MS = 10_000;
/** The largest answer a credential endpoint gives (unless `maxBytes` says more). */
const MAX_BYTES = 64 * 1024;

export interface FetchedBody {
  readonly status: number;
  readonly body: Buffer;
}

export interface FetchOptions {
  readonly headers?: Record<string, string>;
  /** Makes it a form POST. */
  readonly form?: Record<string, string>;
  /** Makes it a POST of this JSON text (a GitHub App's token request). */
  readonly json?: string;
  /** The largest answer accepted (MAX_BYTES unless the endpoint lists more: GitHub repeats each repository a token is narrowed to). */
  readonly maxBytes?: number;
  /** The total deadline (FETCH_DEADLINE_MS unless a test needs a shorter one). */
  readonly deadlineMs?: number;
  /** The egress proxy an https: endpoint is reached through (unless NO_PROXY names it), as start-up read it. */
  readonly egress?: Egress;
}

/** One request; http: only for the metadata server's link-local address. */
export function fetchBody(url: string, opts: FetchOptions): Promise<FetchedBody> {
  const deadlineMs = opts.deadlineMs ?? FETCH_DEADLINE_MS;
  const maxBytes = opts.maxBytes ?? MAX_BYTES;
  const parsedUrl = new URL(url);
  const host = parsedUrl.host;
  const agent = tunnelAgentFor(parsedUrl, opts.egress);
  return new Promise((resolve, reject) => {
    const body = opts.json ?? (opts.form === undefined ? undefined : new URLSearchParams(opts.form).toString());
    const headers: Record<string, string | number> = { ...opts.headers };
    if (body !== undefined) {
      headers['content-type'] = opts.json === undefined ? 'application/x-www-form-urlencoded' : 'application/json';
      headers['content-length'] = Buffer.byteLength(body);
    }
    // Settled once: by the answer's end, the first error, or the deadline (which then destroys
    // the request, so that the connection and what it buffered go with it).
    let settled = false;
    const settle = (outcome: { ok: true; value: FetchedBody } | { ok: false; error: Error }) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      agent?.destroy();
      if (outcome.ok) resolve(outcome.value);
      else reject(outcome.error);
    };
    const send = url.startsWith('https://') ? httpsRequest : httpRequest;
    const req = send(url, { method: body === undefined ? 'GET' : 'POST', headers, ...(agent === undefined ? {} : { agent }) }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > maxBytes) res.destroy(new Error(`the answer of ${host} was larger than ${Math.round(maxBytes / 1024)} KiB`));
        else chunks.push(c);
      });
      res.on('error', (error) => settle({ ok: false, error }));
      res.on('end', () => settle({ ok: true, value: { status: res.statusCode ?? 0, body: Buffer.concat(chunks) } }));
    });
    const deadline = setTimeout(() => {
      settle({ ok: false, error: new Error(`${host} did not answer within ${deadlineMs / 1000} s`) });
      req.destroy();
    }, deadlineMs);
    req.on('error', (error) => settle({ ok: false, error }));
    req.end(body);
  });
}
