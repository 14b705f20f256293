// The end of a model call, an HTTP call (call.ts) and a WebSocket turn (socket-turn.ts) alike:
// the bytes it held given back, its limits slot released with what it cost, then its record and
// span. Written once so that a charge rule holds for both transports.
import type { Reservation } from '../limits/admission.ts';
import { chargeFor, type Charge } from '../limits/charge.ts';
import type { PriceTable } from '../limits/prices.ts';
import type { WorstCase } from '../limits/worst-case.ts';
import type { Outcome, SpanSink } from '../http/lifecycle.ts';
import { callFailure, modelRecord, type ModelCallState, type ModelRequestRecord, type ModelSpanFacts } from './record.ts';

export interface SettleContext {
  readonly record: (rec: ModelRequestRecord) => void;
  readonly prices?: PriceTable;
  readonly trace?: SpanSink<ModelRequestRecord, ModelSpanFacts>;
}

/** What the call held and how far it got, besides its state. */
export interface Held {
  /** The request body's bytes in the process's count (already given back once the answer began). */
  readonly body: { release(): void } | undefined;
  readonly reservation: Reservation | undefined;
  readonly worst: WorstCase | undefined;
  /** A byte of the last attempt may have reached the provider (chargeFor). */
  readonly reached: boolean;
  /** The call ended while it waited to retry. */
  readonly betweenAttempts: boolean;
}

/** Once per call: the body's bytes given back, the slot released with the call's charge, then the record (and span): both come back even if recording fails. The charge, if one was made. */
export function settleModelCall(ctx: SettleContext, call: ModelCallState & ModelSpanFacts, held: Held, outcome: Outcome): Charge | undefined {
  let charge: Charge | undefined;
  try {
    held.body?.release();
    if (held.reservation) {
      const failure = callFailure(call.exchange.failure, call.summary);
      const price = call.provider && call.model ? ctx.prices?.get(call.provider.config.name, call.model) : undefined;
      const charged = { summary: call.summary, bytesIn: call.bytesIn, bytesOut: call.exchange.bytesOut, cut: failure !== undefined, reached: held.reached, status: outcome.status, betweenAttempts: held.betweenAttempts, streamed: call.stream };
      charge = chargeFor(charged, price, held.worst);
      held.reservation.release({ tokens: charge.tokens, costUsd: charge.costUsd });
    }
  } finally {
    const rec = modelRecord(call, outcome, charge, performance.now());
    ctx.record(rec);
    if (call.span?.sampled) ctx.trace?.span(rec, call);
  }
  return charge;
}
