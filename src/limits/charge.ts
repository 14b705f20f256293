// What a finished model call is charged against its limits: its tokens (for the per-minute
// window) and its cost (for the budgets). Pure: the handler hands in what the call did.
import { costUsd, type ModelPrice } from '../gateway/prices.ts';
import type { CallSummary } from '../gateway/protocols/protocol.ts';
import { estimateTokens } from './admission.ts';

export interface Charge {
  /** Tokens counted in the per-minute window. */
  readonly tokens: number;
  /** Money counted in the budgets (0 when the model has no price). */
  readonly costUsd: number;
  /** What the record says was charged: null when the model has no price. */
  readonly usd: number | null;
  /** The upstream reported no (complete) usage: the figures are estimated from the bytes. */
  readonly estimated: boolean;
}

const NOTHING: Charge = Object.freeze({ tokens: 0, costUsd: 0, usd: 0, estimated: false });

/**
 * Pure: a call's charge. A call that cannot have cost anything (`billable` false: never sent, or
 * answered with a complete error) is charged nothing. Otherwise the upstream's usage when it
 * reported it whole, else an estimate from the bytes that crossed (estimateTokens: about 4 bytes
 * a token), marked as estimated.
 */
export function chargeFor(summary: CallSummary | undefined, bytesIn: number, bytesOut: number, price: ModelPrice | undefined, billable: boolean): Charge {
  if (!billable) return NOTHING;
  const usage = summary?.usage;
  if (summary?.usageComplete === true && usage && usage.inputTokens !== null && usage.outputTokens !== null) {
    const counts = { input: usage.inputTokens, output: usage.outputTokens, reasoning: usage.reasoningTokens, cached: usage.cachedTokens, cache_write: usage.cacheWriteTokens };
    const usd = price ? (costUsd(price, counts) ?? null) : null;
    return { tokens: counts.input + counts.output, costUsd: usd ?? 0, usd, estimated: false };
  }
  const input = estimateTokens(bytesIn);
  const output = estimateTokens(bytesOut);
  const usd = price ? (costUsd(price, { input, output, reasoning: null, cached: null, cache_write: null }) ?? null) : null;
  return { tokens: input + output, costUsd: usd ?? 0, usd, estimated: true };
}
