// The verifier source for Kubernetes service-account tokens (--sa-issuer): a token whose unverified
// `iss` is the configured issuer is this source's alone (any other passes to the next source, our
// own keys); it is verified against the issuer's key set (service-account.ts, jwks-source.ts) and
// its account mapped through the workload policy (workload-policy.ts) into the claims both
// listeners read.
//
// The identity a service account gets, in records, metrics, limits and the deny list:
//   instance  `<namespace>/<pod>`     the pod; a pod name alone repeats across namespaces
//                                    (`worker-0` of two StatefulSets), and per-instance limits
//                                    and `revoke --instance-id` must not join them
//   workflow  the policy entry's `workflow`, else `<namespace>/<serviceaccount>`
//   run       the pod's UID           one run per pod: a pod replaced is a new run (its budget
//                                    starts again; a run budget across pods needs minted tokens)
//   token id  the token's `jti` (Kubernetes 1.29+), so `revoke --token-id` stops one token
// An instance or workflow longer than an identity may be (128 characters) is refused, naming it.
//
// An asymmetric signature costs far more than an HMAC, so a verified token is remembered by its
// whole string (in its one form, tokenCacheKey: an ES256 token's high-s twin is the same entry)
// until its exp, as keyRingSource does: a hit is checked again against the clock and
// the key set (a key removed from the set refuses its tokens from the next request), and the
// policy is asked on every request, cached or not.
import { decodeSegment, parseClaimsObject, tokenCacheKey } from './compact-token.ts';
import { bounded } from '../http/log.ts';
import { isObject } from '../json/keys.ts';
import { IDENTITY_VALUE, TOKEN_LEEWAY_SEC, type BotClaims } from './jwt.ts';
import type { JwkKey } from './jwks.ts';
import type { KeySetSource } from './jwks-source.ts';
import { verifyServiceAccountToken, type ServiceAccountClaims, type ServiceAccountResult } from './service-account.ts';
import type { TokenSource, Verification } from './verifier.ts';
import { lookupWorkload, type WorkloadPolicy } from './workload-policy.ts';

export interface ServiceAccountSourceOptions {
  readonly issuer: string;
  readonly audience: string;
  readonly maxLifetimeSec: number;
  readonly keys: KeySetSource;
  /** The policy as it is now (the caller may re-read its file). */
  readonly policy: () => WorkloadPolicy;
}

/** Verified tokens remembered, by the whole token string in its one form (about a kilobyte each). */
const CACHE_ENTRIES = 4096;

interface Remembered {
  readonly claims: ServiceAccountClaims;
  readonly key: JwkKey;
}

export function serviceAccountSource(opts: ServiceAccountSourceOptions): TokenSource {
  const cache = new Map<string, Remembered>();
  const issuerForms = [opts.issuer, opts.issuer.replaceAll('/', '\\/')].flatMap(base64urlForms);
  // A Kubernetes token names its account under this claim: one from another issuer is refused
  // here naming both issuers, not passed on to our keys to be refused for its algorithm.
  const kubernetesForms = base64urlForms('"kubernetes.io"');
  const refused = (reason: string): Verification => ({ ok: false, reason, serviceAccount: true });
  const remember = (token: string, result: ServiceAccountResult): ServiceAccountResult => {
    if (result.ok) {
      cache.set(token, { claims: result.claims, key: result.key });
      if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
    }
    return result;
  };
  return {
    name: 'service-account',
    verify(kind, presented, nowSec) {
      if (presented.token === undefined) return undefined;
      const token = tokenCacheKey(cache, presented.token);
      const listener = kind === 'git' ? 'git' : 'model';
      const answer = (result: ServiceAccountResult): Verification => (result.ok ? asBotClaims(result.claims, opts.policy(), listener) : refused(result.reason));
      // A token verified before is ours without a look at its payload.
      const hit = cache.get(token);
      if (hit !== undefined) {
        cache.delete(token);
        if (opts.keys.current().get(hit.key.kid) === hit.key && hit.claims.exp > nowSec - TOKEN_LEEWAY_SEC) {
          cache.set(token, hit);
          return asBotClaims(hit.claims, opts.policy(), listener);
        }
      }
      const issuer = issuerOf(token, opts.issuer, issuerForms, kubernetesForms);
      if (issuer === undefined) return undefined;
      if (issuer !== opts.issuer) return refused(`its issuer ${JSON.stringify(bounded(issuer))} is not --sa-issuer ${JSON.stringify(opts.issuer)}: the cluster's --service-account-issuer is what --sa-issuer must be`);
      const check = (keys: ReadonlyMap<string, JwkKey>) => verifyServiceAccountToken(token, keys, { issuer: opts.issuer, audience: opts.audience, nowSec, maxLifetimeSec: opts.maxLifetimeSec });
      const first = check(opts.keys.current());
      // A key id the set lacks may be a rotation the proxy has not seen: fetch the set again (at
      // most once per floor, one fetch for every request waiting) and verify once more.
      if (!first.ok && first.unknownKid !== undefined) return opts.keys.refresh().then((keys) => answer(remember(token, check(keys))));
      return answer(remember(token, first));
    },
  };
}

/**
 * Pure: the unverified payload's `iss` when the token may be this source's, only to choose the
 * source and to name a wrong issuer (never to accept); undefined to pass it on. Every minted
 * token passes here when --sa-issuer is set, so the payload is decoded and parsed only when its
 * base64url text holds the issuer (`issuerForms`: as written, or with JSON's escaped slashes) or
 * the `"kubernetes.io"` claim name (a service-account token of another issuer) at all; a token
 * whose `iss` is spelled with other escapes goes to the next source, which refuses it.
 * bench:service-accounts measured the decode this saves on every minted token at a third of an
 * HS256 verification.
 */
function issuerOf(token: string, issuer: string, issuerForms: readonly string[], kubernetesForms: readonly string[]): string | undefined {
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first < 0 || second < 0) return undefined;
  const segment = token.slice(first + 1, second);
  const ours = issuerForms.some((form) => segment.includes(form));
  if (!ours && !kubernetesForms.some((form) => segment.includes(form))) return undefined;
  const bytes = decodeSegment(segment);
  const payload = bytes === null ? null : parseClaimsObject(bytes);
  if (payload === null || payload === 'duplicate' || typeof payload.iss !== 'string') return undefined;
  // Ours when its iss is the issuer (the issuer's text elsewhere in a payload, a minted token's
  // workflow, say, is not); of another issuer only when it names a Kubernetes account, which a
  // minted token never does.
  if (ours && payload.iss === issuer) return issuer;
  return isObject(payload['kubernetes.io']) ? payload.iss : undefined;
}

/**
 * Pure: what any base64url text holding `text` somewhere in its bytes must contain, one string per
 * alignment of the text's first byte within a 3-byte group: the characters that only the text's
 * own bytes decide (a group shared with the bytes before or after it is left out).
 */
function base64urlForms(text: string): string[] {
  const bytes = Buffer.from(text, 'utf8');
  return [0, 1, 2].map((offset) => {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64url');
    return encoded.slice(offset === 0 ? 0 : offset + 1, Math.floor((offset + bytes.length) / 3) * 4);
  });
}

/** Pure: a verified service account as the listeners' claims, through the policy; or why not. */
function asBotClaims(claims: ServiceAccountClaims, policy: WorkloadPolicy, listener: 'git' | 'model'): Verification {
  const found = lookupWorkload(policy, claims.namespace, claims.serviceAccount.name, listener);
  if (!found.ok) return { ok: false, reason: found.reason, serviceAccount: true };
  const { grant } = found;
  const sub = `${claims.namespace}/${claims.pod.name}`;
  const workflow = grant.workflow ?? `${claims.namespace}/${claims.serviceAccount.name}`;
  if (!IDENTITY_VALUE.test(sub)) return { ok: false, reason: `the instance ${sub} is longer than 128 characters: give the pod a shorter name`, serviceAccount: true };
  if (!IDENTITY_VALUE.test(workflow)) return { ok: false, reason: `the workflow ${workflow} is longer than 128 characters: set "workflow" in its policy entry "${grant.entry}"`, serviceAccount: true };
  const bot: BotClaims = {
    sub,
    workflow,
    run_id: claims.pod.uid,
    iat: claims.iat,
    exp: claims.exp,
    ...(listener === 'git' && grant.git !== undefined ? { git: grant.git } : {}),
    ...(grant.limits === undefined ? {} : { limits: grant.limits }),
    ...(claims.jti === undefined ? {} : { jti: claims.jti }),
  };
  return { ok: true, claims: bot };
}
