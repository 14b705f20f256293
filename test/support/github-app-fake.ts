// A fake of GitHub's REST API for one GitHub App, for tests: HTTPS on loopback with the test PKI,
// answering POST {base}/app/installations/{id}/access_tokens as GitHub documents it. It verifies
// the app's JWT for real (RS256 with the app's public key through node:crypto, `iss`, and the
// iat/exp window against its own clock, which a test may move), checks the headers and that the
// narrowing asked for is within what the installation was granted, and issues tokens that
// expire. Every exchange is recorded, and a test can hold the answers or script a failure.
import { randomBytes, verify, type KeyObject } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TestPki } from './tls.ts';

export interface Exchange {
  readonly url: string;
  readonly headers: IncomingMessage['headers'];
  /** The JWT's header and claims, parsed whether or not it verified. */
  readonly jwtHeader: Record<string, unknown>;
  readonly claims: Record<string, unknown>;
  /** The request body, parsed (undefined when it was not JSON). */
  readonly body: unknown;
  /** What the fake answered, and the token it issued (if any). */
  status: number;
  token?: string;
  /** Why the fake refused it, when it did. */
  refused?: string;
}

export interface GitHubAppFake {
  /** `https://127.0.0.1:<port>` plus the base path (`/api/v3` like GitHub Enterprise Server, or none). */
  readonly apiUrl: string;
  readonly exchanges: Exchange[];
  /** The public keys the app's JWT may be signed with (replace them to rotate the app's key). */
  publicKeys: KeyObject[];
  /** The fake's clock, in ms (Date.now unless a test moves it). */
  now: () => number;
  /** Whether `token` was issued here and has not expired by the fake's clock. */
  isValid(token: string): boolean;
  /** Answers the next requests with this status and body instead (once each). */
  failNext(...answers: { status: number; body: string }[]): void;
  /** Holds every answer until the returned function is called. */
  hold(): () => void;
  /** Answers the next request with a token of this text and expiry instead of a fresh one. */
  issueNext(token: string, expiresAt?: string): void;
  close(): Promise<void>;
}

export interface GitHubAppFakeOptions {
  readonly pki: Pick<TestPki, 'keyPem' | 'certPem'>;
  readonly publicKey: KeyObject;
  /** The `iss` the app's JWT must carry: its client ID or app ID. */
  readonly issuer: string | number;
  readonly installationId: number;
  /** What the installation was granted: repositories (names) and permissions. */
  readonly grantedRepositories: readonly string[];
  readonly grantedPermissions: Readonly<Record<string, 'read' | 'write' | 'admin'>>;
  readonly basePath?: string;
  /** Lifetime of the tokens issued (GitHub's: an hour). */
  readonly tokenLifetimeSec?: number;
}

const RANK = { read: 1, write: 2, admin: 3 } as const;
const decodePart = (part: string | undefined): Record<string, unknown> => {
  try {
    const v = JSON.parse(Buffer.from(part ?? '', 'base64url').toString('utf8')) as unknown;
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
};
/** GitHub's own form: seconds, no fraction. */
const isoSeconds = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

export async function startGitHubAppFake(opts: GitHubAppFakeOptions): Promise<GitHubAppFake> {
  const base = opts.basePath ?? '';
  const exchanges: Exchange[] = [];
  const issued = new Map<string, number>();
  const scripted: { status: number; body: string }[] = [];
  const nextTokens: { token: string; expiresAt?: string }[] = [];
  let gate: Promise<void> | undefined;
  let issuedCount = 0;

  const fake: GitHubAppFake = {
    apiUrl: '',
    exchanges,
    publicKeys: [opts.publicKey],
    now: () => Date.now(),
    isValid: (token) => (issued.get(token) ?? 0) > fake.now(),
    failNext: (...answers) => void scripted.push(...answers),
    hold() {
      let release!: () => void;
      gate = new Promise((resolve) => (release = resolve));
      return () => {
        gate = undefined;
        release();
      };
    },
    issueNext: (token, expiresAt) => void nextTokens.push({ token, expiresAt }),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  /** Why GitHub would refuse the request's JWT at the fake's time, or undefined. */
  const jwtProblem = (jwt: string): string | undefined => {
    const [h, p, s] = jwt.split('.');
    const header = decodePart(h);
    const claims = decodePart(p);
    if (header.alg !== 'RS256') return 'alg is not RS256';
    if (!fake.publicKeys.some((key) => verify('RSA-SHA256', Buffer.from(`${h}.${p}`), key, Buffer.from(s ?? '', 'base64url')))) return 'bad signature';
    if (claims.iss !== opts.issuer) return 'wrong iss';
    const nowSec = Math.floor(fake.now() / 1000);
    const { iat, exp } = claims;
    if (!Number.isInteger(iat) || !Number.isInteger(exp)) return 'iat or exp missing';
    if ((iat as number) > nowSec + 60) return 'iat in the future';
    if ((exp as number) <= nowSec) return 'expired';
    if ((exp as number) > nowSec + 600) return 'exp more than 10 minutes ahead';
    if ((exp as number) - (iat as number) > 600) return 'lives more than 10 minutes';
    return undefined;
  };

  const answer = (res: ServerResponse, status: number, doc: unknown) => res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(doc));

  const handle = (req: IncomingMessage, res: ServerResponse, raw: Buffer) => {
    const jwt = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    const [h, p] = jwt.split('.');
    let body: unknown;
    try {
      body = raw.length === 0 ? {} : JSON.parse(raw.toString('utf8'));
    } catch {
      body = undefined;
    }
    const exchange: Exchange = { url: req.url ?? '', headers: req.headers, jwtHeader: decodePart(h), claims: decodePart(p), body, status: 0 };
    exchanges.push(exchange);
    const refuse = (status: number, why: string, message: string) => {
      exchange.status = status;
      exchange.refused = why;
      answer(res, status, { message, documentation_url: 'https://docs.github.com/rest' });
    };
    const match = /^(.*)\/app\/installations\/(\d+)\/access_tokens$/.exec(req.url ?? '');
    if (req.method !== 'POST' || !match || match[1] !== base) return refuse(404, 'no such route', 'Not Found');
    if (req.headers.accept !== 'application/vnd.github+json' || req.headers['x-github-api-version'] !== '2022-11-28') return refuse(400, 'headers', 'Bad headers');
    const script = scripted.shift();
    if (script) {
      exchange.status = script.status;
      exchange.refused = 'scripted';
      return void res.writeHead(script.status, { 'content-type': 'application/json' }).end(script.body);
    }
    const problem = jwtProblem(jwt);
    if (problem) return refuse(401, problem, 'A JSON web token could not be decoded');
    if (Number(match[2]) !== opts.installationId) return refuse(404, 'installation', 'Not Found');
    if (typeof body !== 'object' || body === null) return refuse(400, 'body', 'Problems parsing JSON');
    const { repositories, permissions } = body as { repositories?: string[]; permissions?: Record<string, 'read' | 'write' | 'admin'> };
    if (repositories && repositories.some((r) => !opts.grantedRepositories.includes(r))) return refuse(422, 'repositories', 'There is at least one repository that does not exist or is not accessible to the parent installation.');
    for (const [name, level] of Object.entries(permissions ?? {})) {
      const granted = opts.grantedPermissions[name];
      if (!granted || RANK[level] > RANK[granted]) return refuse(422, 'permissions', `The permissions requested are not granted to this installation.`);
    }
    const next = nextTokens.shift();
    const token = next?.token ?? `ghs_${++issuedCount}x${randomBytes(18).toString('hex')}`;
    const expiresAtMs = fake.now() + (opts.tokenLifetimeSec ?? 3600) * 1000;
    issued.set(token, expiresAtMs);
    exchange.status = 201;
    exchange.token = token;
    answer(res, 201, {
      token,
      expires_at: next?.expiresAt ?? isoSeconds(expiresAtMs),
      permissions: permissions ?? opts.grantedPermissions,
      repository_selection: repositories ? 'selected' : 'all',
      ...(repositories ? { repositories: repositories.map((name, i) => ({ id: 1000 + i, name, full_name: `acme/${name}`, private: true })) } : {}),
    });
  };

  const server: Server = createServer({ key: opts.pki.keyPem, cert: opts.pki.certPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      if (gate) void gate.then(() => handle(req, res, raw));
      else handle(req, res, raw);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  (fake as { apiUrl: string }).apiUrl = `https://127.0.0.1:${(server.address() as AddressInfo).port}${base}`;
  return fake;
}
