// Fakes of the clouds' credential checks, for tests: a Google OAuth token endpoint that verifies
// a service account's assertion (signature, audience, lifetime) before it issues a token, and the
// SigV4 check an AWS service makes of a request as it received it.
import { createHash, verify, type KeyObject } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { authorization, type AwsCredentials } from '../../src/gateway/credentials/sigv4.ts';
import type { TestPki } from './tls.ts';

export interface TokenEndpoint {
  readonly uri: string;
  /** The claims of every assertion received, valid or not. */
  readonly assertions: Record<string, unknown>[];
  /** Tokens issued so far (`ya29.fake-<n>`). */
  issued(): number;
  close(): Promise<void>;
}

/**
 * Answers POST /token: an assertion signed by one of `publicKeys` gets `ya29.fake-<n>` (valid
 * `expiresInSec`), anything else 400 invalid_grant.
 */
export async function startTokenEndpoint(pki: Pick<TestPki, 'keyPem' | 'certPem'>, publicKeys: KeyObject | readonly KeyObject[], expiresInSec = 3599): Promise<TokenEndpoint> {
  const keys = Array.isArray(publicKeys) ? publicKeys : [publicKeys as KeyObject];
  const assertions: Record<string, unknown>[] = [];
  let issued = 0;
  let uri = '';
  const server: Server = createServer({ key: pki.keyPem, cert: pki.certPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString());
      const [h, p, s] = (form.get('assertion') ?? '').split('.') as [string, string, string];
      const claims = JSON.parse(Buffer.from(p ?? '', 'base64url').toString() || '{}') as Record<string, number | string>;
      assertions.push(claims);
      const valid =
        req.url === '/token' &&
        form.get('grant_type') === 'urn:ietf:params:oauth:grant-type:jwt-bearer' &&
        keys.some((key) => verify('RSA-SHA256', Buffer.from(`${h}.${p}`), key, Buffer.from(s ?? '', 'base64url'))) &&
        claims.aud === uri &&
        (claims.exp as number) - (claims.iat as number) <= 3600;
      if (!valid) return void res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"invalid_grant","error_description":"Invalid JWT Signature."}');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: `ya29.fake-${++issued}`, expires_in: expiresInSec, token_type: 'Bearer' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  uri = `https://127.0.0.1:${(server.address() as AddressInfo).port}/token`;
  return { uri, assertions, issued: () => issued, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** Whether a received request carries a valid SigV4 signature over what arrived (body hash included). */
export function sigV4Valid(req: IncomingMessage, url: string, body: Buffer, credentials: AwsCredentials, region: string, service: string): boolean {
  const h = req.headers;
  const signed = /SignedHeaders=([^,]+)/.exec(String(h.authorization))?.[1]?.split(';') ?? [];
  const [path, query = ''] = url.split('?') as [string, string?];
  const expected = authorization({ method: req.method!, path, query, headers: signed.map((n) => [n, String(h[n])] as const), payloadHash: String(h['x-amz-content-sha256']) }, { region, service, amzDate: String(h['x-amz-date']) }, credentials);
  return h.authorization === expected && h['x-amz-content-sha256'] === createHash('sha256').update(body).digest('hex') && signed.includes('content-type') && signed.includes('host');
}
