// Each request's span context: the trace it belongs to (the client's, or a new one), a span id of
// its own, and whether it is sampled, by the OTEL_TRACES_SAMPLER rules. Ids are random (node's
// CSPRNG, drawn in blocks so that a request costs a slice of a buffer, not a system call).
import { randomFillSync } from 'node:crypto';
import type { SpanContext, TraceContext, Tracing } from '../http/trace-context.ts';
import type { Sampler } from './settings.ts';

/** 2^52: the trace id's last 13 hex digits, read as a number, stay exact in a double. */
const RANDOM_SPAN = 2 ** 52;

/**
 * Pure, rule "sampling by the trace id's ratio": a trace is sampled when the number its last 13
 * hex digits spell is below ratio × 2^52 (the rightmost digits, which W3C Trace Context level 2
 * makes the random part), so every replica decides the same for one trace, and a trace sampled at
 * a ratio is sampled at every larger one. A parent-based sampler follows the client's sampled
 * flag when the client sent a traceparent, and uses the ratio only for a trace it starts.
 */
function isSampled(sampler: Sampler, traceId: string, client: TraceContext | undefined): boolean {
  if (sampler.parentBased && client !== undefined) return client.sampled;
  if (sampler.ratio >= 1) return true;
  return parseInt(traceId.slice(-13), 16) < sampler.ratio * RANDOM_SPAN;
}

/** Random lowercase-hex ids, drawn 4 KiB at a time; never all zeros (the spec's invalid id). */
function idSource(): (bytes: 8 | 16) => string {
  const pool = Buffer.alloc(4096);
  let at = pool.length;
  const next = (bytes: number): string => {
    if (at + bytes > pool.length) {
      randomFillSync(pool);
      at = 0;
    }
    const id = pool.toString('hex', at, at + bytes);
    at += bytes;
    return /^0+$/.test(id) ? next(bytes) : id;
  };
  return next;
}

/** The request's span: in the client's trace when it sent one (its span the parent), else a new trace. */
export function tracer(sampler: Sampler, ids = idSource()): Tracing {
  return {
    start(client): SpanContext {
      const traceId = client?.traceId ?? ids(16);
      return { traceId, spanId: ids(8), parentId: client?.parentId, sampled: isSampled(sampler, traceId, client), tracestate: client?.tracestate };
    },
    newSpanId: () => ids(8),
  };
}
