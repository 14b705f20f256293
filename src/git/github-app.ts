// A GitHub App as a git host's credential. The app's private key (a file, re-read when it changes)
// signs a short RS256 JWT; the REST API trades it for an installation token (narrowed to the
// configured repositories and permissions, if any); git gets the token as GitHub documents it,
// Basic `x-access-token:<token>`. The token is minted and kept by the gateway's minted-credential
// machinery (minted.ts): refreshed five minutes before it expires with one refresh in flight, a
// failed refresh keeping the current token until it expires, every minted value checked before
// it is kept; the exchange goes through fetchBody (total deadline, size cap, verified TLS).
import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { fetchBody, type FetchedBody } from '../gateway/credentials/fetch.ts';
import type { Egress } from '../http/tunnel.ts';
import { mintedSource, type MintedSource } from '../gateway/credentials/minted.ts';
import { isObject } from '../json/keys.ts';
import { parseStrictJson } from '../json/strict.ts';
import { fileSecret, type SecretSource } from '../config/secret.ts';
import { reveal, Secret } from '../http/secret-value.ts';
import type { GitHubAppConfig, PermissionLevel } from './github-app-config.ts';

/** `iat` this far in the past, as GitHub advises against clock drift. */
const JWT_BACKDATE_SEC = 60;
/** `exp` this far ahead: iat to exp is GitHub's maximum of ten minutes. */
const JWT_AHEAD_SEC = 540;
/** GitHub's installation tokens live an hour; one is never held longer, whatever `expires_at` says (clock skew). */
const TOKEN_LIFE_MS = 3600_000;
/** The RSA modulus GitHub generates; a shorter key is a mistake (or not the app's). */
const MIN_KEY_BITS = 2048;
/** The API version whose answer is parsed here. */
const GITHUB_API_VERSION = '2022-11-28';
/** An answer's size cap: GitHub repeats each repository a token is narrowed to, a few KiB each. */
const ANSWER_BASE_BYTES = 64 * 1024;
const ANSWER_BYTES_PER_REPOSITORY = 16 * 1024;

/** The user name git sends an installation token with (GitHub's documented form). */
export const INSTALLATION_TOKEN_USER = 'x-access-token';

/** Pure: the app's RSA private key from PEM text, or why it is not one (never a part of the text). */
export function appPrivateKey(pem: string): KeyObject | { readonly error: string } {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    return { error: 'is not a PEM private key (download a new one from the app\'s settings page)' };
  }
  if (key.asymmetricKeyType !== 'rsa') return { error: `holds a ${key.asymmetricKeyType} key; a GitHub App signs with RSA` };
  if ((key.asymmetricKeyDetails?.modulusLength ?? 0) < MIN_KEY_BITS) return { error: `holds an RSA key shorter than ${MIN_KEY_BITS} bits` };
  return key;
}

const appJwtSegment = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** Pure: the app's JWT at `nowSec`: RS256, `iss` the client or app ID, `iat` a minute back, `exp` ten minutes after `iat`. */
export function appJwt(issuer: string | number, key: KeyObject, nowSec: number): string {
  const input = `${appJwtSegment({ alg: 'RS256', typ: 'JWT' })}.${appJwtSegment({ iat: nowSec - JWT_BACKDATE_SEC, exp: nowSec + JWT_AHEAD_SEC, iss: issuer })}`;
  return `${input}.${sign('RSA-SHA256', Buffer.from(input), key).toString('base64url')}`;
}

export interface TokenRequest {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** The narrowing, as JSON (`{}` for none). */
  readonly json: string;
  readonly maxBytes: number;
}

/** Pure: the request that trades `jwt` for an installation token, narrowed as configured. */
export function installationTokenRequest(config: GitHubAppConfig, jwt: string): TokenRequest {
  const narrowing = {
    ...(config.repositories ? { repositories: config.repositories } : {}),
    ...(config.permissions ? { permissions: config.permissions } : {}),
  };
  return {
    url: `${config.apiUrl}/app/installations/${config.installationId}/access_tokens`,
    headers: { accept: 'application/vnd.github+json', 'x-github-api-version': GITHUB_API_VERSION, authorization: `Bearer ${jwt}`, 'user-agent': 'git-auth-proxy' },
    json: JSON.stringify(narrowing),
    maxBytes: ANSWER_BASE_BYTES + (config.repositories?.length ?? 0) * ANSWER_BYTES_PER_REPOSITORY,
  };
}

/** Sends the token request (the side effect; one function, so that egress settings apply to it in one place). */
export type TokenExchange = (request: TokenRequest) => Promise<FetchedBody>;

/** The exchange over HTTPS, through the egress proxy start-up read (HTTPS_PROXY) unless NO_PROXY names the API's host. */
export const exchangeAtGitHub = (request: TokenRequest, egress?: Egress): Promise<FetchedBody> => fetchBody(request.url, { headers: { ...request.headers }, json: request.json, maxBytes: request.maxBytes, egress });

/** Pure: what a refusal of the token request says to the operator, by status (GitHub's own text is never repeated). */
function refusalReason(status: number, config: GitHubAppConfig): string {
  const where = `the GitHub API at ${config.apiUrl} answered ${status}`;
  switch (status) {
    case 401:
      return `${where}: it refused the app's JWT; check appId or clientId, the private key file and this machine's clock`;
    case 403:
      return `${where}: the installation may be suspended, or the app may not hold a permission asked for`;
    case 404:
      return `${where}: this app has no installation ${config.installationId}; check installationId`;
    case 422:
      return `${where}: a repository or permission asked for is not granted to the installation; check repositories and permissions`;
    default:
      return where;
  }
}

const RANK: Readonly<Record<PermissionLevel, number>> = { read: 1, write: 2, admin: 3 };
/** GitHub adds read access to repository metadata to every installation token, asked or not. */
const ALWAYS_GRANTED: Readonly<Record<string, PermissionLevel>> = { metadata: 'read' };
const ISO_INSTANT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)$/;

const levelOf = (table: Readonly<Record<string, unknown>>, name: string): unknown => (Object.hasOwn(table, name) ? table[name] : undefined);

/**
 * Pure: how an issued token is wider than the narrowing asked, or undefined. With repositories
 * configured: it must be for selected repositories, each one of those asked (names compared
 * without case, as GitHub does). With permissions configured: it may hold only those, each at
 * most at the level asked (and `metadata: read`, which GitHub adds to every token). An answer
 * that does not say what the token holds is wider than asked. With neither configured the token
 * is the installation's whole reach, as the operator chose: nothing to compare.
 */
export function narrowingProblem(doc: Record<string, unknown>, config: GitHubAppConfig): string | undefined {
  if (config.repositories) {
    if (doc.repository_selection !== 'selected') return `the token issued is for all repositories, not the ${config.repositories.length} asked for`;
    const asked = new Set(config.repositories.map((r) => r.toLowerCase()));
    if (!Array.isArray(doc.repositories)) return 'the answer does not list the repositories of the token issued';
    for (const repo of doc.repositories as unknown[]) {
      const name = isObject(repo) && typeof repo.name === 'string' ? repo.name : undefined;
      if (name === undefined) return 'the answer lists a repository without a name';
      if (!asked.has(name.toLowerCase())) return `the token issued is for the repository "${name}", which was not asked for`;
    }
  }
  if (config.permissions) {
    if (!isObject(doc.permissions)) return 'the answer does not list the permissions of the token issued';
    for (const [name, got] of Object.entries(doc.permissions)) {
      const asked = levelOf(config.permissions, name) ?? levelOf(ALWAYS_GRANTED, name);
      if (asked === undefined) return `the token issued holds ${name}, which was not asked for`;
      const ok = typeof got === 'string' && Object.hasOwn(RANK, got) && RANK[got as PermissionLevel] <= RANK[asked as PermissionLevel];
      if (!ok) return `the token issued holds ${name} above "${asked as string}"`;
    }
  }
  return undefined;
}

/**
 * Pure: the token and when to stop using it, from the API's answer at `nowMs`; throws the reason
 * otherwise (never a part of the answer but its status and field names). The token's characters
 * are checked by minted.ts before it is kept.
 */
export function parseInstallationToken(answer: FetchedBody, nowMs: number, config: GitHubAppConfig): { value: string; expiresAtMs: number } {
  if (answer.status !== 201 && answer.status !== 200) throw new Error(refusalReason(answer.status, config));
  const parsed = parseStrictJson(answer.body);
  const doc = parsed.ok && isObject(parsed.value) ? parsed.value : undefined;
  if (doc === undefined) throw new Error(`the GitHub API at ${config.apiUrl} answered ${answer.status} without a JSON object`);
  if (typeof doc.token !== 'string') throw new Error('the answer has no "token" string');
  const expires = typeof doc.expires_at === 'string' && ISO_INSTANT.test(doc.expires_at) ? Date.parse(doc.expires_at) : NaN;
  if (!Number.isFinite(expires)) throw new Error('the answer has no "expires_at" time');
  if (expires <= nowMs) throw new Error('the token issued has already expired by this machine\'s clock; check the clock');
  const wider = narrowingProblem(doc, config);
  if (wider !== undefined) throw new Error(`${wider}: refused`);
  return { value: doc.token, expiresAtMs: Math.min(expires, nowMs + TOKEN_LIFE_MS) };
}

/** The private key file as a source re-read when it changes (PEM holds spaces and newlines: kept as it is). */
export function privateKeyFileSource(path: string): SecretSource {
  return fileSecret(path, (raw) => (raw.trim() === '' ? { ok: false, reason: 'missing' } : { ok: true, value: new Secret(raw) }));
}

/** A git host's installation tokens: the Authorization header for a request at `nowMs`, or why there is none. */
export interface InstallationTokens {
  authorization(nowMs: number): Promise<{ ok: true; authorization: Secret; secrets: readonly Secret[] } | { ok: false; reason: string }>;
  readonly minted: MintedSource;
}

export interface InstallationTokenOptions {
  readonly config: GitHubAppConfig;
  /** The private key file, re-read when it changes. */
  readonly privateKey: SecretSource;
  readonly exchange: TokenExchange;
  /** How the token goes upstream: Basic `x-access-token:<token>` (credentials.ts). */
  readonly basic: (token: string) => { authorization: Secret; secrets: readonly Secret[] };
  readonly onRefresh: (outcome: { ok: true } | { ok: false; reason: string }) => void;
  /** How long a request waits for a refresh in flight (minted.ts's default unless a test needs another). */
  readonly waitMs?: number;
}

export function installationTokens(opts: InstallationTokenOptions): InstallationTokens {
  const { config } = opts;
  const key = (): KeyObject => {
    const pem = opts.privateKey.read();
    if (!pem.ok) throw new Error(`the private key file ${config.privateKeyFile} cannot be read`);
    const parsed = appPrivateKey(reveal(pem.value));
    if ('error' in parsed) throw new Error(`the private key file ${config.privateKeyFile} ${parsed.error}`);
    return parsed;
  };
  const minted = mintedSource<string>({
    type: 'github-app',
    what: 'GitHub App installation token',
    async mint(nowMs) {
      const answer = await opts.exchange(installationTokenRequest(config, appJwt(config.issuer, key(), Math.floor(nowMs / 1000))));
      return parseInstallationToken(answer, nowMs, config);
    },
    fields: (token) => ({ token }),
    use: (token) => {
      const basic = opts.basic(token);
      return { headers: { authorization: basic.authorization }, secrets: basic.secrets };
    },
    present: () => {
      try {
        key();
        return true;
      } catch {
        return false;
      }
    },
    onRefresh: opts.onRefresh,
    waitMs: opts.waitMs,
  });
  return {
    minted,
    async authorization(nowMs) {
      // The outgoing call matters only to a signing source (SigV4); a token ignores it.
      const auth = await minted.authenticate({ method: 'GET', target: '/', host: '', contentType: undefined, body: Buffer.alloc(0) }, nowMs);
      return auth.ok ? { ok: true, authorization: auth.headers.authorization!, secrets: auth.secrets } : { ok: false, reason: auth.reason };
    },
  };
}
