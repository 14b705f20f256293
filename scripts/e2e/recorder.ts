// A plain-HTTP recorder on loopback for --direct mode: the agent's base URL points here, every
// request is forwarded unchanged (method, path, query, headers, body bytes) to an HTTPS fake that
// answers it, the answer is relayed chunk by chunk, and the request is kept with its credentials
// masked. It stands where the gateway stands in gateway mode, so both modes differ only by the
// base URL the agent is given.
import { request as httpsRequest } from 'node:https';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface RecordedRequest {
  method: string;
  url: string;
  /** Lower-case names in the order the client sent them; credentials masked. */
  headers: Record<string, string>;
  /** Parsed JSON when the body is JSON, else the text. */
  body: unknown;
}

export interface Recorder {
  readonly port: number;
  readonly requests: RecordedRequest[];
  /** Writes requests[from..] as <prefix>-<n>.json (n from 1) into dir; returns the file names. */
  save(dir: string, prefix: string, from?: number): string[];
  close(): Promise<void>;
}

/** Header names whose values are credentials; Bearer keeps its scheme so the shape stays visible. */
const SECRET_HEADER = /authorization|api-key|apikey|token|secret|cookie|session-key|password/i;

export function maskHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!.toLowerCase();
    const value = req.rawHeaders[i + 1]!;
    const masked = SECRET_HEADER.test(name) ? (/^bearer\s/i.test(value) ? 'Bearer <redacted>' : '<redacted>') : value;
    out[name] = name in out ? `${out[name]}, ${masked}` : masked;
  }
  return out;
}

function parseBody(body: Buffer, contentType: string | undefined): unknown {
  if (body.length === 0) return null;
  if (/json/i.test(contentType ?? '')) {
    try {
      return JSON.parse(body.toString('utf8'));
    } catch {
      // Fall through: keep what was sent.
    }
  }
  return body.toString('utf8');
}

/** `target` is the fake's origin (https://127.0.0.1:PORT); `ca` the PEM it is signed with. */
export async function startRecorder(target: string, ca: string): Promise<Recorder> {
  const upstream = new URL(target);
  const requests: RecordedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: maskHeaders(req), body: parseBody(body, req.headers['content-type']) });
      const headers = { ...req.headers, host: upstream.host };
      const out = httpsRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers, ca, agent: false }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.on('data', (c: Buffer) => res.write(c));
        answer.on('end', () => res.end());
        // The fake cut the stream: cut ours too, so the agent sees what it would see upstream.
        answer.on('error', () => res.destroy());
        answer.on('close', () => {
          if (!answer.complete) res.destroy();
        });
      });
      out.on('error', (err) => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`recorder: upstream ${target} failed: ${err.message}\n`);
      });
      out.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    save(dir, prefix, from = 0) {
      return requests.slice(from).map((r, i) => {
        const name = `${prefix}-${i + 1}.json`;
        writeFileSync(join(dir, name), `${JSON.stringify(r, null, 2)}\n`);
        return name;
      });
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
