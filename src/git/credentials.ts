// Builds the Authorization header for a git host from credentials read at request time.
import { ERRORS, type ProxyError } from '../http/errors.ts';
import type { AuthType } from './hosts.ts';
import type { SecretRead } from '../config/secret.ts';

export type Credential =
  | {
      readonly ok: true;
      readonly authorization: string;
      /** Strings that must never appear in anything we return to a workload. */
      readonly secrets: readonly string[];
    }
  | { readonly ok: false; readonly error: ProxyError };

function failure(read: SecretRead & { ok: false }): Credential {
  return { ok: false, error: read.reason === 'missing' ? ERRORS.credentialMissing : ERRORS.credentialInvalid };
}

/**
 * Pure: RFC 7617: a Basic user-id cannot contain a colon (it would shift the boundary to the
 * password). Checked at start-up, and again per request (a username file may change).
 */
export function isBasicUsername(username: string): boolean {
  return !username.includes(':');
}

export function injectCredential(authType: AuthType, token: SecretRead, username: SecretRead | undefined): Credential {
  if (!token.ok) return failure(token);
  if (authType === 'bearer') {
    return { ok: true, authorization: `Bearer ${token.value}`, secrets: [token.value] };
  }
  if (username === undefined) return { ok: false, error: ERRORS.credentialMissing };
  if (!username.ok) return failure(username);
  if (!isBasicUsername(username.value)) return { ok: false, error: ERRORS.credentialInvalid };
  const basic = Buffer.from(`${username.value}:${token.value}`).toString('base64');
  return { ok: true, authorization: `Basic ${basic}`, secrets: [token.value, basic] };
}
