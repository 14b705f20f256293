// A client certificate's SPIFFE ID, read strictly (mutual TLS, issue 28 item 5). Pure: the
// certificate's subjectAltName text and CA flag in, the Kubernetes workload it names or a reason
// out. The rules, from the SPIFFE ID and X.509-SVID specifications:
//   - the identity is the certificate's one URI SAN: none, or more than one, is refused (a DNS or
//     e-mail SAN beside it is ignored, the subject's CN never read);
//   - `spiffe://` (the scheme in lower case), a trust domain of a-z 0-9 . - _ (at most 255),
//     then a path of segments of a-z A-Z 0-9 . - _, with no empty, `.` or `..` segment and no
//     trailing `/`; no percent-encoding, port, user, query or fragment can pass that alphabet;
//     at most 2048 bytes in all;
//   - the trust domain must be the one configured (--spiffe-trust-domain), compared exactly;
//   - a leaf SVID is not a CA certificate;
//   - the path names a Kubernetes workload as `/ns/<namespace>/sa/<serviceaccount>` (the form
//     Istio and SPIRE's Kubernetes registrations issue), each a Kubernetes name.
import { K8S_NAMESPACE, K8S_OBJECT_NAME } from './workload-policy.ts';

export interface SpiffeId {
  readonly trustDomain: string;
  /** '' or `/segment/...`. */
  readonly path: string;
}

export type SpiffeWorkload = { readonly ok: true; readonly id: string; readonly namespace: string; readonly serviceAccount: string } | { readonly ok: false; readonly reason: string };

const MAX_ID_BYTES = 2048;
const MAX_TRUST_DOMAIN = 255;
const TRUST_DOMAIN = /^[a-z0-9._-]+$/;
const SPIFFE_PATH_SEGMENT = /^[A-Za-z0-9._-]+$/;

/** Pure: the SPIFFE ID in `uri`, or why it is not one. */
export function parseSpiffeId(uri: string): SpiffeId | { readonly error: string } {
  if (Buffer.byteLength(uri) > MAX_ID_BYTES) return { error: `is longer than ${MAX_ID_BYTES} bytes` };
  if (!uri.startsWith('spiffe://')) return { error: 'does not begin with spiffe://' };
  const rest = uri.slice('spiffe://'.length);
  const slash = rest.indexOf('/');
  const trustDomain = slash < 0 ? rest : rest.slice(0, slash);
  const path = slash < 0 ? '' : rest.slice(slash);
  if (trustDomain === '') return { error: 'has no trust domain' };
  if (trustDomain.length > MAX_TRUST_DOMAIN) return { error: `has a trust domain longer than ${MAX_TRUST_DOMAIN} characters` };
  if (!TRUST_DOMAIN.test(trustDomain)) return { error: 'has a trust domain with a character other than a-z 0-9 . - _ (a port, a user, upper case or an escape)' };
  if (path !== '') {
    for (const segment of path.slice(1).split('/')) {
      if (segment === '') return { error: 'has an empty path segment or a trailing /' };
      if (segment === '.' || segment === '..') return { error: 'has a . or .. path segment' };
      if (!SPIFFE_PATH_SEGMENT.test(segment)) return { error: 'has a path character other than A-Z a-z 0-9 . - _ (an escape, a query or a fragment)' };
    }
  }
  return { trustDomain, path };
}

/**
 * Pure: the entries of a certificate's subjectAltName as Node prints it (`URI:spiffe://a/b, DNS:x`;
 * since Node 17.3 an entry holding a comma, quote or other special character is printed as a JSON
 * string, `URI:"spiffe://a/b,c"`, so a name cannot forge a second entry). undefined: unreadable.
 */
export function subjectAltNames(text: string): { readonly type: string; readonly value: string }[] | undefined {
  const entries: { type: string; value: string }[] = [];
  let at = 0;
  while (at < text.length) {
    const colon = text.indexOf(':', at);
    if (colon < 0) return undefined;
    const type = text.slice(at, colon);
    let value: string;
    let end: number;
    if (text[colon + 1] === '"') {
      // A JSON string: find its closing quote (one not escaped), then parse it.
      let i = colon + 2;
      while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
      if (i >= text.length) return undefined;
      try {
        value = JSON.parse(text.slice(colon + 1, i + 1)) as string;
      } catch {
        return undefined;
      }
      end = i + 1;
    } else {
      const comma = text.indexOf(', ', colon + 1);
      end = comma < 0 ? text.length : comma;
      value = text.slice(colon + 1, end);
    }
    entries.push({ type, value });
    if (end === text.length) break;
    if (!text.startsWith(', ', end)) return undefined;
    at = end + 2;
  }
  return entries;
}

/**
 * Pure: the workload a verified client certificate names, or a reason that says what to fix.
 * `subjectAltName`: Node's text (undefined: the certificate has none); `isCa`: its basic
 * constraints' CA flag.
 */
export function spiffeWorkload(subjectAltName: string | undefined, isCa: boolean, trustDomain: string): SpiffeWorkload {
  if (isCa) return { ok: false, reason: 'the client certificate is a CA certificate, not a workload\'s (an X.509-SVID leaf has CA:FALSE)' };
  const sans = subjectAltNames(subjectAltName ?? '');
  if (sans === undefined) return { ok: false, reason: 'the client certificate\'s subjectAltName could not be read' };
  const uris = sans.filter((s) => s.type === 'URI');
  if (uris.length === 0) return { ok: false, reason: `the client certificate has no SPIFFE ID: give it one URI SAN spiffe://${trustDomain}/ns/<namespace>/sa/<serviceaccount>` };
  if (uris.length > 1) return { ok: false, reason: `the client certificate has ${uris.length} URI SANs: an X.509-SVID has exactly one, its SPIFFE ID` };
  const id = uris[0]!.value;
  const parsed = parseSpiffeId(id);
  if ('error' in parsed) return { ok: false, reason: `the client certificate's URI SAN is not a SPIFFE ID: it ${parsed.error}` };
  if (parsed.trustDomain !== trustDomain) return { ok: false, reason: `the client certificate's SPIFFE ID is in the trust domain ${parsed.trustDomain}, not ${trustDomain} (--spiffe-trust-domain)` };
  const m = /^\/ns\/([^/]+)\/sa\/([^/]+)$/.exec(parsed.path);
  if (m === null) return { ok: false, reason: `the client certificate's SPIFFE ID ${id} does not name a workload as /ns/<namespace>/sa/<serviceaccount>` };
  const [, namespace, serviceAccount] = m as unknown as [string, string, string];
  if (!K8S_NAMESPACE.test(namespace) || !K8S_OBJECT_NAME.test(serviceAccount)) return { ok: false, reason: `the client certificate's SPIFFE ID ${id} does not hold a Kubernetes namespace and service account name` };
  return { ok: true, id, namespace, serviceAccount };
}
