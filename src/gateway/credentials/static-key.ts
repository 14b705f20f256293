// The static key: an API key read at request time (a file re-read when it changes), sent in the
// header the provider's kind reads it from.
import type { SecretSource } from '../../config/secret.ts';
import { ERRORS } from '../../http/errors.ts';
import type { Authenticated, CredentialSource } from './source.ts';

export function staticKeySource(key: SecretSource | undefined, header: (key: string) => readonly [string, string]): CredentialSource {
  return {
    type: 'key',
    present: () => key?.read().ok === true,
    authenticate: async (): Promise<Authenticated> => {
      if (!key) return { ok: false, error: ERRORS.upstreamKeyMissing, reason: 'no key is configured' };
      const read = key.read();
      if (!read.ok) return { ok: false, error: read.reason === 'missing' ? ERRORS.upstreamKeyMissing : ERRORS.upstreamKeyInvalid, reason: `the key is ${read.reason}` };
      const [name, value] = header(read.value);
      return { ok: true, headers: { [name]: value }, secrets: [read.value] };
    },
  };
}
