// The most a model call may cost, held against the budgets while it is in progress and charged
// when the call was cut before anything told what it cost (the provider may finish the generation
// and bill it). Pure.
import { costUsd, type ModelPrice } from './prices.ts';
import { estimateTokens } from './admission.ts';

/** The output-limit fields of the protocols: chat completions, Responses, Messages (and the clouds' Messages). */
const MAX_OUTPUT_FIELDS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'] as const;

/**
 * Pure: the most output the body allows: the largest of its output-limit fields that is a whole
 * number above 0 (a body naming two is held to the larger), or undefined when it names none.
 */
export function maxOutputTokens(body: Readonly<Record<string, unknown>>): number | undefined {
  let most: number | undefined;
  for (const field of MAX_OUTPUT_FIELDS) {
    const v = body[field];
    if (typeof v === 'number' && Number.isSafeInteger(v) && v > 0) most = Math.max(most ?? 0, v);
  }
  return most;
}

/** What a call's worst case is made of: tokens in (estimated from the body) and the most out. */
export interface WorstCase {
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** At the model's prices; 0 for a model without a price. */
  readonly usd: number;
}

/**
 * Pure: a call's worst case: its input estimated from the body's size (estimateTokens) and the
 * most output it allows (or `assumedMaxOutputTokens` when the body names no limit) times the
 * number of times the provider generates it (`outputFactor`: `n` choices, OUTPUT_MULTIPLIERS),
 * at the model's prices. Input read from images or PDFs can exceed the estimate: the bound says so.
 */
export function worstCase(bodyBytes: number, maxOutput: number | undefined, assumedMaxOutputTokens: number, price: ModelPrice | undefined, outputFactor = 1): WorstCase {
  const inputTokens = estimateTokens(bodyBytes);
  const outputTokens = (maxOutput ?? assumedMaxOutputTokens) * outputFactor;
  const usd = price ? (costUsd(price, { input: inputTokens, output: outputTokens, reasoning: null, cached: null, cache_write: null }) ?? 0) : 0;
  return { inputTokens, outputTokens, usd };
}
