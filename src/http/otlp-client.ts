// The connection to the OpenTelemetry collector: one POST of a JSON body per export, on a
// keep-alive pool of its own, through the egress proxy (HTTPS_PROXY, unless NO_PROXY names the
// collector) for an https:// endpoint. Bounded: a timeout on the whole exchange, and the answer
// read to at most 64 KiB (only its partial-success count is of use). Its failures are answers
// (status 0 and a reason), never exceptions: the exporter decides what they mean. The headers
// (a collector's key) arrive opaque and are read as the request is written.
import { request as httpRequest, type Agent } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createUpstreamAgent } from './forward.ts';
import { withCredential } from './headers.ts';
import type { Secret } from './secret-value.ts';
import { tunnelRouteForUrl, type Egress } from './tunnel.ts';

export interface CollectorAnswer {
  /** 0: no answer (the reason in `error`). */
  readonly status: number;
  readonly retryAfter?: string;
  readonly body?: string;
  readonly error?: string;
}

const MAX_ANSWER_BYTES = 64 * 1024;

/** The pool for the collector: an https:// one through the egress tunnel unless NO_PROXY names it; an http:// one direct (HTTP_PROXY is not read). */
export function collectorAgent(url: URL, egress: Egress | undefined): Agent {
  return createUpstreamAgent({ ca: undefined, tlsInsecureSkipVerify: false, plainHttp: url.protocol === 'http:', tunnel: tunnelRouteForUrl(egress, url) });
}

/** POSTs `body` to the collector; resolves with its answer, or status 0 when none came within `timeoutMs`. */
export function postToCollector(url: URL, agent: Agent, headers: Readonly<Record<string, Secret>>, body: string, timeoutMs: number): Promise<CollectorAnswer> {
  return new Promise((resolve) => {
    const outgoing = withCredential({ 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }, headers);
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    let settled = false;
    const done = (answer: CollectorAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(answer);
    };
    const req = send(url, { method: 'POST', agent, headers: outgoing }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_ANSWER_BYTES) chunks.push(chunk);
      });
      res.on('end', () => {
        const retryAfter = res.headers['retry-after'];
        done({ status: res.statusCode ?? 0, ...(retryAfter === undefined ? {} : { retryAfter }), body: size <= MAX_ANSWER_BYTES ? Buffer.concat(chunks).toString('utf8') : '' });
      });
      res.on('error', () => done({ status: 0, error: 'the answer broke off' }));
    });
    const timer = setTimeout(() => {
      req.destroy();
      done({ status: 0, error: `no answer within ${timeoutMs} ms` });
    }, timeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => done({ status: 0, error: err.code ?? err.message }));
    req.end(body);
  });
}
