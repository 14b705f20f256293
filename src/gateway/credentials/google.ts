// A Google service account: the mounted JSON key file (re-read at each refresh, so a rotated key
// is picked up) signs an RS256 JWT assertion, the file's token endpoint trades it for an access
// token, and the token is kept until shortly before it expires: refreshed ahead of expiry, one
// refresh in flight at a time, so that no request waits on it once the first token is in. A
// failed refresh (an endpoint cut at the fetch's deadline, a token that is not visible ASCII
// included) keeps serving the current token until it expires; after that, a call is answered
// 502 naming the provider and the reason.
import { createPrivateKey, sign } from 'node:crypto';
import { fetchBody, FETCH_DEADLINE_MS } from './fetch.ts';
import { Secret } from '../../http/secret-value.ts';
import type { Egress } from '../../http/tunnel.ts';
import { isObject } from '../../json/keys.ts';
import { parseStrictJson } from '../../json/strict.ts';
import { mintedSource, type MintedSource } from './minted.ts';

/** The longest an assertion may live (Google's limit). */
const ASSERTION_LIFETIME_SEC = 3600;

export interface ServiceAccountKey {
  readonly clientEmail: string;
  readonly privateKeyPem: string;
  readonly keyId: string | undefined;
  /** Where the assertion is traded for a token: https only. */
  readonly tokenUri: string;
}

/** Pure: the fields the flow needs from a service-account key file, or an error naming the field. */
export function parseServiceAccountKey(text: string): ServiceAccountKey | { readonly error: string } {
  const parsed = parseStrictJson(text);
  if (!parsed.ok || !isObject(parsed.value)) return { error: 'is not a JSON object' };
  const doc = parsed.value;
  if (doc.type !== 'service_account') return { error: '"type" must be "service_account"' };
  const str = (f: string) => (typeof doc[f] === 'string' && doc[f] !== '' ? (doc[f] as string) : undefined);
  const clientEmail = str('client_email');
  const privateKeyPem = str('private_key');
  const tokenUri = str('token_uri') ?? 'https://oauth2.googleapis.com/token';
  if (!clientEmail) return { error: '"client_email" is missing' };
  if (!privateKeyPem) return { error: '"private_key" is missing' };
  if (!/^https:\/\/[^/?#@]+\//.test(tokenUri)) return { error: '"token_uri" must be an https URL' };
  return { clientEmail, privateKeyPem, keyId: str('private_key_id'), tokenUri };
}

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** Pure: the signed JWT assertion of the service account for `scope`, valid from `nowSec` for an hour. */
export function assertionJwt(key: ServiceAccountKey, scope: string, nowSec: number): string {
  const header = key.keyId === undefined ? { alg: 'RS256', typ: 'JWT' } : { alg: 'RS256', typ: 'JWT', kid: key.keyId };
  const claims = { iss: key.clientEmail, scope, aud: key.tokenUri, iat: nowSec, exp: nowSec + ASSERTION_LIFETIME_SEC };
  const input = `${b64url(header)}.${b64url(claims)}`;
  return `${input}.${sign('RSA-SHA256', Buffer.from(input), createPrivateKey(key.privateKeyPem)).toString('base64url')}`;
}

/** Trades an assertion for a token at the token endpoint (the side effect, injected for tests). */
export type TokenExchange = (tokenUri: string, assertion: string) => Promise<{ accessToken: string; expiresInSec: number }>;

/** The token endpoint over HTTPS (verified TLS; through the egress proxy when there is one), bounded in time (`deadlineMs`, total) and size. */
export async function exchangeAtTokenEndpoint(tokenUri: string, assertion: string, deadlineMs = FETCH_DEADLINE_MS, egress?: Egress): Promise<{ accessToken: string; expiresInSec: number }> {
  const res = await fetchBody(tokenUri, { form: { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion }, deadlineMs, egress });
  const parsed = parseStrictJson(res.body);
  const doc = parsed.ok && isObject(parsed.value) ? parsed.value : undefined;
  if (res.status !== 200 || typeof doc?.access_token !== 'string' || typeof doc.expires_in !== 'number') {
    // The endpoint's own error code only (e.g. invalid_grant), never the body as a whole.
    const code = typeof doc?.error === 'string' && /^[a-z_]{1,64}$/.test(doc.error) ? `: ${doc.error}` : '';
    throw new Error(`the token endpoint answered ${res.status}${code}`);
  }
  return { accessToken: doc.access_token, expiresInSec: doc.expires_in };
}

/** The metadata server's JSON (link-local plain HTTP, as Google's libraries use it), bounded like the token endpoint. */
export async function fetchMetadataJson(url: string, headers: Record<string, string>, deadlineMs = FETCH_DEADLINE_MS): Promise<unknown> {
  const res = await fetchBody(url, { headers, deadlineMs });
  if (res.status !== 200) throw new Error(`the metadata server answered ${res.status}`);
  const parsed = parseStrictJson(res.body);
  if (!parsed.ok) throw new Error('the metadata server answered with something else than JSON');
  return parsed.value;
}

export interface GoogleSourceOptions {
  readonly readKeyFile: () => string;
  readonly scope: string;
  readonly exchange: TokenExchange;
  /** Called after each refresh attempt (the metric and the log line). */
  readonly onRefresh: (outcome: { ok: true } | { ok: false; reason: string }) => void;
  /** How long a call waits for a refresh in flight (minted.ts REFRESH_WAIT_MS by default). */
  readonly waitMs?: number;
}

const bearer = (token: string) => ({ headers: { authorization: new Secret(`Bearer ${token}`) }, secrets: [new Secret(token)] });
/** The field a Google token endpoint and the metadata server name the token by. */
const accessTokenField = (token: string) => ({ access_token: token });

export function googleServiceAccountSource(opts: GoogleSourceOptions): MintedSource {
  return mintedSource<string>({
    type: 'google-service-account',
    what: 'Google access token',
    async mint(nowMs) {
      const key = parseServiceAccountKey(opts.readKeyFile());
      if ('error' in key) throw new Error(`the service-account key file ${key.error}`);
      const got = await opts.exchange(key.tokenUri, assertionJwt(key, opts.scope, Math.floor(nowMs / 1000)));
      return { value: got.accessToken, expiresAtMs: nowMs + got.expiresInSec * 1000 };
    },
    fields: accessTokenField,
    use: bearer,
    present: () => {
      try {
        return !('error' in parseServiceAccountKey(opts.readKeyFile()));
      } catch {
        return false;
      }
    },
    onRefresh: opts.onRefresh,
    waitMs: opts.waitMs,
  });
}

/**
 * The metadata server's token for the service account the workload runs as (GKE workload
 * identity, Compute Engine): plain HTTP to the link-local metadata address, as Google's own
 * libraries do (`GCE_METADATA_HOST` moves it, e.g. for tests), with `Metadata-Flavor: Google`.
 */
export function googleMetadataSource(opts: { readonly metadataHost: string; readonly fetchJson: (url: string, headers: Record<string, string>) => Promise<unknown>; readonly onRefresh: GoogleSourceOptions['onRefresh']; readonly waitMs?: number }): MintedSource {
  return mintedSource<string>({
    type: 'google-metadata',
    what: 'Google access token from the metadata server',
    async mint(nowMs) {
      const doc = await opts.fetchJson(`http://${opts.metadataHost}/computeMetadata/v1/instance/service-accounts/default/token`, { 'metadata-flavor': 'Google' });
      const token = isObject(doc) ? doc : {};
      if (typeof token.access_token !== 'string' || typeof token.expires_in !== 'number') throw new Error('the metadata server answered without access_token and expires_in');
      return { value: token.access_token, expiresAtMs: nowMs + token.expires_in * 1000 };
    },
    fields: accessTokenField,
    use: bearer,
    present: () => true,
    onRefresh: opts.onRefresh,
    waitMs: opts.waitMs,
  });
}
