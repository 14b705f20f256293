// The verifier source for client certificates (mutual TLS, --tls-client-ca): a request on a TLS
// connection whose client certificate chained to the configured CA bundle is this source's alone;
// any other passes to the next source (a bearer token). The certificate's SPIFFE ID (spiffe.ts)
// names a namespace and service account, mapped through the workload policy into the claims both
// listeners read. On such a connection the certificate is the identity: a token sent beside it is
// not read, so a request never carries two identities.
//
// The identity a certificate gets, in records, metrics, limits and the deny list:
//   instance  `<namespace>/<serviceaccount>`  a SPIFFE ID names no pod
//   workflow  the policy entry's `workflow`, else `<namespace>/<serviceaccount>`
//   run       `<namespace>/<serviceaccount>`  one run per account: a run budget from the policy is
//                                             the account's (per-run budgets need minted tokens)
//   exp       the certificate's notAfter      a keep-alive connection is refused from the request
//                                             after its certificate expired
import type { PeerCertificate } from 'node:tls';
import { IDENTITY_VALUE, type BotClaims } from './jwt.ts';
import { spiffeWorkload } from './spiffe.ts';
import type { TokenSource, Verification } from './verifier.ts';
import { lookupWorkload, type WorkloadPolicy } from './workload-policy.ts';

export interface SpiffeSourceOptions {
  readonly trustDomain: string;
  /** The policy as it is now (the caller may re-read its file). */
  readonly policy: () => WorkloadPolicy;
}

/** Certificates read, by their SHA-256 fingerprint (a keep-alive connection, or many, share one). */
const READ_CACHE_ENTRIES = 1024;

export function spiffeSource(opts: SpiffeSourceOptions): TokenSource {
  // What a certificate says cannot change; what the policy grants it can: only the first is kept.
  const read = new Map<string, CertificateRead>();
  return {
    name: 'client-certificate',
    verify(kind, presented, nowSec) {
      const tls = presented.peer?.tls;
      if (tls === undefined || Object.keys(tls.certificate).length === 0) return undefined;
      // The listener refuses an unverified certificate at the handshake; one seen here anyway is refused.
      if (!tls.authorized) return { ok: false, reason: 'the client certificate was not verified against --tls-client-ca', forbidden: true };
      const key = tls.certificate.fingerprint256;
      let certificate = key === undefined ? undefined : read.get(key);
      if (certificate === undefined) {
        certificate = readCertificate(tls.certificate, opts.trustDomain);
        if (key !== undefined) {
          read.set(key, certificate);
          if (read.size > READ_CACHE_ENTRIES) read.delete(read.keys().next().value!);
        }
      }
      const answer = grantedClaims(certificate, opts.policy(), kind === 'git' ? 'git' : 'model', nowSec);
      // A verified certificate that grants nothing: 403 with the reason (a token would not help).
      return answer.ok ? answer : { ...answer, forbidden: true };
    },
  };
}

type CertificateRead = { readonly ok: true; readonly namespace: string; readonly serviceAccount: string; readonly iat: number; readonly exp: number } | { readonly ok: false; readonly reason: string };

/** Pure: what a verified client certificate names (its SPIFFE ID's account) and its validity. */
function readCertificate(cert: Pick<PeerCertificate, 'subjectaltname' | 'ca' | 'valid_from' | 'valid_to'>, trustDomain: string): CertificateRead {
  const workload = spiffeWorkload(cert.subjectaltname, cert.ca, trustDomain);
  if (!workload.ok) return workload;
  const iat = Math.floor(Date.parse(cert.valid_from) / 1000);
  const exp = Math.floor(Date.parse(cert.valid_to) / 1000);
  if (!Number.isFinite(iat) || !Number.isFinite(exp)) return { ok: false, reason: 'the client certificate\'s validity could not be read' };
  return { ok: true, namespace: workload.namespace, serviceAccount: workload.serviceAccount, iat, exp };
}

/** Pure: the claims the policy grants a certificate's account on a listener, at a clock. */
function grantedClaims(certificate: CertificateRead, policy: WorkloadPolicy, listener: 'git' | 'model', nowSec: number): Verification {
  if (!certificate.ok) return certificate;
  const { namespace, serviceAccount, iat, exp } = certificate;
  if (exp <= nowSec) return { ok: false, reason: 'the client certificate has expired since the connection was opened: reconnect with the renewed one' };
  const found = lookupWorkload(policy, namespace, serviceAccount, listener);
  if (!found.ok) return { ok: false, reason: found.reason };
  const { grant } = found;
  const account = `${namespace}/${serviceAccount}`;
  const workflow = grant.workflow ?? account;
  if (!IDENTITY_VALUE.test(account)) return { ok: false, reason: `the instance ${account} is longer than 128 characters: give the service account a shorter name` };
  if (!IDENTITY_VALUE.test(workflow)) return { ok: false, reason: `the workflow ${workflow} is longer than 128 characters: set "workflow" in its policy entry "${grant.entry}"` };
  const claims: BotClaims = {
    sub: account,
    workflow,
    run_id: account,
    iat,
    exp,
    ...(listener === 'git' && grant.git !== undefined ? { git: grant.git } : {}),
    ...(grant.limits === undefined ? {} : { limits: grant.limits }),
  };
  return { ok: true, claims };
}
