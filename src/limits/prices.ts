// Estimated cost of a model call from a price table (MODEL_PRICES_FILE): USD per million
// tokens, per token type, per provider and model. A model without a price gets no cost, never a
// guess.
import { parseConfigJson, type FieldFailure } from '../config/config-file.ts';
import { isObject } from '../json/keys.ts';
import { toMicroUsd } from './admission.ts';

/** The tokens a call's answer reported, by type (null: not reported); what a price is applied to. */
export interface TokenUsage {
  /** Input tokens, cached ones included (OpenAI's `prompt_tokens` / `input_tokens`). */
  readonly inputTokens: number | null;
  /** Output tokens, reasoning ones included. */
  readonly outputTokens: number | null;
  readonly reasoningTokens: number | null;
  /** Input tokens read from the provider's prompt cache (part of inputTokens). */
  readonly cachedTokens: number | null;
  /** Input tokens written to the provider's prompt cache (part of inputTokens; Anthropic). */
  readonly cacheWriteTokens: number | null;
}

export interface ModelPrice {
  readonly input: number;
  readonly output: number;
  /** Cached input tokens (cache reads); defaults to the input price. */
  readonly cached: number | undefined;
  /** Reasoning tokens; defaults to the output price. */
  readonly reasoning: number | undefined;
  /** Input tokens written to the prompt cache (Anthropic); defaults to the input price. */
  readonly cacheWrite: number | undefined;
}

/** A price by provider and model. */
export interface PriceTable {
  get(provider: string, model: string): ModelPrice | undefined;
}

export const PRICE_FIELDS = new Set(['input', 'output', 'cached', 'reasoning', 'cache_write']);

function parsePrice(e: unknown, where: string, fail: FieldFailure): ModelPrice {
  if (!isObject(e)) return fail(where, 'must be an object');
  for (const k of Object.keys(e)) if (!PRICE_FIELDS.has(k)) fail(`${where}.${k}`, 'unknown field (input, output, cached, reasoning, cache_write)');
  const num = (k: string, required: boolean): number | undefined => {
    const v = e[k];
    if (v === undefined && !required) return undefined;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) return fail(`${where}.${k}`, 'must be a non-negative number (USD per million tokens)');
    return v;
  };
  return { input: num('input', true)!, output: num('output', true)!, cached: num('cached', false), reasoning: num('reasoning', false), cacheWrite: num('cache_write', false) };
}

/**
 * `{"providers": {"openai": {"gpt-4o": {"input": 2.5, "cached": 1.25, "output": 10}}, ...}}`,
 * or the flat form `{"gpt-4o": {...}}`, which prices a model whichever provider serves it (a
 * model ID belongs to one provider).
 */
export function parsePrices(text: string, fileName: string): PriceTable {
  const { doc, fail } = parseConfigJson(text, fileName);
  if (!isObject(doc)) return fail('(file)', 'must be an object: {"providers": {provider: {model: prices}}} or {model: prices}');
  const byProvider = new Map<string, Map<string, ModelPrice>>();
  const anyProvider = new Map<string, ModelPrice>();
  if (Object.hasOwn(doc, 'providers')) {
    for (const k of Object.keys(doc)) if (k !== 'providers') fail(k, 'unknown field next to "providers"');
    if (!isObject(doc.providers)) return fail('providers', 'must be an object of provider name to models');
    for (const [provider, models] of Object.entries(doc.providers)) {
      if (!isObject(models)) return fail(`providers.${provider}`, 'must be an object of model ID to prices');
      byProvider.set(provider, new Map(Object.entries(models).map(([model, e]) => [model, parsePrice(e, `providers.${provider}.${model}`, fail)])));
    }
  } else {
    for (const [model, e] of Object.entries(doc)) anyProvider.set(model, parsePrice(e, model, fail));
  }
  return { get: (provider, model) => byProvider.get(provider)?.get(model) ?? anyProvider.get(model) };
}

export interface TokenCounts {
  readonly input: number | null;
  readonly output: number | null;
  readonly reasoning: number | null;
  readonly cached: number | null;
  readonly cache_write: number | null;
}

/**
 * Pure: US dollars as the records write them: rounded to the micro-dollar, the unit the limits'
 * stores charge in (toMicroUsd), so that 0.1 + 0.2 reads 0.3, not 0.30000000000000004.
 */
export function microDollars(usd: number): number {
  return toMicroUsd(usd) / 1e6;
}

/**
 * The counts nest: cache reads and cache writes are part of the input, reasoning tokens part of
 * the output. Each token is priced once. Undefined when the counts are incomplete.
 */
export function costUsd(price: ModelPrice, t: TokenCounts): number | undefined {
  if (t.input === null || t.output === null) return undefined;
  const cached = Math.min(t.cached ?? 0, t.input);
  const cacheWrite = Math.min(t.cache_write ?? 0, t.input - cached);
  const reasoning = Math.min(t.reasoning ?? 0, t.output);
  const micro =
    (t.input - cached - cacheWrite) * price.input +
    cached * (price.cached ?? price.input) +
    cacheWrite * (price.cacheWrite ?? price.input) +
    (t.output - reasoning) * price.output +
    reasoning * (price.reasoning ?? price.output);
  return micro / 1_000_000;
}
