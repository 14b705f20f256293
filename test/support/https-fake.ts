// The server part shared by the fakes of model APIs (responses-upstream.ts, anthropic-upstream.ts):
// HTTPS on loopback with the test PKI, every request recorded with its whole body, answered by
// the next scripted handler or else the fake's default.
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TestPki } from './tls.ts';

export interface ModelRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export type ModelHandler = (req: IncomingMessage, res: ServerResponse, recorded: ModelRequest) => void;

export interface HttpsFake {
  readonly port: number;
  /** The server itself (a test may serve upgrades on it: responses-socket-upstream.ts). */
  readonly server: Server;
  readonly requests: ModelRequest[];
  /** Handlers for the next requests, used once each, in order; then the default. */
  script(...handlers: ModelHandler[]): void;
  /** Whether a request came over a connection that had carried an earlier request. */
  isReusedConnection(req: IncomingMessage): boolean;
  /** Closes the connections that carry no request now, so the next request needs a new one. */
  closeIdleConnections(): void;
  close(): Promise<void>;
}

export async function startHttpsFake(pki: Pick<TestPki, 'keyPem' | 'certPem'>, fallback: ModelHandler): Promise<HttpsFake> {
  const queue: ModelHandler[] = [];
  const requests: ModelRequest[] = [];
  // Requests seen per connection: more than one means the client reused a keep-alive socket.
  const requestsOnSocket = new WeakMap<object, number>();
  const server: Server = createServer({ key: pki.keyPem, cert: pki.certPem, keepAlive: true }, (req, res) => {
    requestsOnSocket.set(req.socket, (requestsOnSocket.get(req.socket) ?? 0) + 1);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const recorded: ModelRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
      requests.push(recorded);
      (queue.shift() ?? fallback)(req, res, recorded);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    server,
    requests,
    script: (...handlers) => queue.push(...handlers),
    isReusedConnection: (req) => (requestsOnSocket.get(req.socket) ?? 0) > 1,
    closeIdleConnections: () => server.closeIdleConnections(),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Answers with a stream: the chunks `gapMs` apart (0: one after the other), each written once the
 * one before is flushed, so that a cut (`cut`: the connection dropped without a clean end) comes
 * after the bytes went out, not before.
 */
export function writeStream(res: ServerResponse, headers: OutgoingHttpHeaders, chunks: readonly string[], opts: { gapMs?: number; cut?: boolean } = {}): void {
  res.writeHead(200, headers);
  const queue = [...chunks];
  const next = (): void => {
    if (res.destroyed) return;
    const chunk = queue.shift();
    if (chunk === undefined) {
      if (opts.cut) res.socket?.destroy();
      else res.end();
      return;
    }
    res.write(chunk, () => (opts.gapMs ? setTimeout(next, opts.gapMs) : next()));
  };
  next();
}
