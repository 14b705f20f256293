// The credential sources' own requests (a token endpoint, the metadata server, STS): bounded in
// time (10 s) and size (64 KiB), TLS verified for https. Their answers are parsed by the sources.
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

const TIMEOUT_MS = 10_000;
const MAX_BYTES = 64 * 1024;

export interface FetchedBody {
  readonly status: number;
  readonly body: Buffer;
}

/** One request; `form` makes it a form POST. http: only for the metadata server's link-local address. */
export function fetchBody(url: string, opts: { readonly headers?: Record<string, string>; readonly form?: Record<string, string> }): Promise<FetchedBody> {
  return new Promise((resolve, reject) => {
    const body = opts.form === undefined ? undefined : new URLSearchParams(opts.form).toString();
    const headers: Record<string, string | number> = { ...opts.headers };
    if (body !== undefined) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      headers['content-length'] = Buffer.byteLength(body);
    }
    const send = url.startsWith('https://') ? httpsRequest : httpRequest;
    const req = send(url, { method: body === undefined ? 'GET' : 'POST', headers, timeout: TIMEOUT_MS }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BYTES) res.destroy(new Error(`the answer of ${new URL(url).host} was larger than 64 KiB`));
        else chunks.push(c);
      });
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
    });
    req.on('timeout', () => req.destroy(new Error(`${new URL(url).host} did not answer within 10 s`)));
    req.on('error', reject);
    req.end(body);
  });
}
