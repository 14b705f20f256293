// What a finished model call is charged against its limits: its tokens (for the per-minute
// window) and its cost (for the budgets). Pure: the call object hands in what the call did.
import { costUsd, type ModelPrice } from '../gateway/prices.ts';
import type { CallSummary } from '../gateway/protocols/protocol.ts';
import { estimateTokens } from './admission.ts';
import type { WorstCase } from './worst-case.ts';

export interface Charge {
  /** Tokens counted in the per-minute window. */
  readonly tokens: number;
  /** Money counted in the budgets (0 when the model has no price). */
  readonly costUsd: number;
  /** What the record says was charged: null when the model has no price. */
  readonly usd: number | null;
  /** The upstream reported no (complete) usage: the figures are estimated (from what it did report, the bytes, or the call's worst case). */
  readonly estimated: boolean;
}

/** What a call did, as far as its charge goes. */
export interface ChargedCall {
  readonly summary: CallSummary | undefined;
  readonly bytesIn: number;
  readonly bytesOut: number;
  /** The call was cut (by its client, the upstream, a timeout or a shutdown) before it ended cleanly. */
  readonly cut: boolean;
  /** It can have cost anything (mayHaveCost): it reached the upstream and was not answered with a complete error. */
  readonly billable: boolean;
  /** The answer was asked for as a stream (a non-streamed generation is finished, and billed, before its first byte). */
  readonly streamed: boolean;
}

const NOTHING: Charge = Object.freeze({ tokens: 0, costUsd: 0, usd: 0, estimated: false });

/**
 * Pure: a call's charge.
 * - Nothing, for a call that cannot have cost anything.
 * - The upstream's usage, when it reported it whole.
 * - The call's worst case, for a call cut before any of its answer arrived, or a non-streamed
 *   call cut before its answer's end (where its usage is): the provider goes on with a
 *   non-streamed generation after its client left, and bills it.
 * - Otherwise (a cut stream, an answer without usage), at least every figure the answer did
 *   report (a stream's input from its first event) and at least the estimate from the bytes that
 *   crossed (estimateTokens), marked as estimated.
 */
export function chargeFor(call: ChargedCall, price: ModelPrice | undefined, worst: WorstCase | undefined): Charge {
  if (!call.billable) return NOTHING;
  const usage = call.summary?.usage ?? null;
  if (call.summary?.usageComplete === true && usage && usage.inputTokens !== null && usage.outputTokens !== null) {
    const counts = { input: usage.inputTokens, output: usage.outputTokens, reasoning: usage.reasoningTokens, cached: usage.cachedTokens, cache_write: usage.cacheWriteTokens };
    const usd = price ? (costUsd(price, counts) ?? null) : null;
    return { tokens: counts.input + counts.output, costUsd: usd ?? 0, usd, estimated: false };
  }
  const nothingReported = usage === null || (usage.inputTokens === null && usage.outputTokens === null);
  // Cut before anything said what it cost: a stream before its first byte, a non-streamed answer
  // before its end (its usage comes last, and the provider billed the whole of it).
  if (call.cut && nothingReported && (call.bytesOut === 0 || !call.streamed) && worst) {
    return { tokens: worst.inputTokens + worst.outputTokens, costUsd: worst.usd, usd: price ? worst.usd : null, estimated: true };
  }
  const input = Math.max(usage?.inputTokens ?? 0, estimateTokens(call.bytesIn));
  const output = Math.max(usage?.outputTokens ?? 0, estimateTokens(call.bytesOut));
  const counts = { input, output, reasoning: usage?.reasoningTokens ?? null, cached: usage?.cachedTokens ?? null, cache_write: usage?.cacheWriteTokens ?? null };
  const usd = price ? (costUsd(price, counts) ?? null) : null;
  return { tokens: input + output, costUsd: usd ?? 0, usd, estimated: true };
}
