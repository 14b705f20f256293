// The OTLP/HTTP JSON encoding of spans (the protobuf JSON mapping with OTLP's own rules: trace and
// span ids in hex, enums as integers, 64-bit integers as decimal strings, lowerCamelCase field
// names), and what a collector's answer means for the batch. Pure.
import { retryHintMs } from '../gateway/retry.ts';

/** An attribute's value, as the AnyValue JSON form. */
export type OtlpValue = { readonly stringValue: string } | { readonly intValue: string } | { readonly doubleValue: number } | { readonly boolValue: boolean } | { readonly arrayValue: { readonly values: readonly OtlpValue[] } };
export type OtlpAttribute = { readonly key: string; readonly value: OtlpValue };

/** SpanKind and StatusCode, as OTLP numbers them. */
export const SPAN_KIND = { server: 2, client: 3 } as const;
export const STATUS_CODE = { unset: 0, error: 2 } as const;

export interface OtlpSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly traceState?: string;
  /** The W3C trace flags (low byte), and whether the parent is remote (bits 8 and 9). */
  readonly flags: number;
  readonly name: string;
  readonly kind: number;
  readonly startTimeUnixNano: string;
  readonly endTimeUnixNano: string;
  readonly attributes: readonly OtlpAttribute[];
  readonly events?: readonly { readonly timeUnixNano: string; readonly name: string }[];
  readonly status: { readonly code: number; readonly message?: string };
}

/** What an attribute list is built from: a missing or null value is left out. */
export type AttributeValue = string | number | boolean | readonly string[] | { readonly double: number } | null | undefined;

/** A list of attributes to build: key and value pairs (an array, not an object: cheaper by far to make per request). */
export type AttributePairs = readonly (readonly [string, AttributeValue])[];

/** Pure: the attributes, each value in its AnyValue form (a whole number is an intValue: tokens, counts, ports). */
export function attributes(pairs: AttributePairs | Readonly<Record<string, AttributeValue>>): OtlpAttribute[] {
  const out: OtlpAttribute[] = [];
  for (const [key, v] of Array.isArray(pairs) ? (pairs as AttributePairs) : Object.entries(pairs)) {
    if (v === null || v === undefined) continue;
    out.push({ key, value: anyValue(v) });
  }
  return out;
}

function anyValue(v: Exclude<AttributeValue, null | undefined>): OtlpValue {
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (typeof v === 'number') return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  if ('double' in v) return { doubleValue: v.double };
  return { arrayValue: { values: v.map((s) => ({ stringValue: s })) } };
}

/**
 * Pure: a time on this process's monotonic clock (performance.now(), milliseconds) as Unix
 * nanoseconds, a decimal string (fixed64 in JSON). Whole milliseconds and the rest are written
 * apart, so that no digit is lost to a double's precision.
 */
export function unixNano(monotonicMs: number, timeOrigin = performance.timeOrigin): string {
  const [originWhole, nowWhole] = [Math.floor(timeOrigin), Math.floor(monotonicMs)];
  let whole = originWhole + nowWhole;
  let nanos = Math.round((timeOrigin - originWhole + (monotonicMs - nowWhole)) * 1e6);
  if (nanos >= 1e6) [whole, nanos] = [whole + 1, nanos - 1e6];
  return `${whole}${String(nanos).padStart(6, '0')}`;
}

/** Pure: one ExportTraceServiceRequest holding `spans`, as the JSON body to POST. */
export function exportRequestBody(resource: readonly OtlpAttribute[], scope: { readonly name: string; readonly version: string }, spans: readonly OtlpSpan[]): string {
  return JSON.stringify({ resourceSpans: [{ resource: { attributes: resource }, scopeSpans: [{ scope, spans }] }] });
}

/** What became of a batch: taken (maybe partly rejected), to be sent again later, or dropped. */
export type ExportOutcome =
  | { readonly kind: 'ok'; readonly rejected: number }
  | { readonly kind: 'retry'; readonly afterMs: number | undefined; readonly reason: string }
  | { readonly kind: 'drop'; readonly reason: string };

/** The statuses OTLP/HTTP says to retry (with the Retry-After the collector sends, if any). */
const RETRYABLE: ReadonlySet<number> = new Set([429, 502, 503, 504]);

/** Pure: the Retry-After delay in milliseconds, read as the gateway reads a provider's (retryHintMs), at most `maxMs`; undefined when absent or unreadable. */
function retryAfterMs(value: string | undefined, nowMs: number, maxMs: number): number | undefined {
  const ms = value === undefined ? undefined : retryHintMs({ 'retry-after': value }, nowMs);
  return ms === undefined ? undefined : Math.min(ms, maxMs);
}

/**
 * Pure: the outcome of one export from the collector's answer: 2xx taken (the partial success's
 * rejected spans counted; never retried); 429, 502, 503, 504 and a connection that failed or
 * timed out retried; anything else (400: spans the collector cannot read) dropped.
 */
export function exportOutcome(answer: { readonly status: number; readonly retryAfter?: string; readonly body?: string; readonly error?: string }, nowMs: number, maxDelayMs: number): ExportOutcome {
  const { status } = answer;
  if (status === 0) return { kind: 'retry', afterMs: undefined, reason: answer.error ?? 'no answer' };
  if (status >= 200 && status < 300) return { kind: 'ok', rejected: rejectedSpans(answer.body ?? '') };
  if (RETRYABLE.has(status)) return { kind: 'retry', afterMs: retryAfterMs(answer.retryAfter, nowMs, maxDelayMs), reason: `HTTP ${status}` };
  return { kind: 'drop', reason: `HTTP ${status}` };
}

/** Pure: partialSuccess.rejectedSpans of an ExportTraceServiceResponse (an int64: a string or a number), else 0. */
function rejectedSpans(body: string): number {
  try {
    const n = Number((JSON.parse(body) as { partialSuccess?: { rejectedSpans?: unknown } })?.partialSuccess?.rejectedSpans ?? 0);
    return Number.isSafeInteger(n) && n > 0 ? n : 0;
  } catch {
    return 0;
  }
}
