// A fake OIDC issuer on loopback over HTTPS (the test PKI): a Kubernetes API server's discovery
// document at /.well-known/openid-configuration and its key set at /openid/v1/jwks. The keys can be
// rotated while it runs, and the next answer of either path can be scripted (slow, oversized,
// garbage, an error status). It counts the fetches of each path.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { jwksOf, type SaSigner } from './service-accounts.ts';
import type { TestPki } from './tls.ts';

export type IssuerAnswer = (req: IncomingMessage, res: ServerResponse) => void;

export interface FakeIssuer {
  /** `https://127.0.0.1:<port>`: the issuer, and the origin of its jwks_uri. */
  readonly issuer: string;
  readonly jwksUrl: string;
  /** The keys the set lists from now on. */
  setKeys(...signers: SaSigner[]): void;
  /** The next answers of a path, once each, before the normal ones. */
  script(path: 'discovery' | 'jwks', ...answers: IssuerAnswer[]): void;
  /** The discovery document's fields from now on (merged over the normal ones). */
  setDiscovery(fields: Record<string, unknown>): void;
  readonly fetches: { discovery: number; jwks: number };
  close(): Promise<void>;
}

export const DISCOVERY_PATH = '/.well-known/openid-configuration';
export const JWKS_PATH = '/openid/v1/jwks';

export async function startFakeIssuer(pki: Pick<TestPki, 'keyPem' | 'certPem'>, ...signers: SaSigner[]): Promise<FakeIssuer> {
  let keys = signers;
  let discoveryOver: Record<string, unknown> = {};
  const scripted = { discovery: [] as IssuerAnswer[], jwks: [] as IssuerAnswer[] };
  const fetches = { discovery: 0, jwks: 0 };
  let issuer = '';
  const json = (res: ServerResponse, value: unknown) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(value));
  };
  const server: Server = createServer({ key: pki.keyPem, cert: pki.certPem }, (req, res) => {
    const path = req.url === DISCOVERY_PATH ? 'discovery' : req.url === JWKS_PATH ? 'jwks' : undefined;
    if (path === undefined) {
      res.writeHead(404).end();
      return;
    }
    fetches[path]++;
    const next = scripted[path].shift();
    if (next) next(req, res);
    else if (path === 'discovery') json(res, { issuer, jwks_uri: `${issuer}${JWKS_PATH}`, response_types_supported: ['id_token'], subject_types_supported: ['public'], id_token_signing_alg_values_supported: ['RS256', 'ES256'], ...discoveryOver });
    else json(res, jwksOf(...keys));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    jwksUrl: `${issuer}${JWKS_PATH}`,
    setKeys: (...next) => {
      keys = next;
    },
    script: (path, ...answers) => scripted[path].push(...answers),
    setDiscovery: (fields) => {
      discoveryOver = fields;
    },
    fetches,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Answers that a real issuer should never give. */
export const HOSTILE: Record<'garbage' | 'oversized' | 'error' | 'silent', IssuerAnswer> = {
  garbage: (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('<html>oops</html>'),
  oversized: (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(`{"keys":[],"pad":"${'x'.repeat(70 * 1024)}"}`),
  error: (_req, res) => res.writeHead(500).end('upstream down'),
  // Headers sent, then nothing: only a total deadline ends it.
  silent: (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"keys":[');
  },
};
