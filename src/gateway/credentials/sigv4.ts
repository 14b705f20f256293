// AWS Signature Version 4, for the Bedrock runtime: every request signed over the exact bytes
// sent (method, path, query, the signed headers and the body's SHA-256), with a key derived from
// the secret for the day, region and service. Pure functions on node:crypto, checked against the
// published AWS test suite (test/fixtures/sigv4/suite.json).
import { createHash, createHmac } from 'node:crypto';

export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  /** Temporary credentials (STS, web identity) carry one; it is signed as X-Amz-Security-Token. */
  readonly sessionToken?: string;
}

export interface SigV4Request {
  readonly method: string;
  /** The path as the client holds it (labels already percent-encoded, as the AWS SDKs do). */
  readonly path: string;
  /** The query string without `?` (may be empty). */
  readonly query: string;
  /** The headers to sign, as [name, value] (any case); `host` and `x-amz-date` among them. */
  readonly headers: readonly (readonly [string, string])[];
  /** Hex SHA-256 of the exact body bytes sent. */
  readonly payloadHash: string;
}

export interface SigV4Scope {
  readonly region: string;
  readonly service: string;
  /** `YYYYMMDDTHHMMSSZ`, the X-Amz-Date value. */
  readonly amzDate: string;
}

const ALGORITHM = 'AWS4-HMAC-SHA256';

/** RFC 3986 encoding as SigV4 wants it: every byte but A-Z a-z 0-9 - . _ ~ as %XX (upper-case hex). */
function uriEncode(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Pure: each path segment encoded again (non-S3 services sign the path encoded twice over the wire form). */
function canonicalUri(path: string): string {
  return path.split('/').map(uriEncode).join('/') || '/';
}

/** Pure: the query's parameters decoded, re-encoded and sorted by key, then value. */
function canonicalQuery(query: string): string {
  if (query === '') return '';
  const pairs = query.split('&').map((p) => {
    const eq = p.indexOf('=');
    const [k, v] = eq < 0 ? [p, ''] : [p.slice(0, eq), p.slice(eq + 1)];
    return [uriEncode(safeDecode(k)), uriEncode(safeDecode(v))] as const;
  });
  pairs.sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join('&');
}

/** Pure: the signed headers, lower-case, sorted, values trimmed with inner runs of spaces made one. */
function canonicalHeaders(headers: SigV4Request['headers']): { text: string; signed: string } {
  const byName = new Map<string, string[]>();
  for (const [name, value] of headers) {
    const lower = name.toLowerCase();
    const list = byName.get(lower) ?? [];
    list.push(value.trim().replace(/ +/g, ' '));
    byName.set(lower, list);
  }
  const names = [...byName.keys()].sort();
  return { text: names.map((n) => `${n}:${byName.get(n)!.join(',')}\n`).join(''), signed: names.join(';') };
}

/** Pure: the canonical request (task 1 of the signing process). */
export function canonicalRequest(req: SigV4Request): string {
  const headers = canonicalHeaders(req.headers);
  return [req.method, canonicalUri(req.path), canonicalQuery(req.query), headers.text, headers.signed, req.payloadHash].join('\n');
}

/** Pure: the string to sign (task 2). */
export function stringToSign(canonical: string, scope: SigV4Scope): string {
  const day = scope.amzDate.slice(0, 8);
  return [ALGORITHM, scope.amzDate, `${day}/${scope.region}/${scope.service}/aws4_request`, sha256Hex(canonical)].join('\n');
}

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data, 'utf8').digest();
export const sha256Hex = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

/** The day's signing key: one HMAC chain per secret, day, region and service (kept for the day). */
const signingKeys = new Map<string, Buffer>();
function signingKey(secret: string, day: string, region: string, service: string): Buffer {
  const id = `${day}\u0000${region}\u0000${service}\u0000${sha256Hex(secret)}`;
  let key = signingKeys.get(id);
  if (!key) {
    key = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), region), service), 'aws4_request');
    if (signingKeys.size > 64) signingKeys.clear();
    signingKeys.set(id, key);
  }
  return key;
}

/** Pure (but for the key cache): the Authorization header value for the request (tasks 3 and 4). */
export function authorization(req: SigV4Request, scope: SigV4Scope, credentials: AwsCredentials): string {
  const canonical = canonicalRequest(req);
  const day = scope.amzDate.slice(0, 8);
  const signature = createHmac('sha256', signingKey(credentials.secretAccessKey, day, scope.region, scope.service)).update(stringToSign(canonical, scope), 'utf8').digest('hex');
  const { signed } = canonicalHeaders(req.headers);
  return `${ALGORITHM} Credential=${credentials.accessKeyId}/${day}/${scope.region}/${scope.service}/aws4_request, SignedHeaders=${signed}, Signature=${signature}`;
}

/** `YYYYMMDDTHHMMSSZ` for a time. */
export function amzDate(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
}
