// The limits the gateway enforces per workload (--limits FILE): per instance (requests in
// progress, requests and tokens per minute), per run (money), per workflow (money per day).
// Strict like the other configuration files; a mistake stops start-up naming the field.
import { parseConfigJson } from '../config/config-file.ts';
import { isObject } from '../http/json.ts';

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
}

export const LIMITS_FIELDS: Readonly<Record<string, ReadonlySet<string>>> = {
  '(file)': new Set(['perInstance', 'perRun', 'perWorkflow']),
  perInstance: new Set(['concurrent', 'requestsPerMinute', 'tokensPerMinute']),
  perRun: new Set(['budgetUsd']),
  perWorkflow: new Set(['budgetUsdPerDay']),
};

/** Pure: the --limits file, or an error naming the file and the field. */
export function parseLimitsFile(text: string, fileName: string): LimitsPolicy {
  const { doc, fail } = parseConfigJson(text, fileName);
  if (!isObject(doc)) return fail('(file)', 'must be a JSON object with perInstance, perRun and/or perWorkflow');
  const section = (name: string): Record<string, unknown> => {
    for (const k of Object.keys(doc)) if (!LIMITS_FIELDS['(file)']!.has(k)) fail(k, 'unknown field (expected perInstance, perRun, perWorkflow)');
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
  const instance = section('perInstance');
  const run = section('perRun');
  const workflow = section('perWorkflow');
  return {
    concurrent: num(instance, 'perInstance', 'concurrent', true),
    requestsPerMinute: num(instance, 'perInstance', 'requestsPerMinute', true),
    tokensPerMinute: num(instance, 'perInstance', 'tokensPerMinute', true),
    runBudgetUsd: num(run, 'perRun', 'budgetUsd', false),
    workflowBudgetUsdPerDay: num(workflow, 'perWorkflow', 'budgetUsdPerDay', false),
  };
}
