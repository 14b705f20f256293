// Kubernetes projected service-account tokens for tests, signed here with node:crypto directly
// (not with the proxy's code): RS256 and ES256 keys with a kid, their public JWKS, and the payload
// shape the kubelet's projected volume holds. The independent check is scripts/e2e-identity.ts,
// which mints with the jose library.
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { rsaKeyPair } from './test-keys.ts';

export const TEST_ISSUER = 'https://kubernetes.default.svc.cluster.local';
export const TEST_AUDIENCE = 'credential-proxy';

export interface SaSigner {
  readonly kid: string;
  readonly alg: 'RS256' | 'ES256';
  readonly privateKey: KeyObject;
  /** The public key as the cluster's /openid/v1/jwks lists it. */
  readonly jwk: Record<string, unknown>;
}

export function rsaSigner(kid: string, modulusLength = 2048): SaSigner {
  const { privateKey, publicKey } = rsaKeyPair(modulusLength);
  return { kid, alg: 'RS256', privateKey, jwk: { use: 'sig', kty: 'RSA', kid, alg: 'RS256', ...publicKey.export({ format: 'jwk' }) } };
}

export function ecSigner(kid: string): SaSigner {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { kid, alg: 'ES256', privateKey, jwk: { use: 'sig', kty: 'EC', kid, alg: 'ES256', ...publicKey.export({ format: 'jwk' }) } };
}

export function jwksOf(...signers: SaSigner[]): { keys: Record<string, unknown>[] } {
  return { keys: signers.map((s) => s.jwk) };
}

export interface SaIdentity {
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly pod: string;
}

export const POD_UID = '0d8b260e-ef0e-45fb-be8e-ff44f97722e8';
export const SA_UID = 'e6a8680e-d103-4cce-80ea-03acbbeacf7d';

/** The payload of a projected token, as Kubernetes 1.30 writes it, valid for `ttlSec` from `nowSec`. */
export function saPayload(who: SaIdentity, nowSec: number, ttlSec = 3600, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    aud: [TEST_AUDIENCE],
    exp: nowSec + ttlSec,
    iat: nowSec,
    iss: TEST_ISSUER,
    jti: '7a3a9b3e-5bd9-4a4f-a7a5-8b2d1c0f9e11',
    'kubernetes.io': {
      namespace: who.namespace,
      node: { name: 'worker-1', uid: '517eb86e-b863-451b-bf70-86cb61439a3a' },
      pod: { name: who.pod, uid: POD_UID },
      serviceaccount: { name: who.serviceAccount, uid: SA_UID },
    },
    nbf: nowSec,
    sub: `system:serviceaccount:${who.namespace}:${who.serviceAccount}`,
    ...over,
  };
}

const segment = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

/** A token signed by `signer` (RS256: PKCS#1 v1.5; ES256: r||s), with its header `{alg, kid}` unless `header` replaces it. */
export function signSaToken(signer: SaSigner, payload: Record<string, unknown> | string, header: Record<string, unknown> = { alg: signer.alg, kid: signer.kid }): string {
  const input = `${segment(header)}.${segment(payload)}`;
  const signature = signer.alg === 'RS256' ? sign('sha256', Buffer.from(input), signer.privateKey) : sign('sha256', Buffer.from(input), { key: signer.privateKey, dsaEncoding: 'ieee-p1363' });
  return `${input}.${signature.toString('base64url')}`;
}
