// What changes the price of a model call besides its model and its tokens. The price table
// (MODEL_PRICES_FILE) holds one rate per token type and model; a request can ask the provider to
// bill it at other rates (a priority or faster tier, a region, a longer-lived cache, long-context
// or audio rates). Under a money budget such a call is refused, never mischarged
// (unpricedCallReason, at admission). This module is the list: one table per wire protocol, a row
// per field, saying which of its values bill at the table's rates and what the others cost, from
// the provider's pricing page. Each row reads its field in every form the provider accepts it; a
// value of another type than the API's counts as set, never as absent.
//
// Not in the tables, and why:
// - The provider's own setup, which the operator prices: an OpenAI project's default tier (what
//   "auto" means), a data-residency base URL (us.api.openai.com and others bill 10% more for
//   newer models), a Vertex region, a Bedrock inference profile (it is in the model id, so the
//   price table keys it apart).
// - Headers the gateway does not forward (Bedrock's service tier and latency-optimized headers):
//   they never reach the provider. The only price header forwarded is anthropic-beta (a row).
// - Hosted tools' per-use fees (a web search, a code-execution hour): off unless the operator
//   allows the tool (--allow-hosted-tools); start-up says the budget does not count those fees.
// - What the usage reports and the table prices: cache reads and 5-minute cache writes,
//   reasoning tokens, rejected predicted tokens (they count within the output limit). A value
//   that multiplies the output (`n` choices) is priced by the usage too, but it multiplies what a
//   call cut before its usage may have cost: it has its own table, OUTPUT_MULTIPLIERS, below.
// The blocks whose `input` is the model's arguments to a tool (tool_use, server_tool_use), not
// instructions to the provider: the content checks skip the same.
import { ARGUMENT_BLOCKS } from './content.ts';
import type { PriceChange } from '../../limits/policy.ts';
import type { ApiName } from './protocol.ts';
import { isObject } from '../../json/keys.ts';

export interface PriceChanger {
  /** The field (or header) as the provider documents it. */
  readonly field: string;
  /** Where the value is read: the parsed body, or the request's headers (lower-case names). */
  readonly in: 'body' | 'header';
  /** Every value the field has in this request (the body or the headers), in each form it can take (none: an empty list). */
  readonly values: (source: unknown) => readonly unknown[];
  /** Whether a value bills at the price table's rates. */
  readonly priced: (value: unknown) => boolean;
  /** What the provider bills for the other values. */
  readonly why: string;
  /** What to send instead. */
  readonly instead: string;
}


/** Pure: a top-level body field's value, when present. */
const topLevel = (name: string) => (body: unknown): readonly unknown[] => {
  const v = isObject(body) ? body[name] : undefined;
  return v === undefined ? [] : [v];
};

/** Pure: a predicate that prices exactly these strings. */
const pricedAs = (...priced: string[]) => (v: unknown): boolean => typeof v === 'string' && priced.includes(v);

/**
 * Pure: the betas an `anthropic_beta` body field or an `anthropic-beta` header names: a string is
 * a comma-separated list (as the header is; Node joins repeated header lines with ", "), an array
 * a list of strings. Any other form is kept whole, so that it counts as unpriced.
 */
function betaNames(value: unknown): readonly unknown[] {
  if (value === undefined) return [];
  const list = typeof value === 'string' ? value.split(',') : Array.isArray(value) ? value : [value];
  return list.map((b) => (typeof b === 'string' ? b.trim() : b));
}

/** Betas that bill at other rates: the 1M-token context window bills a prompt over 200k tokens at long-context rates. */
const LONG_CONTEXT_BETA = /^context-1m-/i;
const LONG_CONTEXT: Pick<PriceChanger, 'priced' | 'why' | 'instead'> = {
  priced: (b) => typeof b === 'string' && !LONG_CONTEXT_BETA.test(b),
  why: 'bills long prompts at other rates than the budget counts (context-1m: long-context rates past 200k input tokens)',
  instead: 'leave the context-1m beta out',
};

/**
 * Pure: every `cache_control.ttl` of a Messages body, wherever Anthropic reads one (the top level,
 * system blocks, message content blocks, tool use and tool result blocks and the blocks inside a
 * result, tools) and anywhere else an object holds one, but inside the model's own tool arguments
 * (a tool_use block's `input`). A `cache_control` that is not an object is kept whole (unpriced);
 * one without a ttl is the default, 5 minutes.
 */
function cacheTtls(body: unknown): readonly unknown[] {
  const found: unknown[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) {
      for (const x of v) walk(x);
      return;
    }
    if (!isObject(v)) return;
    const cc = v.cache_control;
    if (cc !== undefined && cc !== null) {
      if (!isObject(cc)) found.push(cc);
      else if (cc.ttl !== undefined) found.push(cc.ttl);
    }
    const args = typeof v.type === 'string' && ARGUMENT_BLOCKS.has(v.type);
    for (const key of Object.keys(v)) if (typeof v[key] === 'object' && !(args && key === 'input')) walk(v[key]);
  };
  walk(body);
  return found;
}

/** Pure: the `type` of every content part of a chat completions body's messages. */
function chatContentTypes(body: unknown): readonly unknown[] {
  const messages = isObject(body) && Array.isArray(body.messages) ? body.messages : [];
  return messages.flatMap((m) => (isObject(m) && Array.isArray(m.content) ? m.content.map((part) => (isObject(part) ? part.type : part)) : []));
}

/**
 * OpenAI's service tiers (https://platform.openai.com/docs/api-reference/chat/create#chat-create-service_tier,
 * https://openai.com/api-priority-processing/): priority processing (which Codex calls fast) bills
 * about twice the standard rates, scale tier draws on units bought apart; flex bills half, so
 * counting it at the table's standard rates over-counts, the safe side. "auto" (and null, the
 * API's default) is the project's default tier, which the operator prices.
 */
const OPENAI_SERVICE_TIER: PriceChanger = {
  field: 'service_tier',
  in: 'body',
  values: topLevel('service_tier'),
  priced: (v) => v === null || pricedAs('auto', 'default', 'flex')(v),
  why: 'bills at other rates than the standard ones the budget counts (priority processing, scale tier)',
  instead: 'send "auto", "default" or "flex", or leave it out',
};

/**
 * The price-changing values of each wire protocol. The clouds' Messages routes (Bedrock, Vertex)
 * are Messages: their bodies carry the same fields, and `anthropic_beta` in the body is how they
 * take betas.
 */
export const PRICE_CHANGERS: Readonly<Record<ApiName, readonly PriceChanger[]>> = {
  chat_completions: [
    OPENAI_SERVICE_TIER,
    // A stream reports its usage only when asked (https://platform.openai.com/docs/api-reference/chat/create#chat-create-stream_options);
    // without it the budget could count only the bytes relayed, never the hidden reasoning tokens
    // the provider bills.
    {
      field: 'stream_options.include_usage',
      in: 'body',
      values: (body) => (isObject(body) && body.stream === true ? [isObject(body.stream_options) ? (body.stream_options.include_usage ?? 'absent') : 'absent'] : []),
      priced: (v) => v === true,
      why: 'leaves the stream without its usage, so the budget could count only its bytes, not the reasoning tokens the provider bills',
      instead: 'send "stream_options": {"include_usage": true} (opencode does; an OpenAI SDK client passes it in stream_options)',
    },
    // Audio output bills audio tokens at the model's audio rates, several times its text rates,
    // which the price table does not hold (https://platform.openai.com/docs/guides/audio,
    // https://platform.openai.com/docs/pricing).
    {
      field: 'modalities',
      in: 'body',
      values: topLevel('modalities'),
      priced: (v) => v === null || (Array.isArray(v) && v.every((m) => m === 'text')),
      why: 'asks for audio output, billed at the model\'s audio rates, which the budget does not count',
      instead: 'ask for ["text"] or leave it out',
    },
    {
      field: 'audio',
      in: 'body',
      values: topLevel('audio'),
      priced: (v) => v === null,
      why: 'asks for audio output, billed at the model\'s audio rates, which the budget does not count',
      instead: 'leave it out',
    },
    // Audio input bills at the audio rates too (same pages).
    {
      field: 'messages[].content[].type',
      in: 'body',
      values: chatContentTypes,
      priced: (v) => v !== 'input_audio',
      why: 'sends audio, billed at the model\'s audio rates, which the budget does not count',
      instead: 'send text (a transcript) instead',
    },
  ],
  responses: [OPENAI_SERVICE_TIER],
  messages: [
    // Anthropic's service tiers (https://docs.anthropic.com/en/api/service-tiers): "auto" uses
    // Priority Tier capacity only where the organisation bought it, which the operator prices.
    {
      field: 'service_tier',
      in: 'body',
      values: topLevel('service_tier'),
      priced: pricedAs('auto', 'standard_only'),
      why: 'asks for a capacity tier billed at other rates than the ones the budget counts',
      instead: 'send "auto" or "standard_only", or leave it out',
    },
    // Fast mode bills at six times the standard rates
    // (https://platform.claude.com/docs/en/about-claude/pricing#fast-mode-pricing).
    {
      field: 'speed',
      in: 'body',
      values: topLevel('speed'),
      priced: pricedAs('standard'),
      why: '(fast mode) is billed at a multiple of the rates the budget counts',
      instead: 'leave it out or send "standard"',
    },
    // US-only inference bills at 1.1 times the rates
    // (https://platform.claude.com/docs/en/build-with-claude/data-residency).
    {
      field: 'inference_geo',
      in: 'body',
      values: topLevel('inference_geo'),
      priced: pricedAs('global'),
      why: 'bills at a multiple of the rates the budget counts (US-only inference: 1.1 times)',
      instead: 'leave it out or send "global"',
    },
    // The 1M-token context window bills a prompt over 200k tokens at long-context rates (twice
    // the input rate, 1.5 times the output rate)
    // (https://platform.claude.com/docs/en/about-claude/pricing#long-context-pricing). Bedrock and
    // Vertex take betas in the body, as an array (a string is read as a comma-separated list).
    {
      field: 'anthropic_beta',
      in: 'body',
      values: (body) => betaNames(isObject(body) ? body.anthropic_beta : undefined),
      ...LONG_CONTEXT,
    },
    {
      field: 'anthropic-beta',
      in: 'header',
      values: (headers) => {
        const value = isObject(headers) ? headers['anthropic-beta'] : undefined;
        return betaNames(Array.isArray(value) ? value.join(',') : value);
      },
      ...LONG_CONTEXT,
    },
    // A 1-hour cache write bills at twice the input rate; the price table prices cache writes at
    // one rate, the 5-minute one (cache_write)
    // (https://platform.claude.com/docs/en/build-with-claude/prompt-caching#pricing). Refused
    // rather than priced from usage.cache_creation.ephemeral_1h_input_tokens: no agent recorded
    // here asks for it, and pricing it would need a second cache-write rate in every price entry.
    {
      field: 'cache_control.ttl',
      in: 'body',
      values: cacheTtls,
      priced: pricedAs('5m'),
      why: 'asks for a 1-hour cache, whose writes bill at twice the input rate; the budget counts 5-minute cache writes only',
      instead: 'leave the ttl out or send "5m"',
    },
  ],
};

/** A value for a message: its JSON, printable ASCII, at most 64 characters. */
function valueShown(value: unknown): string {
  const text = (JSON.stringify(value) ?? String(value)).replace(/[^\x20-\x7e]/g, '?');
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}

/** Pure: the first value of `source` (the parsed body, or the request's headers) that a row of `api`'s table cannot price. */
export function priceChange(api: ApiName, where: PriceChanger['in'], source: unknown): PriceChange | undefined {
  for (const row of PRICE_CHANGERS[api]) {
    if (row.in !== where) continue;
    for (const value of row.values(source)) {
      if (row.priced(value)) continue;
      const subject = row.in === 'header' ? `the ${row.field} header's ${valueShown(value)}` : `"${row.field}": ${valueShown(value)}`;
      return { field: row.field, message: `${subject} ${row.why}; ${row.instead}` };
    }
  }
  return undefined;
}

/**
 * A request value that makes the provider generate, and bill, the output more than once: a call's
 * worst case (what it holds, and is charged when cut before its usage) is its output limit times
 * the factor. Under a money budget a factor above 1 is refused as a price change: the budget's
 * bound is one call's worst case, and a factor would multiply it (by up to 128 for `n`).
 */
export interface OutputMultiplier {
  /** The field as the provider documents it. */
  readonly field: string;
  /** The value this body gives it (undefined: absent). */
  readonly value: (body: unknown) => unknown;
  /** The largest factor the API accepts: a value that is not a whole number from 1 to this is counted as this. */
  readonly max: number;
  readonly why: string;
  readonly instead: string;
}

/**
 * The output multipliers of each wire protocol, checked against each API's reference:
 * - chat completions: `n`, the number of choices, each generated up to the output limit and billed
 *   (https://platform.openai.com/docs/api-reference/chat/create#chat-create-n; 1 to 128).
 * - Responses: none; it generates one answer per call (no `n`), and its hosted tools' calls are
 *   refused unless allowed (their fees are apart, start-up says so).
 * - Messages (and the clouds' Messages): none; one message per call.
 * Predicted outputs' rejected tokens count within the output limit, so they multiply nothing.
 */
export const OUTPUT_MULTIPLIERS: Readonly<Record<ApiName, readonly OutputMultiplier[]>> = {
  chat_completions: [
    {
      field: 'n',
      value: (body) => (isObject(body) ? body.n : undefined),
      max: 128,
      why: 'makes the provider generate and bill that many choices, each up to the output limit, and the budget bounds one call\'s worst case',
      instead: 'send 1 or leave it out, and make one call per choice',
    },
  ],
  responses: [],
  messages: [],
};

/** How many times over a body asks for its output, and, when more than once, the price change that says why a money budget refuses it. */
export interface OutputMultiple {
  readonly factor: number;
  readonly change?: PriceChange;
}

/** Pure: the factor a body multiplies its output by (the product of its protocol's rows; absent or null: 1), and the first row above 1. */
export function outputMultiple(api: ApiName, body: unknown): OutputMultiple {
  let factor = 1;
  let change: PriceChange | undefined;
  for (const row of OUTPUT_MULTIPLIERS[api]) {
    const v = row.value(body);
    if (v === undefined || v === null || v === 1) continue;
    const f = typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= row.max ? v : row.max;
    factor *= f;
    change ??= { field: row.field, message: `"${row.field}": ${valueShown(v)} ${row.why}; ${row.instead}` };
  }
  return change === undefined ? { factor } : { factor, change };
}

/** Pure: the first value of a call the price table cannot price: its body's, then its headers' (only the Messages routes forward `anthropic-beta`). */
export function callPriceChange(api: ApiName, body: PriceChange | undefined, headers: Readonly<Record<string, string | string[] | undefined>>): PriceChange | undefined {
  return body ?? priceChange(api, 'header', headers);
}
