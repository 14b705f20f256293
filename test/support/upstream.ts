// A recording HTTPS upstream on loopback. By default it hashes the request body as it streams
// (never buffering it) and answers with the length and digest; tests can answer themselves.
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestPki } from './tls.ts';

export interface UpstreamRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  bodyBytes: number;
  bodySha256: string;
  /** True once the request body ended normally. */
  complete: boolean;
  /** True if the connection closed before the body ended. */
  aborted: boolean;
}

export type UpstreamHandler = (req: IncomingMessage, res: ServerResponse, record: UpstreamRequest) => void;

export interface TestUpstream {
  readonly port: number;
  readonly hostKey: string;
  readonly server: Server;
  readonly requests: UpstreamRequest[];
  /** Replace the handler for the next requests. */
  handle(handler: UpstreamHandler | undefined): void;
  close(): Promise<void>;
}

export function digestAndAnswer(_req: IncomingMessage, res: ServerResponse, record: UpstreamRequest): void {
  const body = JSON.stringify({ bytes: record.bodyBytes, sha256: record.bodySha256 });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export async function startUpstream(pki: Pick<TestPki, 'keyPem' | 'certPem'>): Promise<TestUpstream> {
  let handler: UpstreamHandler | undefined;
  const requests: UpstreamRequest[] = [];
  const server = createServer({ key: pki.keyPem, cert: pki.certPem, keepAlive: true }, (req, res) => {
    const record: UpstreamRequest = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      bodyBytes: 0,
      bodySha256: '',
      complete: false,
      aborted: false,
    };
    requests.push(record);
    if (handler) {
      handler(req, res, record);
      return;
    }
    const hash = createHash('sha256');
    req.on('data', (c: Buffer) => {
      record.bodyBytes += c.length;
      hash.update(c);
    });
    req.on('end', () => {
      record.complete = true;
      record.bodySha256 = hash.digest('hex');
      digestAndAnswer(req, res, record);
    });
    req.on('close', () => (record.aborted = !record.complete));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    hostKey: `127.0.0.1:${port}`,
    server,
    requests,
    handle: (h) => (handler = h),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
