// The static key: an API key read at request time (a file re-read when it changes), sent in the
// header the provider's kind reads it from.
import { describeSecretRef, type SecretRead, type SecretSource } from '../../config/secret.ts';
import { ERRORS, withMessage, type ProxyError } from '../../http/errors.ts';
import { reveal, Secret } from '../../http/secret-value.ts';
import type { Authenticated, CredentialSource } from './source.ts';

/** `header`: the header the key goes in, and what comes before it there (`Bearer `). */
export function staticKeySource(key: SecretSource | undefined, header: readonly [name: string, prefix: string]): CredentialSource {
  return {
    type: 'key',
    present: () => key?.read().ok === true,
    authenticate: async (): Promise<Authenticated> => {
      if (!key) return { ok: false, error: ERRORS.upstreamKeyMissing, reason: 'no key is configured' };
      const read = key.read();
      if (!read.ok) return { ok: false, error: unusableKeyError(read, key), reason: `the key is ${read.reason}` };
      return { ok: true, headers: { [header[0]]: new Secret(header[1] + reveal(read.value)) }, secrets: [read.value] };
    },
  };
}

/**
 * Pure: the 503 for a key that gives nothing usable names where the operator configured it (the
 * file, or the variable), not the variables of the one-provider shorthand.
 */
export function unusableKeyError(read: SecretRead & { ok: false }, key: Pick<SecretSource, 'ref'>): ProxyError {
  const base = read.reason === 'missing' ? ERRORS.upstreamKeyMissing : ERRORS.upstreamKeyInvalid;
  if (key.ref === undefined) return base;
  const where = describeSecretRef(key.ref);
  if (read.reason === 'invalid') return withMessage(base, `the upstream API key in ${where} is not a valid header value: the operator must fix it`);
  return withMessage(base, 'file' in key.ref ? `the gateway cannot read its upstream API key from ${where} (missing, unreadable or empty): the operator must mount it` : `the gateway has no upstream API key: ${where} is empty or unset; the operator must set it`);
}
