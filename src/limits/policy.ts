// The limits the gateway enforces per workload (--limits FILE): per instance (requests in
// progress, requests and tokens per minute), per run (money), per workflow (money per day), and
// global ceilings over every workload together (the provider's organisation-wide rate limits,
// the day's spend). A per-instance or per-run limit is one number (the default, and the most a
// bot token may ask for) or {"default": N, "max": M} (a token may ask for up to M).
// Strict like the other configuration files; a mistake stops start-up naming the field.
import { parseConfigJson } from '../config/config-file.ts';
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
}

/** The limits a bot token may set for its run (within the ceilings). */
export type Lowerable = 'concurrent' | 'requestsPerMinute' | 'tokensPerMinute' | 'runBudgetUsd';

export interface GlobalLimits {
  readonly concurrent: number;
  readonly requestsPerMinute: number;
  readonly tokensPerMinute: number;
  readonly budgetUsdPerDay: number;
}

export const LIMITS_FIELDS: Readonly<Record<string, ReadonlySet<string>>> = {
  '(file)': new Set(['perInstance', 'perRun', 'perWorkflow', 'global']),
  perInstance: new Set(['concurrent', 'requestsPerMinute', 'tokensPerMinute']),
  perRun: new Set(['budgetUsd']),
  perWorkflow: new Set(['budgetUsdPerDay']),
  global: new Set(['concurrent', 'requestsPerMinute', 'tokensPerMinute', 'budgetUsdPerDay']),
};

/** Pure: the --limits file, or an error naming the file and the field. */
export function parseLimitsFile(text: string, fileName: string): LimitsPolicy {
  const { doc, fail } = parseConfigJson(text, fileName);
  if (!isObject(doc)) return fail('(file)', 'must be a JSON object with perInstance, perRun, perWorkflow and/or global');
  const section = (name: string): Record<string, unknown> => {
    for (const k of Object.keys(doc)) if (!LIMITS_FIELDS['(file)']!.has(k)) fail(k, 'unknown field (expected perInstance, perRun, perWorkflow, global)');
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
  };
}

/** Pure: whether any money limit applies (a budget per run, per workflow or over all). */
function hasMoneyLimit(policy: LimitsPolicy): boolean {
  return policy.runBudgetUsd > 0 || policy.workflowBudgetUsdPerDay > 0 || (policy.global?.budgetUsdPerDay ?? 0) > 0 || (policy.ceilings?.runBudgetUsd ?? 0) > 0;
}

/**
 * Pure: the start-up warning when a money limit meets models without a price: their calls count
 * tokens only, never money, so no budget holds them.
 */
export function unpricedWarning(policy: LimitsPolicy, models: readonly { readonly provider: string; readonly model: string }[], priced: (provider: string, model: string) => boolean): string | undefined {
  if (!hasMoneyLimit(policy)) return undefined;
  const unpriced = models.filter((m) => !priced(m.provider, m.model)).map((m) => `${m.provider}/${m.model}`);
  if (unpriced.length === 0) return undefined;
  return `--limits sets a money budget, but these models have no price in MODEL_PRICES_FILE, so their calls count tokens only and spend no budget: ${unpriced.join(', ')}`;
}

/** Service tiers priced as the price table's rates: anything else (priority) costs more than counted. */
const PRICED_TIERS: ReadonlySet<string> = new Set(['auto', 'default', 'flex', 'standard_only']);
/** Anthropic betas that bill differently from the rates (long context past 200k input tokens). */
const PRICED_DIFFERENTLY_BETA = /(?:^|,)\s*context-1m-/;

/**
 * Pure: why a call cannot be charged at the price table's rates while a money budget applies
 * (undefined: it can). A value that changes the price is refused rather than mischarged.
 */
export function unpricedCallReason(policy: LimitsPolicy, serviceTier: string | undefined, anthropicBeta: string | undefined, speed?: string): string | undefined {
  if (!hasMoneyLimit(policy)) return undefined;
  if (speed !== undefined && speed !== 'standard') return `"speed": "${speed.slice(0, 32).replace(/[^\x20-\x7e]/g, '?')}" (fast mode) is billed at a multiple of the rates the budget counts; leave it out or send "standard"`;
  if (serviceTier !== undefined && !PRICED_TIERS.has(serviceTier)) return `"service_tier": "${serviceTier.slice(0, 32).replace(/[^\x20-\x7e]/g, '?')}" is billed at other rates than the budget counts; send auto or default, or leave it out`;
  if (anthropicBeta !== undefined && PRICED_DIFFERENTLY_BETA.test(anthropicBeta)) return 'the anthropic-beta context-1m-* bills long prompts at other rates than the budget counts; leave it out';
  return undefined;
}
