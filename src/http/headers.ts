// Which headers cross the proxy, in each direction. Pure functions over Node's header shapes.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { headerCarriesSecret } from './redact.ts';
import { reveal, type Secret } from './secret-value.ts';
import { readTraceContext, type TraceContext } from './trace-context.ts';

// RFC 9110 §7.6.1: connection-specific headers are never forwarded.
const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

// Headers that carry a credential or a session; never relayed to a workload.
const CREDENTIAL_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'set-cookie',
  'set-cookie2',
  'www-authenticate',
  'proxy-authenticate',
]);

const NO_NAMES: ReadonlySet<string> = new Set();

/** Header names listed in `Connection`, lower-cased. They are hop-by-hop too. */
export function connectionNamed(value: string | string[] | undefined): ReadonlySet<string> {
  if (value === undefined) return NO_NAMES;
  const names = new Set<string>();
  for (const part of Array.isArray(value) ? value : [value]) {
    for (const token of part.split(',')) {
      const name = token.trim().toLowerCase();
      if (name) names.add(name);
    }
  }
  return names;
}

/** The media type of a Content-Type value, lower-cased, without parameters. */
export function mediaType(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  return value.split(';', 1)[0]!.trim().toLowerCase();
}

/** Throws if a value we are about to set could split the header block. */
export function assertHeaderValue(name: string, value: string): string {
  if (/[\r\n\0]/.test(value)) throw new Error(`refusing to set header ${name}: value contains CR, LF or NUL`);
  return value;
}

// Everything git's smart-HTTP client sends that a server may use. An allowlist, so that a
// header nobody thought of (X-Forwarded-*, a provider's API-version or impersonation header)
// cannot ride along with our credential.
const GIT_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'accept',
  'accept-encoding',
  'accept-language',
  'cache-control',
  'content-encoding',
  'content-type',
  'git-protocol',
  'pragma',
  'user-agent',
]);

const isGitRequestHeader = (name: string): boolean => GIT_REQUEST_HEADERS.has(name);

const TRACE_HEADERS: ReadonlySet<string> = new Set(['traceparent', 'tracestate']);

/**
 * The request's W3C trace context (trace-context.ts), unless the client named its headers in
 * `Connection` (then they are hop-by-hop, like any other). What the record shows is what
 * allowedRequestHeaders forwards: both come from here.
 */
export function requestTraceContext(incoming: IncomingHttpHeaders): TraceContext | undefined {
  if (incoming.traceparent === undefined) return undefined;
  const dropped = connectionNamed(incoming.connection);
  return readTraceContext(dropped.has('traceparent') ? undefined : incoming.traceparent, dropped.has('tracestate') ? undefined : incoming.tracestate);
}

/**
 * The client headers that `allowed` names, minus any the client named in `Connection`, plus the
 * trace context when it is valid (never as sent: as trace-context.ts judged it): both listeners
 * start from this, before adding their own, so that a client cannot strip what the proxy sets.
 */
export function allowedRequestHeaders(incoming: IncomingHttpHeaders, allowed: (name: string) => boolean): OutgoingHttpHeaders {
  const dropped = connectionNamed(incoming.connection);
  const out: OutgoingHttpHeaders = {};
  for (const name of Object.keys(incoming)) {
    if (!dropped.has(name) && !TRACE_HEADERS.has(name) && allowed(name)) out[name] = incoming[name];
  }
  const trace = requestTraceContext(incoming);
  if (trace !== undefined) {
    out.traceparent = trace.traceparent;
    if (trace.tracestate !== undefined) out.tracestate = trace.tracestate;
  }
  return out;
}

/**
 * Upstream headers for a git request: the allowlisted client headers (allowedRequestHeaders),
 * then Host from the registry. Our Authorization is the target's credential, added as the request
 * is written (forward.ts); the framing (Content-Length, Transfer-Encoding) is never the client's:
 * the forwarding core sets it from what it sends.
 */
export function gitUpstreamHeaders(incoming: IncomingHttpHeaders, host: string): OutgoingHttpHeaders {
  const out = allowedRequestHeaders(incoming, isGitRequestHeader);
  out.host = assertHeaderValue('host', host);
  return out;
}

/** A credential's headers as a source made them: each value opaque until withCredential. */
export type CredentialHeaders = Readonly<Record<string, Secret>>;

/**
 * Pure but for reading the credential: `headers` with the credential's own set (over any of the
 * same name), each value checked for CR/LF. The forwarding core calls it as it writes the request
 * (forward.ts): the credential is opaque until then.
 */
export function withCredential(headers: OutgoingHttpHeaders, credential: CredentialHeaders | undefined): OutgoingHttpHeaders {
  for (const [name, value] of Object.entries(credential ?? {})) headers[name] = assertHeaderValue(name, reveal(value));
  return headers;
}

// Any other header whose name says it carries a credential. Rate-limit headers speak of
// "tokens" in the model sense and are exactly what clients need, so they are exempt: OpenAI's
// x-ratelimit-* and Anthropic's anthropic-ratelimit-* alike.
const CREDENTIAL_NAME = /api[-_]?key|secret|passw|credential|session|token/i;
const RATE_LIMIT_PREFIXES = ['x-ratelimit-', 'anthropic-ratelimit-'];

export function isCredentialHeaderName(lowerName: string): boolean {
  if (CREDENTIAL_RESPONSE_HEADERS.has(lowerName)) return true;
  return !RATE_LIMIT_PREFIXES.some((p) => lowerName.startsWith(p)) && CREDENTIAL_NAME.test(lowerName);
}

// Which account the upstream key belongs to (OpenAI names the organisation and project on every
// answer, Anthropic the organisation): nothing a workload needs, and something it should not learn.
const ACCOUNT_RESPONSE_HEADERS: ReadonlySet<string> = new Set(['openai-organization', 'openai-project', 'anthropic-organization-id']);

/**
 * Response headers relayed to the workload, as a flat [name, value, ...] list that keeps the
 * upstream's order and case. Drops hop-by-hop headers, credential-bearing headers (by name),
 * the key owner's account identifiers, and any header whose value carries one of `secrets` in
 * any form a client decodes (an upstream echoing our token back; see redact.ts).
 */
export function scrubResponseHeaders(rawHeaders: readonly string[], secrets: readonly string[]): string[] {
  let dropped: Set<string> | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === 'connection') {
      dropped ??= new Set();
      for (const n of connectionNamed(rawHeaders[i + 1])) dropped.add(n);
    }
  }
  const out: string[] = [];
  const holdsSecret = headerCarriesSecret(secrets);
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const value = rawHeaders[i + 1]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || isCredentialHeaderName(lower) || ACCOUNT_RESPONSE_HEADERS.has(lower) || dropped?.has(lower)) continue;
    if (holdsSecret(value)) continue;
    out.push(name, value);
  }
  return out;
}

/**
 * Pure: how many times a header appears in a request (`rawHeaders`, any case). Node keeps only
 * the first of two `Authorization` headers in `req.headers`, and another reader may keep the
 * last: a request with two is refused rather than judged on one.
 */
export function headerCount(rawHeaders: readonly string[], name: string): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === name) n++;
  return n;
}
