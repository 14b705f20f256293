// A stand-in for an OpenTelemetry collector's OTLP/HTTP receiver (no collector can be installed
// from the registries this project uses: Debian has none, npm has only SDKs), written for the
// tests: every request is checked against the OTLP protobuf-JSON shape and the attribute names and
// types the proxy may use (validateExport, test/support/otlp-facts.ts), and what it finds wrong is
// kept in `problems`. It can be told to answer 429 or 503 (with Retry-After), to answer slowly, or
// to hang up, and it stops and starts on the same port to stand for a collector that is down.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { validateExport, type ReceivedSpan } from './otlp-facts.ts';

/** How the receiver answers: 200 (optionally a partial success), a status such as 429 or 503, after a delay, or by hanging up. */
export type ReceiverMode = { readonly kind: 'ok'; readonly rejected?: number } | { readonly kind: 'status'; readonly status: number; readonly retryAfter?: string } | { readonly kind: 'hang-up' };

export interface OtlpReceiver {
  readonly url: string;
  readonly spans: ReceivedSpan[];
  readonly problems: string[];
  /** Every request's headers and raw body, as they came. */
  readonly requests: { readonly headers: IncomingMessage['headers']; readonly body: string }[];
  mode: ReceiverMode;
  /** Milliseconds each answer waits before it is written. */
  delayMs: number;
  /** Resolves once `n` spans have been taken (no deadline: the test file's own bound applies). */
  waitForSpans(n: number): Promise<ReceivedSpan[]>;
  /** Stops listening (a collector that is down), or listens again on the same port. */
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

/** Starts the receiver on loopback: plain HTTP, or HTTPS with `tls` (a test PKI's key and certificate). */
export async function startOtlpReceiver(tls?: { readonly keyPem: string; readonly certPem: string }): Promise<OtlpReceiver> {
  const waiters: { n: number; resolve: () => void }[] = [];
  const open = new Set<import('node:net').Socket>();
  const receiver: OtlpReceiver = {
    url: '',
    spans: [],
    problems: [],
    requests: [],
    mode: { kind: 'ok' },
    delayMs: 0,
    waitForSpans: (n) => (receiver.spans.length >= n ? Promise.resolve(receiver.spans) : new Promise((resolve) => waiters.push({ n, resolve: () => resolve(receiver.spans) }))),
    down: () => new Promise((resolve) => {
      for (const s of open) s.destroy();
      server.close(() => resolve());
    }),
    up: () => new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve())),
    close: () => receiver.down(),
  };
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      receiver.requests.push({ headers: req.headers, body });
      const answer = () => {
        const mode = receiver.mode;
        if (mode.kind === 'hang-up') return void req.socket.destroy();
        if (req.method !== 'POST' || req.url !== '/v1/traces') receiver.problems.push(`${req.method} ${req.url}: not POST /v1/traces`);
        if (req.headers['content-type'] !== 'application/json') receiver.problems.push(`content-type ${req.headers['content-type']}: not application/json`);
        // Every request is checked, the ones refused too; only the ones taken add their spans.
        const { problems, spans } = validateExport(body);
        receiver.problems.push(...problems);
        if (mode.kind === 'status') {
          res.writeHead(mode.status, { 'content-type': 'application/json', ...(mode.retryAfter === undefined ? {} : { 'retry-after': mode.retryAfter }) });
          return void res.end(JSON.stringify({ message: 'throttled by the test' }));
        }
        receiver.spans.push(...spans);
        for (const w of waiters.filter((w) => receiver.spans.length >= w.n)) w.resolve();
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(mode.rejected ? { partialSuccess: { rejectedSpans: String(mode.rejected), errorMessage: 'rejected by the test' } } : {}));
      };
      if (receiver.delayMs > 0) setTimeout(answer, receiver.delayMs);
      else answer();
    });
  };
  const server: Server = tls === undefined ? createServer(handle) : createHttpsServer({ key: tls.keyPem, cert: tls.certPem }, handle);
  server.on('connection', (s) => {
    open.add(s);
    s.on('close', () => open.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  (receiver as { url: string }).url = `${tls === undefined ? 'http' : 'https'}://127.0.0.1:${port}`;
  return receiver;
}
