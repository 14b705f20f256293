// Start-up: the verifiers the listeners hold (src/auth/verifier.ts), from their keys.
import { keyRing } from '../auth/jwt.ts';
import { composeVerifier, keyRingSource, type TokenVerifier } from '../auth/verifier.ts';

/** The verifier of one listener's keys; undefined without any key (network-policy mode). */
export function keysVerifier(secret: Buffer | undefined, maxLifetimeSec: number): TokenVerifier | undefined {
  if (secret === undefined) return undefined;
  const ring = keyRing([{ kid: undefined, alg: 'HS256', key: secret }]);
  return composeVerifier([keyRingSource(() => ring, maxLifetimeSec)]);
}
