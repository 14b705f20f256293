// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` and `tracestate`
// request headers a client sends, judged by the spec's grammar before they may go upstream and
// into the request record. Pure. An invalid header is dropped, never an error: tracing is the
// caller's business, and a call must not fail because its trace context is broken. What crosses
// is only what the grammar allows, so neither header can carry anything but ids and the
// vendors' printable list entries.

/** A trace context that passed every rule: the two header values to forward, and the ids to record. */
export interface TraceContext {
  readonly traceparent: string;
  /** Undefined when absent, empty or invalid (it is then not forwarded; the traceparent still is). */
  readonly tracestate: string | undefined;
  readonly traceId: string;
  readonly parentId: string;
  /** The trace-flags' sampled bit: the caller records this trace (a parent-based sampler follows it). */
  readonly sampled: boolean;
}

// Version 00, the only version this proxy forwards: version, trace-id (32 lowercase hex),
// parent-id (16), trace-flags (2), dash-separated, exactly 55 characters, nothing after.
const TRACEPARENT_00 = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ALL_ZERO = /^0+$/;

/**
 * Pure, rule "traceparent version 00 only": a value of another version (including the forbidden
 * ff) is dropped rather than parsed by the spec's forward-compatible rule, so that no field this
 * proxy does not understand is passed on. Rules "lowercase hex ids" and "no all-zero id": the
 * spec makes a trace-id or parent-id of zeros, or with any other character, invalid.
 */
export function parseTraceparent(value: unknown): { readonly traceId: string; readonly parentId: string; readonly sampled: boolean } | undefined {
  if (typeof value !== 'string') return undefined;
  const m = TRACEPARENT_00.exec(value);
  if (m === null) return undefined;
  const traceId = m[1]!;
  const parentId = m[2]!;
  if (ALL_ZERO.test(traceId) || ALL_ZERO.test(parentId)) return undefined;
  return { traceId, parentId, sampled: (parseInt(m[3]!, 16) & 1) === 1 };
}

/** The spec's cap on a combined tracestate value (commas and optional whitespace included). */
export const TRACESTATE_MAX_CHARS = 512;
/** The spec's cap on list members. */
export const TRACESTATE_MAX_MEMBERS = 32;

// Keys, as in Trace Context Level 1: a simple key (a lowercase letter, then up to 255 of
// a-z 0-9 _ - * /), or a multi-tenant key (tenant@system: a tenant of up to 241 characters
// starting with a letter or digit, a system of up to 14 starting with a letter).
const KEY = /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$/;
// Values: 1 to 256 printable ASCII characters but comma and equals sign, not ending in a space.
const VALUE = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;
// Optional whitespace around members: spaces and horizontal tabs only.
const OWS_EDGES = /^[ \t]+|[ \t]+$/g;

/**
 * Pure: the tracestate to forward, as its members joined by commas without the optional
 * whitespace, or undefined (dropped whole). Rules: "tracestate at most 512 characters" (the
 * combined value as received; the spec lets a proxy document a maximum, and a longer one is
 * dropped rather than trimmed), "tracestate at most 32 members", "tracestate key grammar",
 * "tracestate value grammar", "tracestate keys unique". Empty and whitespace-only members are
 * allowed by the spec and left out; a value with only those is absent.
 */
export function parseTracestate(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > TRACESTATE_MAX_CHARS) return undefined;
  const members: string[] = [];
  const keys = new Set<string>();
  for (const raw of value.split(',')) {
    const member = raw.replace(OWS_EDGES, '');
    if (member === '') continue;
    const eq = member.indexOf('=');
    if (eq <= 0) return undefined;
    const key = member.slice(0, eq);
    const val = member.slice(eq + 1);
    if (!KEY.test(key) || !VALUE.test(val) || keys.has(key)) return undefined;
    keys.add(key);
    members.push(member);
    if (members.length > TRACESTATE_MAX_MEMBERS) return undefined;
  }
  return members.length === 0 ? undefined : members.join(',');
}

/**
 * Pure: the trace context of a request, from its two header values (Node joins repeated fields
 * with ", ": two traceparent fields then fail the grammar, as the spec wants; repeated tracestate
 * fields form one list, as it allows). Rule "tracestate only with a valid traceparent": the spec
 * forbids parsing tracestate when traceparent failed.
 */
export function readTraceContext(traceparent: unknown, tracestate: unknown): TraceContext | undefined {
  const parent = parseTraceparent(traceparent);
  if (parent === undefined) return undefined;
  return { traceparent: traceparent as string, tracestate: parseTracestate(tracestate), ...parent };
}

/**
 * The proxy's own span in a trace (with tracing on, src/telemetry/): the trace it continues (the
 * client's, or one it started), its span id, the client's span as its parent, whether it is
 * sampled (recorded and exported), and the tracestate to pass on.
 */
export interface SpanContext {
  readonly traceId: string;
  readonly spanId: string;
  /** The client's span (traceparent's parent-id); undefined when the proxy started the trace. */
  readonly parentId: string | undefined;
  readonly sampled: boolean;
  readonly tracestate: string | undefined;
}

/** What a request asks of tracing (src/telemetry/tracer.ts): its span, and span ids for its upstream attempts. */
export interface Tracing {
  start(client: TraceContext | undefined): SpanContext;
  newSpanId(): string;
}

/** Pure: the traceparent that names `spanId` of this trace as the parent, for the upstream. */
export function traceparentOf(span: SpanContext, spanId: string): string {
  return `00-${span.traceId}-${spanId}-${span.sampled ? '01' : '00'}`;
}
