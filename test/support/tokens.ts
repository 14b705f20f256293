// Token verification as the tests call it: with one HS256 secret (a Buffer, the environment's key)
// or a key ring, the way a listener's key source verifies (src/auth/verifier.ts, keyRingSource).
import { asBotToken, asGitToken, keyRing, verifySignedToken, type GitVerifyResult, type KeyRing, type VerifyOptions, type VerifyResult } from '../../src/auth/jwt.ts';
import { composeVerifier, keyRingSource, type TokenVerifier } from '../../src/auth/verifier.ts';

/** The ring of one HS256 secret without kid (MODEL_PROXY_SIGNING_KEY alone); a short secret throws a RangeError. */
export function secretRing(secret: Buffer): KeyRing {
  return keyRing([{ kid: undefined, alg: 'HS256', key: secret }]);
}

const ringOf = (keys: Buffer | KeyRing): KeyRing => (Buffer.isBuffer(keys) ? secretRing(keys) : keys);

/** A bot token as the gateway verifies it. */
export function verifyBotToken(token: string, keys: Buffer | KeyRing, opts: VerifyOptions): VerifyResult {
  return asBotToken(token, verifySignedToken(token, ringOf(keys), opts));
}

/** A workload token as the git proxy verifies it. */
export function verifyGitToken(token: string, keys: Buffer | KeyRing, opts: VerifyOptions): GitVerifyResult {
  return asGitToken(token, verifySignedToken(token, ringOf(keys), opts));
}

/** A listener's verifier of one HS256 secret, as serve builds it from MODEL_PROXY_SIGNING_KEY. */
export function secretVerifier(secret: Buffer, maxLifetimeSec: number): TokenVerifier {
  const ring = secretRing(secret);
  return composeVerifier([keyRingSource(() => ring, maxLifetimeSec)]);
}
