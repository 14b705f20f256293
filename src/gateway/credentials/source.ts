// Credential sources (their table is table.ts, beside the protocol table). A provider names its protocol (its
// kind) and its credential; a source has one job: given the outgoing call, the headers that
// authenticate it, and the secrets that must never come back to a workload, both opaque to the
// code outside the credential kernel (http/secret-value.ts). A static key is read
// at request time; a Google service account mints an access token and keeps it fresh; AWS signs
// each call over the exact bytes sent.
import type { ProxyError } from '../../http/errors.ts';
import { reveal, Secret } from '../../http/secret-value.ts';

/** The call a source authenticates: what goes upstream, as it will be sent. */
export interface OutgoingCall {
  readonly method: string;
  /** The path as sent, query included after `?`. */
  readonly target: string;
  /** The Host header value. */
  readonly host: string;
  /** The request's Content-Type as sent (signed by AWS). */
  readonly contentType: string | undefined;
  readonly body: Buffer;
}

export type Authenticated =
  | { readonly ok: true; readonly headers: Readonly<Record<string, Secret>>; readonly secrets: readonly Secret[] }
  /** `reason` says what failed (never a secret); the error is what the workload gets. */
  | { readonly ok: false; readonly error: ProxyError; readonly reason: string };

export interface CredentialSource {
  /** For the listening line and the logs: which kind of credential. */
  readonly type: 'none' | 'key' | 'google-service-account' | 'google-metadata' | 'aws-sigv4' | 'aws-web-identity' | 'github-app';
  /** Presence only, at start-up: a value is never logged. */
  present(): boolean;
  authenticate(call: OutgoingCall, nowMs: number): Promise<Authenticated>;
  /** Stops what the source runs on its own (a minted credential's refresh timer): the process's exit calls it. */
  close?(): void;
}

/** Each header value held as a Secret (the headers a source made, as they leave it). */
export function secretHeaders(headers: Readonly<Record<string, string>>): Record<string, Secret> {
  const out: Record<string, Secret> = {};
  for (const [name, value] of Object.entries(headers)) out[name] = new Secret(value);
  return out;
}

/** A header value a credential may be: printable ASCII (no CR, LF, NUL or DEL, nothing above 0x7e). */
const CREDENTIAL_VALUE = /^[\x20-\x7e]*$/;

/**
 * Pure: the name of a credential header whose value cannot be sent (a minted token with CR/LF,
 * DEL or a character above 0x7e, from a broken or hostile token endpoint), or undefined.
 */
export function credentialHeaderProblem(headers: Readonly<Record<string, Secret>>): string | undefined {
  for (const [name, value] of Object.entries(headers)) if (!CREDENTIAL_VALUE.test(reveal(value))) return name;
  return undefined;
}
