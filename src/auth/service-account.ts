// A Kubernetes projected service-account token, verified as Kubernetes' own authenticator does,
// against the issuer's public keys (jwks.ts): the key named by `kid` fixes the algorithm (RS256 or
// ES256; never the token's choice, so no `none` and no HMAC keyed with a public key), `iss` is the
// configured issuer exactly, `aud` holds the configured audience (a token the kubelet requested for
// the API server, or for another service, is not one for us), `exp`, `iat` and `nbf` hold with a
// bounded clock skew and a bounded lifetime, and the `kubernetes.io` claims name a namespace, a
// service account and the pod the token is bound to, each a Kubernetes name (they become log
// fields and metric labels). Pure: the caller passes the keys and the clock.
//
// The payload, as the kubelet's projected volume holds it (Kubernetes 1.21+; `jti` and `node`
// from 1.29/1.30):
//   {"aud":["credential-proxy"],"exp":..,"iat":..,"nbf":..,"iss":"https://kubernetes.default.svc",
//    "jti":"<uuid>","sub":"system:serviceaccount:agents:triage",
//    "kubernetes.io":{"namespace":"agents","serviceaccount":{"name":"triage","uid":"<uuid>"},
//                     "pod":{"name":"triage-7f9c","uid":"<uuid>"},"node":{...}}}
import { verify as cryptoVerify } from 'node:crypto';
import { isObject } from '../json/keys.ts';
import { JWK_KEY_ID, type JwkKey } from './jwks.ts';
import { parseClaimsObject, readCompactToken } from './compact-token.ts';
import { IDENTITY_VALUE, timeClaimsProblem } from './jwt.ts';
import { K8S_NAMESPACE, K8S_OBJECT_NAME } from './workload-policy.ts';

export interface ServiceAccountOptions {
  /** The `iss` the cluster signs with (its --service-account-issuer), compared exactly. */
  readonly issuer: string;
  /** The audience the pod's projected volume requests for the proxy; `aud` must hold it. */
  readonly audience: string;
  readonly nowSec: number;
  /** The longest `exp - iat` taken (--max-token-lifetime). */
  readonly maxLifetimeSec: number;
}

/** Who a verified token names. */
export interface ServiceAccountClaims {
  readonly namespace: string;
  readonly serviceAccount: { readonly name: string; readonly uid: string };
  readonly pod: { readonly name: string; readonly uid: string };
  /** The token's own id (Kubernetes 1.29+), for revoking one token. */
  readonly jti: string | undefined;
  readonly iat: number;
  readonly exp: number;
}

export type ServiceAccountResult =
  | { readonly ok: true; readonly claims: ServiceAccountClaims; readonly key: JwkKey }
  | { readonly ok: false; readonly reason: string; /** The token named a key id the set lacks: worth fetching the set again. */ readonly unknownKid?: string };

/** A Kubernetes UID. */
const UID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const MAX_AUDIENCES = 16;

/** Pure: the claims of a service-account token signed by one of `keys`, or why it is refused (a fixed phrase, never token content). */
export function verifyServiceAccountToken(token: string, keys: ReadonlyMap<string, JwkKey>, opts: ServiceAccountOptions): ServiceAccountResult {
  const read = readCompactToken(token);
  if (!read.ok) return saRefusal(read.reason);
  const { header, signingInput, payloadBytes, signature } = read;
  const { kid, alg } = header;
  if (kid === undefined) return saRefusal('token has no key id');
  if (typeof kid !== 'string' || !JWK_KEY_ID.test(kid)) return saRefusal('invalid key id');
  const key = keys.get(kid);
  if (key === undefined) return { ok: false, reason: 'unknown key id', unknownKid: kid };
  // The key's algorithm, never the token's: `none`, HS256 (keyed with the public key's bytes) or
  // an RSA-PSS variant over an RS256 key are all refused here, before any signature is computed.
  if (alg !== key.alg) return saRefusal('algorithm not allowed for this key');
  if (!saSignatureHolds(key, signingInput, signature)) return saRefusal('bad signature');

  const payload = parseClaimsObject(payloadBytes);
  if (payload === 'duplicate') return saRefusal('duplicate key in payload');
  if (payload === null) return saRefusal('malformed payload');
  const timing = timeClaimsProblem(payload, opts.nowSec, opts.maxLifetimeSec);
  if (timing) return saRefusal(timing);
  if (payload.iss !== opts.issuer) return saRefusal(payload.iss === undefined ? 'missing claim iss' : 'wrong issuer');
  const audience = audienceProblem(payload.aud, opts.audience);
  if (audience) return saRefusal(audience);
  const claims = kubernetesClaims(payload);
  return typeof claims === 'string' ? saRefusal(claims) : { ok: true, claims, key };
}

/** Pure: RS256 is RSASSA-PKCS1-v1_5 with SHA-256; ES256 is ECDSA P-256 with SHA-256, its signature r||s (64 bytes, not DER). */
function saSignatureHolds(key: JwkKey, signingInput: string, signature: Buffer): boolean {
  const data = Buffer.from(signingInput, 'utf8');
  if (key.alg === 'ES256' && signature.length !== 64) return false;
  try {
    return key.alg === 'RS256' ? cryptoVerify('sha256', data, key.key, signature) : cryptoVerify('sha256', data, { key: key.key, dsaEncoding: 'ieee-p1363' }, signature);
  } catch {
    return false;
  }
}

/** Pure: `aud`, a string or a list of strings, must hold `audience`. */
function audienceProblem(aud: unknown, audience: string): string | undefined {
  if (aud === undefined) return 'missing claim aud';
  const list = typeof aud === 'string' ? [aud] : aud;
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_AUDIENCES || !list.every((a) => typeof a === 'string')) return 'invalid claim aud';
  return list.includes(audience) ? undefined : 'wrong audience';
}

/** Pure: the `kubernetes.io` claims (namespace, service account, pod: names and UIDs), consistent with `sub`. */
function kubernetesClaims(payload: Record<string, unknown>): ServiceAccountClaims | string {
  const k8s = payload['kubernetes.io'];
  if (k8s === undefined) return 'missing claim kubernetes.io';
  if (!isObject(k8s)) return 'invalid claim kubernetes.io';
  const { namespace, serviceaccount, pod } = k8s;
  if (typeof namespace !== 'string' || !K8S_NAMESPACE.test(namespace)) return 'invalid claim kubernetes.io.namespace';
  const serviceAccount = namedObject(serviceaccount);
  if (serviceAccount === undefined) return 'invalid claim kubernetes.io.serviceaccount';
  // A token bound to a Secret, not a pod, is the long-lived kind a projected volume replaces.
  if (pod === undefined) return 'token not bound to a pod';
  const boundPod = namedObject(pod);
  if (boundPod === undefined) return 'invalid claim kubernetes.io.pod';
  if (payload.sub !== `system:serviceaccount:${namespace}:${serviceAccount.name}`) return 'sub does not name the service account';
  const { jti } = payload;
  if (jti !== undefined && (typeof jti !== 'string' || !IDENTITY_VALUE.test(jti))) return 'invalid claim jti';
  return { namespace, serviceAccount, pod: boundPod, jti: jti as string | undefined, iat: payload.iat as number, exp: payload.exp as number };
}

/** Pure: `{"name": <Kubernetes name>, "uid": <UID>}`, or undefined. */
function namedObject(value: unknown): { name: string; uid: string } | undefined {
  if (!isObject(value)) return undefined;
  const { name, uid } = value;
  return typeof name === 'string' && K8S_OBJECT_NAME.test(name) && typeof uid === 'string' && UID.test(uid) ? { name, uid } : undefined;
}

function saRefusal(reason: string): ServiceAccountResult {
  return { ok: false, reason };
}
