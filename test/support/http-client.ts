// Small HTTP clients for tests: a normal one that records every response it saw (so a suite
// can check that no secret ever reached a workload), and a raw-socket one for requests that
// well-behaved clients refuse to send.
import { request, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import { connect } from 'node:net';

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
}

export const seenResponses: string[] = [];

export function send(port: number, method: string, path: string, opts: { headers?: OutgoingHttpHeaders; body?: Buffer | string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers: opts.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        seenResponses.push(`${res.statusCode}\n${res.rawHeaders.join('\n')}\n${body.toString('latin1')}`);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, body });
      });
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/**
 * Writes `text` on a fresh connection and returns everything read until the server closes.
 * The client never half-closes: Node treats a client FIN as an abort, which would hide a
 * request that the proxy would otherwise have forwarded. Callers send `Connection: close`.
 */
export function rawExchange(port: number, text: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const out = Buffer.concat(chunks).toString('latin1');
      seenResponses.push(out);
      resolve(out);
    });
    socket.write(text);
  });
}

export function statusOf(rawResponse: string): number {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(rawResponse);
  return m ? Number(m[1]) : 0;
}
