// Estimated cost of a model call from a price table (MODEL_PRICES_FILE): USD per million
// tokens, per token type, per model. A model without a price gets no cost, never a guess.
import { isObject, parseConfigJson } from '../config/config-file.ts';

export interface ModelPrice {
  readonly input: number;
  readonly output: number;
  /** Cached input tokens; defaults to the input price. */
  readonly cached: number | undefined;
  /** Reasoning tokens; defaults to the output price. */
  readonly reasoning: number | undefined;
}

const PRICE_FIELDS = new Set(['input', 'output', 'cached', 'reasoning']);

/** `{"gpt-4o": {"input": 2.5, "cached": 1.25, "output": 10}, ...}` */
export function parsePrices(text: string, fileName: string): Map<string, ModelPrice> {
  const { doc, fail } = parseConfigJson(text, fileName);
  if (!isObject(doc)) return fail('(file)', 'must be an object of model ID to prices');
  const prices = new Map<string, ModelPrice>();
  for (const [model, e] of Object.entries(doc)) {
    if (!isObject(e)) return fail(model, 'must be an object');
    for (const k of Object.keys(e)) if (!PRICE_FIELDS.has(k)) fail(`${model}.${k}`, 'unknown field (input, output, cached, reasoning)');
    const num = (k: string, required: boolean): number | undefined => {
      const v = e[k];
      if (v === undefined && !required) return undefined;
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) return fail(`${model}.${k}`, 'must be a non-negative number (USD per million tokens)');
      return v;
    };
    prices.set(model, { input: num('input', true)!, output: num('output', true)!, cached: num('cached', false), reasoning: num('reasoning', false) });
  }
  return prices;
}

export interface TokenCounts {
  readonly input: number | null;
  readonly output: number | null;
  readonly reasoning: number | null;
  readonly cached: number | null;
}

/**
 * OpenAI's counts nest: cached tokens are part of the input, reasoning tokens part of the
 * output. Each token is priced once. Undefined when the counts are incomplete.
 */
export function costUsd(price: ModelPrice, t: TokenCounts): number | undefined {
  if (t.input === null || t.output === null) return undefined;
  const cached = Math.min(t.cached ?? 0, t.input);
  const reasoning = Math.min(t.reasoning ?? 0, t.output);
  const micro =
    (t.input - cached) * price.input +
    cached * (price.cached ?? price.input) +
    (t.output - reasoning) * price.output +
    reasoning * (price.reasoning ?? price.output);
  return micro / 1_000_000;
}
