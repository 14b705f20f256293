// The proxy's own answers: small, complete, never holding a credential. Each listener renders
// its errors through this (git: a text line, the gateway: its protocol's JSON).
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * A small, complete response for an error the proxy makes itself. An unread request body (a
 * refused push) is not worth draining: the connection closes after the answer.
 */
export function writeProxyError(req: IncomingMessage, res: ServerResponse, status: number, contentType: string, body: string, allow?: string): void {
  const headers: Record<string, string | number> = {
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
  };
  if (allow) headers.allow = allow;
  if (!req.complete) headers.connection = 'close';
  res.writeHead(status, headers);
  res.end(body);
}
