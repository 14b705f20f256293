// A Google service account: the mounted JSON key file (re-read at each refresh, so a rotated key
// is picked up) signs an RS256 JWT assertion, the file's token endpoint trades it for an access
// token, and the token is kept until shortly before it expires: refreshed ahead of expiry, one
// refresh in flight at a time, so that no request waits on it once the first token is in. A
// failed refresh keeps serving the current token until it expires; after that, a call is answered
// 502 naming the provider and the reason.
import { createPrivateKey, sign } from 'node:crypto';
import { request } from 'node:https';
import { ERRORS } from '../../http/errors.ts';
import { isObject, parseStrictJson } from '../../http/json.ts';
import type { Authenticated, CredentialSource } from './source.ts';

/** The scope Vertex AI and the other Google Cloud APIs accept. */
export const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
/** Refreshed this long before it expires (Google's tokens live an hour). */
const REFRESH_AHEAD_MS = 5 * 60_000;
/** A token this close to its expiry is not sent (clock skew, the call's own duration). */
const EXPIRY_MARGIN_MS = 30_000;
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

export interface AccessToken {
  readonly token: string;
  readonly expiresAtMs: number;
}

/** Trades an assertion for a token at the token endpoint (the side effect, injected for tests). */
export type TokenExchange = (tokenUri: string, assertion: string) => Promise<{ accessToken: string; expiresInSec: number }>;

/** The token endpoint over HTTPS (verified TLS), bounded in time and size. */
export const exchangeAtTokenEndpoint: TokenExchange = (tokenUri, assertion) =>
  new Promise((resolve, reject) => {
    const body = new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion }).toString();
    const req = request(tokenUri, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) }, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > 64 * 1024) res.destroy(new Error('the token endpoint answered more than 64 KiB'));
        else chunks.push(c);
      });
      res.on('error', reject);
      res.on('end', () => {
        const parsed = parseStrictJson(Buffer.concat(chunks));
        const doc = parsed.ok && isObject(parsed.value) ? parsed.value : undefined;
        if (res.statusCode !== 200 || typeof doc?.access_token !== 'string' || typeof doc.expires_in !== 'number') {
          // The endpoint's own error code only (e.g. invalid_grant), never the body as a whole.
          const code = typeof doc?.error === 'string' && /^[a-z_]{1,64}$/.test(doc.error) ? `: ${doc.error}` : '';
          reject(new Error(`the token endpoint answered ${res.statusCode}${code}`));
          return;
        }
        resolve({ accessToken: doc.access_token, expiresInSec: doc.expires_in });
      });
    });
    req.on('timeout', () => req.destroy(new Error('the token endpoint did not answer within 10 s')));
    req.on('error', reject);
    req.end(body);
  });

export interface GoogleSourceOptions {
  readonly readKeyFile: () => string;
  readonly scope: string;
  readonly exchange: TokenExchange;
  /** Called after each refresh attempt (the metric and the log line). */
  readonly onRefresh: (outcome: { ok: true } | { ok: false; reason: string }) => void;
}

/** Pure: what to do with the token held at `nowMs`: use it, use it and refresh ahead, or wait for one. */
export function tokenAction(held: AccessToken | undefined, nowMs: number): 'use' | 'use_and_refresh' | 'wait' {
  if (held === undefined || nowMs >= held.expiresAtMs - EXPIRY_MARGIN_MS) return 'wait';
  return nowMs >= held.expiresAtMs - REFRESH_AHEAD_MS ? 'use_and_refresh' : 'use';
}

export function googleServiceAccountSource(opts: GoogleSourceOptions): CredentialSource & { refresh(nowMs: number): Promise<void>; refreshIfDue(nowMs: number): Promise<void> } {
  let held: AccessToken | undefined;
  let inFlight: Promise<void> | undefined;
  let lastError = 'no token yet';
  const refresh = (nowMs: number): Promise<void> => {
    inFlight ??= (async () => {
      try {
        const key = parseServiceAccountKey(opts.readKeyFile());
        if ('error' in key) throw new Error(`the service-account key file ${key.error}`);
        const got = await opts.exchange(key.tokenUri, assertionJwt(key, opts.scope, Math.floor(nowMs / 1000)));
        held = { token: got.accessToken, expiresAtMs: nowMs + got.expiresInSec * 1000 };
        opts.onRefresh({ ok: true });
      } catch (err) {
        lastError = (err as Error).message;
        opts.onRefresh({ ok: false, reason: lastError });
      } finally {
        inFlight = undefined;
      }
    })();
    return inFlight;
  };
  return {
    type: 'google-service-account',
    present: () => {
      try {
        return !('error' in parseServiceAccountKey(opts.readKeyFile()));
      } catch {
        return false;
      }
    },
    refresh,
    refreshIfDue: (nowMs) => (tokenAction(held, nowMs) === 'use' ? Promise.resolve() : refresh(nowMs)),
    async authenticate(_call, nowMs): Promise<Authenticated> {
      const action = tokenAction(held, nowMs);
      if (action === 'use_and_refresh') void refresh(nowMs);
      if (action === 'wait') {
        await refresh(nowMs);
        if (tokenAction(held, nowMs) === 'wait') return { ok: false, error: ERRORS.upstreamCredentialFailed, reason: `no valid Google access token (${lastError})` };
      }
      return { ok: true, headers: { authorization: `Bearer ${held!.token}` }, secrets: [held!.token] };
    },
  };
}
