// Builds the Authorization header for a git host: from a token (and username) read at request
// time, or from the installation token its GitHub App keeps fresh (github-app.ts). The header and
// the secrets to redact leave this file opaque (http/secret-value.ts).
import { ERRORS, withMessage, type ProxyError } from '../http/errors.ts';
import type { AuthType } from './hosts.ts';
import { describeSecretRef, type SecretRead, type SecretRef, type SecretSource } from '../config/secret.ts';
import { reveal, Secret } from '../http/secret-value.ts';
import { INSTALLATION_TOKEN_USER, type InstallationTokens } from './github-app.ts';

export type Credential =
  | {
      readonly ok: true;
      readonly authorization: Secret;
      /** What must never appear in anything we return to a workload. */
      readonly secrets: readonly Secret[];
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
    return { ok: true, authorization: new Secret(`Bearer ${reveal(token.value)}`), secrets: [token.value] };
  }
  if (username === undefined) return { ok: false, error: ERRORS.credentialMissing };
  if (!username.ok) return failure(username);
  const name = reveal(username.value);
  if (!isBasicUsername(name)) return { ok: false, error: ERRORS.credentialInvalid };
  const basic = Buffer.from(`${name}:${reveal(token.value)}`).toString('base64');
  return { ok: true, authorization: new Secret(`Basic ${basic}`), secrets: [token.value, new Secret(basic)] };
}

/** Pure: an installation token as git sends it to GitHub: Basic `x-access-token:<token>`. */
export function installationTokenCredential(token: string): { authorization: Secret; secrets: readonly Secret[] } {
  const made = injectCredential('basic', { ok: true, value: new Secret(token) }, { ok: true, value: new Secret(INSTALLATION_TOKEN_USER) });
  if (!made.ok) throw new Error('an installation token is checked before it is kept');
  return made;
}

/**
 * A host's credential for one request: its GitHub App's installation token, or its token (and
 * username) read now. A host whose app cannot produce a token is refused 502 naming the host
 * and what failed; nothing is forwarded.
 */
export async function hostCredential(hostKey: string, source: HostCredentialSource, nowMs: number): Promise<Credential> {
  if (source.installation === undefined) {
    if (source.token === undefined) return { ok: false, error: ERRORS.credentialMissing };
    const token = source.token.read();
    const made = injectCredential(source.authType, token, source.username?.read());
    if (made.ok) return made;
    const [what, at] = token.ok ? (['username', source.username] as const) : (['token', source.token] as const);
    return { ok: false, error: namedCredentialError(made.error, what, at?.ref) };
  }
  const got = await source.installation.authorization(nowMs);
  if (got.ok) return { ok: true, authorization: got.authorization, secrets: got.secrets };
  return { ok: false, error: withMessage(ERRORS.gitAppTokenFailed, `the proxy could not obtain the GitHub App installation token for git host ${hostKey} (${got.reason}); the operator must fix its githubApp settings`) };
}

/**
 * Pure: the 503 for a git host's token or username that gives nothing usable names where the
 * operator configured it (the file, or the variable), so that the message says what to fix.
 */
export function namedCredentialError(error: ProxyError, what: 'token' | 'username', ref: SecretRef | undefined): ProxyError {
  if (ref === undefined) return error;
  const where = describeSecretRef(ref);
  if (error.code === ERRORS.credentialInvalid.code) return withMessage(error, `the ${what} configured for that git host in ${where} cannot be used (not a valid header value${what === 'username' ? ', or it contains ":"' : ''}): the operator must fix it`);
  return withMessage(error, 'file' in ref ? `the proxy cannot read the ${what} of that git host from ${where} (missing, unreadable or empty): the operator must mount it` : `no ${what} is configured for that git host: ${where} is empty or unset; the operator must set it`);
}

export interface HostCredentialSource {
  readonly authType: AuthType;
  readonly token: SecretSource | undefined;
  readonly username: SecretSource | undefined;
  readonly installation: InstallationTokens | undefined;
}
