// What a finished model call is charged against its limits: its tokens (for the per-minute
// window) and its cost (for the budgets). Pure: the call object hands in what the call did.
import { costUsd, type ModelPrice, type TokenUsage } from './prices.ts';
import { estimateTokens } from './admission.ts';
import type { WorstCase } from './worst-case.ts';

/**
 * Which rule set a call's charge, for its record (`charge_basis`):
 * - `not_sent`: no byte of the request can have reached the provider (a refused connect, a name
 *   that did not resolve, a failed TLS handshake, an egress proxy that refused the tunnel, a
 *   connect timeout): nothing.
 * - `error_answer`: the provider answered with a complete error, which it does not bill (an
 *   agent's retries of an upstream 429 must not eat its budget), or the call ended while waiting
 *   to try again after one: nothing.
 * - `usage`: the upstream's usage, reported whole.
 * - `worst_case`: the call was cut before anything said what it cost.
 * - `estimate`: what its answer reported and the bytes that crossed.
 */
export type ChargeBasis = 'not_sent' | 'error_answer' | 'usage' | 'worst_case' | 'estimate';

export interface Charge {
  /** Tokens counted in the per-minute window. */
  readonly tokens: number;
  /** Money counted in the budgets (0 when the model has no price). */
  readonly costUsd: number;
  /** What the record says was charged: null when the model has no price. */
  readonly usd: number | null;
  /** The upstream reported no (complete) usage: the figures are estimated (from what it did report, the bytes, or the call's worst case). */
  readonly estimated: boolean;
  readonly basis: ChargeBasis;
}

/** What a call did, as far as its charge goes. */
export interface ChargedCall {
  /** What the upstream reported of the usage (a protocol's call summary), if anything. */
  readonly summary: { readonly usage: TokenUsage | null; readonly usageComplete: boolean } | undefined;
  readonly bytesIn: number;
  readonly bytesOut: number;
  /** The call was cut (by its client, the upstream, a timeout or a shutdown) before it ended cleanly. */
  readonly cut: boolean;
  /**
   * A byte of the request may have reached the provider: the last attempt's connection to it was
   * up (TCP, and TLS where it applies) when the request went out on it.
   */
  readonly reached: boolean;
  /** The status the client was answered (0: none). */
  readonly status: number;
  /** The call ended between attempts, after one the provider cannot have billed (a refused connect, a complete error answer). */
  readonly betweenAttempts: boolean;
  /** The answer was asked for as a stream (a non-streamed generation is finished, and billed, before its first byte). */
  readonly streamed: boolean;
}

const nothing = (basis: 'not_sent' | 'error_answer'): Charge => Object.freeze({ tokens: 0, costUsd: 0, usd: 0, estimated: false, basis });
const NOT_SENT = nothing('not_sent');
const ERROR_ANSWER = nothing('error_answer');

/**
 * Pure: a call's charge.
 * - Nothing, for a call no byte of which can have reached the provider: an outage (a provider
 *   refusing connections, a name that does not resolve, a bad certificate, an egress proxy
 *   refusing the tunnel) spends no budget.
 * - Nothing, for a call the provider answered with a complete error, or that ended waiting to
 *   retry after one.
 * - The upstream's usage, when it reported it whole.
 * - The call's worst case, for a call cut before any of its answer arrived, or a non-streamed
 *   call cut before its answer's end (where its usage is): the provider goes on with a
 *   non-streamed generation after its client left, and bills it.
 * - Otherwise (a cut stream, an answer without usage), at least every figure the answer did
 *   report (a stream's input from its first event) and at least the estimate from the bytes that
 *   crossed (estimateTokens), marked as estimated.
 */
export function chargeFor(call: ChargedCall, price: ModelPrice | undefined, worst: WorstCase | undefined): Charge {
  if (!call.reached) return NOT_SENT;
  if (call.betweenAttempts || (!call.cut && call.status >= 400)) return ERROR_ANSWER;
  const usage = call.summary?.usage ?? null;
  if (call.summary?.usageComplete === true && usage && usage.inputTokens !== null && usage.outputTokens !== null) {
    const counts = { input: usage.inputTokens, output: usage.outputTokens, reasoning: usage.reasoningTokens, cached: usage.cachedTokens, cache_write: usage.cacheWriteTokens };
    const usd = price ? (costUsd(price, counts) ?? null) : null;
    return { tokens: counts.input + counts.output, costUsd: usd ?? 0, usd, estimated: false, basis: 'usage' };
  }
  const nothingReported = usage === null || (usage.inputTokens === null && usage.outputTokens === null);
  // Cut before anything said what it cost: a stream before its first byte, a non-streamed answer
  // before its end (its usage comes last, and the provider billed the whole of it).
  if (call.cut && nothingReported && (call.bytesOut === 0 || !call.streamed) && worst) {
    return { tokens: worst.inputTokens + worst.outputTokens, costUsd: worst.usd, usd: price ? worst.usd : null, estimated: true, basis: 'worst_case' };
  }
  const input = Math.max(usage?.inputTokens ?? 0, estimateTokens(call.bytesIn));
  const output = Math.max(usage?.outputTokens ?? 0, estimateTokens(call.bytesOut));
  const counts = { input, output, reasoning: usage?.reasoningTokens ?? null, cached: usage?.cachedTokens ?? null, cache_write: usage?.cacheWriteTokens ?? null };
  const usd = price ? (costUsd(price, counts) ?? null) : null;
  return { tokens: input + output, costUsd: usd ?? 0, usd, estimated: true, basis: 'estimate' };
}
