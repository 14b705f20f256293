// The server part shared by the fakes of model APIs (responses-upstream.ts, anthropic-upstream.ts):
// HTTPS on loopback with the test PKI, every request recorded with its whole body, answered by
// the next scripted handler or else the fake's default.
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { ModelHandler, ModelRequest } from './model-upstream.ts';
import type { TestPki } from './tls.ts';

export interface HttpsFake {
  readonly port: number;
  readonly requests: ModelRequest[];
  /** Handlers for the next requests, used once each, in order; then the default. */
  script(...handlers: ModelHandler[]): void;
  close(): Promise<void>;
}

export async function startHttpsFake(pki: Pick<TestPki, 'keyPem' | 'certPem'>, fallback: ModelHandler): Promise<HttpsFake> {
  const queue: ModelHandler[] = [];
  const requests: ModelRequest[] = [];
  const server: Server = createServer({ key: pki.keyPem, cert: pki.certPem, keepAlive: true }, (req, res) => {
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
    requests,
    script: (...handlers) => queue.push(...handlers),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
