// The limits the gateway enforces per workload (--limits FILE): per instance (requests in
// progress, requests and tokens per minute), per run (money), per workflow (money per day), and
// global ceilings over every workload together (the provider's organisation-wide rate limits,
// the day's spend). A per-instance or per-run limit is one number (the default, and the most a
// bot token may ask for) or {"default": N, "max": M} (a token may ask for up to M).
// Strict like the other configuration files; a mistake stops start-up naming the field.
import type { LoweredLimits } from '../auth/identity.ts';
import type { RunLimits } from '../auth/jwt.ts';
import { parseConfigJson } from '../config/config-file.ts';
import { bounded } from '../http/log.ts';
import { isObject } from '../json/keys.ts';

export interface LimitsPolicy {
  /** Requests one instance may have in progress (0: no limit). */
  readonly concurrent: number;
  readonly requestsPerMinute: number;
  /** Input (estimated at admission, then actual) plus output tokens per minute. */
  readonly tokensPerMinute: number;
  /** Money one run may spend, in USD (0: no limit). */
  readonly runBudgetUsd: number;
  /** Money one workflow may spend per UTC day, in USD (0: no limit). */
  readonly workflowBudgetUsdPerDay: number;
  /** The most a bot token may ask for, where it differs from the default ({"default", "max"}; 0: no ceiling). */
  readonly ceilings?: Partial<Record<Lowerable, number>>;
  /** Over every workload together (absent: none). */
  readonly global?: GlobalLimits;
  /** A model without a price under a money budget: refused (absent), or `allowed` (--allow-unpriced-models: its calls count tokens only). */
  readonly unpricedModels?: 'allowed';
  /** What a bot token asked above the file's ceiling, per limit (the ceiling applies): refusals name both. */
  readonly askedAboveCeiling?: Partial<Record<Lowerable, number>>;
  /** The output a call that names no limit (max_tokens, ...) is assumed to reach, for its worst case (absent: ASSUMED_MAX_OUTPUT_TOKENS). */
  readonly assumedMaxOutputTokens?: number;
  /** Each call in progress holds its worst case against the budgets until it is charged (a budget passed by at most one call; fewer calls at once). */
  readonly holdWorstCase?: boolean;
}

/**
 * The output assumed of a call whose body names no limit: as much as the largest models write in
 * one answer (128k tokens), so that its worst case is not an underestimate.
 */
export const ASSUMED_MAX_OUTPUT_TOKENS = 128_000;

/** The limits a bot token may set for its run (within the ceilings). */
export type Lowerable = 'concurrent' | 'requestsPerMinute' | 'tokensPerMinute' | 'runBudgetUsd';

export interface GlobalLimits {
  readonly concurrent: number;
  readonly requestsPerMinute: number;
  readonly tokensPerMinute: number;
  readonly budgetUsdPerDay: number;
}

export const LIMITS_FIELDS: Readonly<Record<string, ReadonlySet<string>>> = {
  '(file)': new Set(['perInstance', 'perRun', 'perWorkflow', 'global', 'perCall']),
  perInstance: new Set(['concurrent', 'requestsPerMinute', 'tokensPerMinute']),
  perRun: new Set(['budgetUsd']),
  perWorkflow: new Set(['budgetUsdPerDay']),
  global: new Set(['concurrent', 'requestsPerMinute', 'tokensPerMinute', 'budgetUsdPerDay']),
  perCall: new Set(['assumedMaxOutputTokens', 'holdWorstCase']),
};

/** Pure: the --limits file, or an error naming the file and the field. */
export function parseLimitsFile(text: string, fileName: string): LimitsPolicy {
  const { doc, fail } = parseConfigJson(text, fileName);
  if (!isObject(doc)) return fail('(file)', 'must be a JSON object with perInstance, perRun, perWorkflow and/or global');
  const section = (name: string): Record<string, unknown> => {
    for (const k of Object.keys(doc)) if (!LIMITS_FIELDS['(file)']!.has(k)) fail(k, 'unknown field (expected perInstance, perRun, perWorkflow, global, perCall)');
    const v = doc[name];
    if (v === undefined) return {};
    if (!isObject(v)) return fail(name, 'must be an object');
    for (const k of Object.keys(v)) if (!LIMITS_FIELDS[name]!.has(k)) fail(`${name}.${k}`, `unknown field (expected ${[...LIMITS_FIELDS[name]!].join(', ')})`);
    return v;
  };
  const num = (s: Record<string, unknown>, where: string, field: string, integer: boolean): number => {
    const v = s[field];
    if (v === undefined) return 0;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || (integer && !Number.isInteger(v))) fail(`${where}.${field}`, `must be a ${integer ? 'whole ' : ''}number ≥ 0 (0: no limit)`);
    return v as number;
  };
  const ceilings: Partial<Record<Lowerable, number>> = {};
  /** One number (default and ceiling) or {"default": N, "max": M}. */
  const lowerable = (s: Record<string, unknown>, where: string, field: string, integer: boolean, key: Lowerable): number => {
    const v = s[field];
    if (!isObject(v)) return num(s, where, field, integer);
    for (const k of Object.keys(v)) if (k !== 'default' && k !== 'max') fail(`${where}.${field}.${k}`, 'unknown field (expected default, max)');
    const def = num(v, `${where}.${field}`, 'default', integer);
    const max = num(v, `${where}.${field}`, 'max', integer);
    if (max > 0 && (def === 0 || def > max)) fail(`${where}.${field}`, `default (${def === 0 ? '0: no limit' : def}) must not be above max (${max})`);
    ceilings[key] = max;
    return def;
  };
  const instance = section('perInstance');
  const run = section('perRun');
  const workflow = section('perWorkflow');
  const global = section('global');
  const perCall = section('perCall');
  const assumed = num(perCall, 'perCall', 'assumedMaxOutputTokens', true);
  const hold = perCall.holdWorstCase;
  if (hold !== undefined && typeof hold !== 'boolean') fail('perCall.holdWorstCase', 'must be true or false');
  const policy = {
    concurrent: lowerable(instance, 'perInstance', 'concurrent', true, 'concurrent'),
    requestsPerMinute: lowerable(instance, 'perInstance', 'requestsPerMinute', true, 'requestsPerMinute'),
    tokensPerMinute: lowerable(instance, 'perInstance', 'tokensPerMinute', true, 'tokensPerMinute'),
    runBudgetUsd: lowerable(run, 'perRun', 'budgetUsd', false, 'runBudgetUsd'),
    workflowBudgetUsdPerDay: num(workflow, 'perWorkflow', 'budgetUsdPerDay', false),
  };
  const globalLimits: GlobalLimits = {
    concurrent: num(global, 'global', 'concurrent', true),
    requestsPerMinute: num(global, 'global', 'requestsPerMinute', true),
    tokensPerMinute: num(global, 'global', 'tokensPerMinute', true),
    budgetUsdPerDay: num(global, 'global', 'budgetUsdPerDay', false),
  };
  return {
    ...policy,
    ...(Object.keys(ceilings).length > 0 ? { ceilings } : {}),
    ...(Object.values(globalLimits).some((v) => v > 0) ? { global: globalLimits } : {}),
    ...(assumed > 0 ? { assumedMaxOutputTokens: assumed } : {}),
    ...(hold === true ? { holdWorstCase: true } : {}),
  };
}

/** Pure: whether any money limit applies (a budget per run, per workflow or over all). */
function hasMoneyLimit(policy: LimitsPolicy): boolean {
  return policy.runBudgetUsd > 0 || policy.workflowBudgetUsdPerDay > 0 || (policy.global?.budgetUsdPerDay ?? 0) > 0 || (policy.ceilings?.runBudgetUsd ?? 0) > 0;
}

/**
 * Pure: what start-up says when a money limit meets models without a price: their calls are
 * refused (the budget cannot count them), or, with --allow-unpriced-models, let through counting
 * tokens only and spending no budget.
 */
export function unpricedWarning(policy: LimitsPolicy, models: readonly { readonly provider: string; readonly model: string }[], priced: (provider: string, model: string) => boolean): string | undefined {
  if (!hasMoneyLimit(policy)) return undefined;
  const unpriced = models.filter((m) => !priced(m.provider, m.model)).map((m) => `${m.provider}/${m.model}`);
  if (unpriced.length === 0) return undefined;
  return policy.unpricedModels === 'allowed'
    ? `--limits sets a money budget, and these models have no price in MODEL_PRICES_FILE; --allow-unpriced-models lets their calls through, counting tokens only and spending no budget: ${unpriced.join(', ')}`
    : `--limits sets a money budget, and these models have no price in MODEL_PRICES_FILE, so their calls are refused (400 price_not_counted) until they are priced there (or allowed uncounted with --allow-unpriced-models): ${unpriced.join(', ')}`;
}

/**
 * Pure: the start-up warning when a money limit meets hosted tools the operator allowed: the
 * provider bills their use apart from tokens (a web search, a container's time, a file search
 * call), and the budget counts only the tokens they bring.
 */
export function hostedToolFeesWarning(policy: LimitsPolicy, hostedTools: ReadonlySet<string>): string | undefined {
  if (!hasMoneyLimit(policy) || hostedTools.size === 0) return undefined;
  return `--limits sets a money budget, and --allow-hosted-tools allows ${[...hostedTools].join(', ')}: what the provider bills per use of a hosted tool (a search, a container's time, a call) is not counted, only the tokens it brings`;
}

/** The first value of a request that the price table cannot price: the field (or header) it is in, and the refusal's message naming the value. */
export interface PriceChange {
  readonly field: string;
  readonly message: string;
}

/** What admission knows of a call's price: its model, whether the price table prices it, and what its checks found (../gateway/check-call.ts). */
export interface CallPricing {
  readonly model: string;
  readonly priced: boolean;
  /** The first value of the request the price table cannot price (../gateway/protocols/pricing.ts). */
  readonly priceChange?: PriceChange;
}

/**
 * Pure: why a call cannot be charged at the price table's rates while a money budget applies
 * (undefined: it can): a model without a price (unless the operator allows unpriced models), or a
 * value of the request that changes the price (../gateway/protocols/pricing.ts). Refused, never
 * mischarged.
 */
export function unpricedCallReason(policy: LimitsPolicy, call: CallPricing): string | undefined {
  if (!hasMoneyLimit(policy)) return undefined;
  if (!call.priced && policy.unpricedModels !== 'allowed') {
    return `the model "${bounded(call.model)}" has no price in the gateway's price table (MODEL_PRICES_FILE), so the budget cannot count its calls; the operator must price it there, or allow unpriced models (--allow-unpriced-models)`;
  }
  return call.priceChange?.message;
}

/** Pure: the most a bot token may ask of a limit: the file's `max`, else its value (undefined: no ceiling, the token's own applies). */
export function tokenCeiling(policy: LimitsPolicy, key: Lowerable): number | undefined {
  const ceiling = policy.ceilings?.[key] ?? policy[key];
  return ceiling === 0 ? undefined : ceiling;
}

/** Each limit a bot token may lower: its claim, the token claim's and the workload policy's name, mint-token's flag, and the field of the --limits file that bounds it. */
const LOWERED: readonly { readonly key: Lowerable; readonly claim: keyof LoweredLimits; readonly tokenClaim: keyof RunLimits; readonly flag: string; readonly field: string }[] = [
  { key: 'runBudgetUsd', claim: 'budgetUsd', tokenClaim: 'budget_usd', flag: '--budget-usd', field: 'perRun.budgetUsd' },
  { key: 'concurrent', claim: 'concurrent', tokenClaim: 'max_concurrent', flag: '--max-concurrent', field: 'perInstance.concurrent' },
  { key: 'requestsPerMinute', claim: 'requestsPerMinute', tokenClaim: 'requests_per_minute', flag: '--requests-per-minute', field: 'perInstance.requestsPerMinute' },
  { key: 'tokensPerMinute', claim: 'tokensPerMinute', tokenClaim: 'tokens_per_minute', flag: '--tokens-per-minute', field: 'perInstance.tokensPerMinute' },
];

/** Pure: the limits a token's `limits` claim (or a workload policy entry's, the same shape) lowers, by the names of LOWERED. */
export function loweredByClaim(claim: RunLimits): LoweredLimits {
  const lowered: { -readonly [K in keyof LoweredLimits]: LoweredLimits[K] } = {};
  for (const row of LOWERED) lowered[row.claim] = claim[row.tokenClaim];
  return lowered;
}

/** A limit asked above the --limits file's ceiling: how mint-token and the workload policy name it, what was asked, the ceiling and its field. */
export interface AboveCeiling {
  readonly flag: string;
  readonly tokenClaim: string;
  readonly asked: number;
  readonly ceiling: number;
  readonly field: string;
}

/** Pure: each limit of `asked` above its ceiling in `policy` (the gateway would apply the ceiling instead); empty when every one is within. */
export function limitsAboveCeiling(policy: LimitsPolicy, asked: LoweredLimits): AboveCeiling[] {
  return LOWERED.flatMap(({ key, claim, tokenClaim, flag, field }) => {
    const value = asked[claim];
    const ceiling = tokenCeiling(policy, key);
    return value !== undefined && ceiling !== undefined && value > ceiling ? [{ flag, tokenClaim, asked: value, ceiling, field }] : [];
  });
}

/**
 * Pure: why mint-token refuses a token that asks more than the --limits file allows (`fileName`),
 * naming each limit, its ceiling and the file's field; undefined when every ask is within. The
 * gateway would apply the ceiling silently: an orchestrator asking more has a wrong idea of it.
 */
export function aboveCeilingReason(policy: LimitsPolicy, asked: LoweredLimits, fileName: string): string | undefined {
  const over = limitsAboveCeiling(policy, asked).map((a) => `${a.flag} ${a.asked} is above the ceiling ${a.ceiling} of ${fileName} (${a.field})`);
  return over.length === 0 ? undefined : `mint-token: ${over.join('; ')}; the gateway would apply the ceiling, so ask at most that`;
}
