// Admission before a model call is forwarded, and its charge once the answer is over, against the
// limits of src/limits/policy.ts. The decisions are pure (admissionVerdict); the state they read
// is held here, in process (one replica). Overshoot is bounded: a call is admitted while the
// budget has anything left, so the spend can pass the budget by at most the calls already in
// flight (concurrent × the largest single call).
import { tokenCeiling, type LimitsPolicy, type Lowerable } from './policy.ts';
import type { LoweredLimits, WorkloadIdentity } from '../auth/identity.ts';

/**
 * Pure: the keys an identity's limits are kept under: `none` for what nobody said (network-policy
 * mode without headers). An id may hold `:`, which the store's keys use to add a suffix (a run
 * `r:h` would be run `r`'s held money): it is written `%3A` (and `%` as `%25`), so no id names
 * another's key.
 */
export function limitsKeys(who: WorkloadIdentity): { readonly instance: string; readonly workflow: string; readonly run: string } {
  const key = (id: string | null) => (id === null ? 'none' : id.replace(/%/g, '%25').replace(/:/g, '%3A'));
  return { instance: key(who.instanceId), workflow: key(who.workflow), run: key(who.runId) };
}

/**
 * Pure: a run's limits: the file's defaults, or what its token asks for within the file's ceiling
 * (the default, unless the file gives a `max`; 0 means none, so the token's applies). A token
 * never goes past the ceiling.
 */
export function effectivePolicy(policy: LimitsPolicy, lowered: LoweredLimits | undefined): LimitsPolicy {
  if (lowered === undefined) return policy;
  // What the token asked past a ceiling is kept, so that a refusal can name the ceiling that applied.
  const asked: Partial<Record<Lowerable, number>> = {};
  const pick = (key: Lowerable, token: number | undefined) => {
    if (token === undefined) return policy[key];
    const ceiling = tokenCeiling(policy, key);
    if (ceiling === undefined) return token;
    if (token > ceiling) asked[key] = token;
    return Math.min(ceiling, token);
  };
  const effective = {
    ...policy,
    runBudgetUsd: pick('runBudgetUsd', lowered.budgetUsd),
    concurrent: pick('concurrent', lowered.concurrent),
    requestsPerMinute: pick('requestsPerMinute', lowered.requestsPerMinute),
    tokensPerMinute: pick('tokensPerMinute', lowered.tokensPerMinute),
  };
  return Object.keys(asked).length === 0 ? effective : { ...effective, askedAboveCeiling: asked };
}

/** What the state holds for the verdict, at `nowMs`. */
export interface WindowCounts {
  readonly inFlight: number;
  readonly requestsLastMinute: number;
  readonly tokensLastMinute: number;
  readonly runSpentUsd: number;
  readonly workflowSpentUsdToday: number;
  /** Money held by the run's calls in progress: each one's worst case, until it is charged (absent: none). */
  readonly runHeldUsd?: number;
  readonly workflowHeldUsdToday?: number;
  /** Every workload together, when the policy has global limits. */
  readonly global?: {
    readonly inFlight: number;
    readonly requestsLastMinute: number;
    readonly tokensLastMinute: number;
    readonly oldestInWindowAgeMs: number;
    readonly spentUsdToday: number;
    readonly heldUsdToday?: number;
  };
}

export type Verdict =
  | { readonly ok: true }
  /** Transient: retry after `retryAfterSec` (a budget `_held`: what is left is held by calls in progress until they are charged). */
  | { readonly ok: false; readonly kind: 'concurrency' | 'requests_per_minute' | 'tokens_per_minute' | 'global_concurrency' | 'global_requests_per_minute' | 'global_tokens_per_minute' | 'run_budget_held' | 'workflow_budget_held' | 'global_budget_held'; readonly retryAfterSec: number; readonly message: string }
  /** Final: the budget is spent. */
  | { readonly ok: false; readonly kind: 'run_budget' | 'workflow_budget' | 'global_budget'; readonly message: string };

/** Pure: an amount for a message: cents, or two significant digits below a cent (a tiny budget is not "$0.00"). */
function formatUsd(v: number): string {
  return v === 0 || Math.abs(v) >= 0.01 ? `$${v.toFixed(2)}` : `$${Number(v.toPrecision(2))}`;
}
const usd = formatUsd;

/** Pure: money as whole micro-dollars: every store adds integers, so two stores (or replicas) agree to the last digit on whether a budget is spent. */
export function toMicroUsd(usd: number): number {
  return Math.round(usd * 1e6);
}

/**
 * Pure: a budget as whole micro-dollars, the one rounding rule of every store: up, and never to 0
 * when it is above 0 (a budget of $0.0000001 is one micro-dollar, spent by any charge; 0 means no
 * budget). A charge rounds to the nearest micro-dollar (toMicroUsd).
 */
export function budgetMicroUsd(usd: number): number {
  if (!(usd > 0)) return 0;
  // The product's float noise (0.29 * 1e6 = 289999.99999999994) is not a fraction of a micro-dollar.
  return Math.max(1, Math.ceil(Math.round(usd * 1e9) / 1e3));
}

/**
 * Pure: a budget's verdict: spent (final), or what is left held by calls in progress (transient:
 * each holds its worst case until it is charged), or undefined while anything is left.
 */
function budgetVerdict(budgetUsd: number, spentUsd: number, heldUsd: number): 'spent' | 'held' | undefined {
  const budget = budgetMicroUsd(budgetUsd);
  if (budget === 0) return undefined;
  const spent = toMicroUsd(spentUsd);
  if (spent >= budget) return 'spent';
  return spent + toMicroUsd(heldUsd) >= budget ? 'held' : undefined;
}

/** Pure: whether a call that will bring `estimatedTokens` input tokens may start now. */
export function admissionVerdict(policy: LimitsPolicy, usage: WindowCounts, estimatedTokens: number, oldestInWindowAgeMs: number): Verdict {
  const run = budgetVerdict(policy.runBudgetUsd, usage.runSpentUsd, usage.runHeldUsd ?? 0);
  if (run === 'spent') {
    const asked = policy.askedAboveCeiling?.runBudgetUsd;
    const ceiling = asked === undefined ? '' : ` (the token asked ${usd(asked)}; the file's ceiling ${usd(policy.runBudgetUsd)} applies)`;
    return { ok: false, kind: 'run_budget', message: `this run's budget is spent: ${usd(usage.runSpentUsd)} of ${usd(policy.runBudgetUsd)}${ceiling}; the run must stop (the operator sets it in --limits, the orchestrator may lower it per run)` };
  }
  const workflow = budgetVerdict(policy.workflowBudgetUsdPerDay, usage.workflowSpentUsdToday, usage.workflowHeldUsdToday ?? 0);
  if (workflow === 'spent') {
    return { ok: false, kind: 'workflow_budget', message: `this workflow's budget for today (UTC) is spent: ${usd(usage.workflowSpentUsdToday)} of ${usd(policy.workflowBudgetUsdPerDay)}; it starts again tomorrow` };
  }
  const g = policy.global;
  const gu = usage.global;
  const all = g && gu ? budgetVerdict(g.budgetUsdPerDay, gu.spentUsdToday, gu.heldUsdToday ?? 0) : undefined;
  if (all === 'spent') {
    return { ok: false, kind: 'global_budget', message: `the gateway's budget for today (UTC), shared by every workload, is spent: ${usd(gu!.spentUsdToday)} of ${usd(g!.budgetUsdPerDay)}; it starts again tomorrow` };
  }
  const held = heldVerdict(run, workflow, all, policy, usage);
  if (held) return held;
  const instance = windowVerdict('this instance', '', policy, { ...usage, oldestInWindowAgeMs }, estimatedTokens);
  if (instance !== undefined || !g || !gu) return instance ?? { ok: true };
  return windowVerdict('all workloads together', 'global_', g, gu, estimatedTokens) ?? { ok: true };
}

/** Pure: the transient refusal when what is left of a budget is held by calls in progress (each holds its worst case until charged). */
function heldVerdict(run: 'held' | undefined, workflow: 'held' | undefined, all: 'held' | undefined, policy: LimitsPolicy, usage: WindowCounts): Exclude<Verdict, { ok: true }> | undefined {
  const retry = 'retry when one of them has finished and been charged';
  if (run) return { ok: false, kind: 'run_budget_held', retryAfterSec: 1, message: `what is left of this run's budget (${usd(policy.runBudgetUsd - usage.runSpentUsd)} of ${usd(policy.runBudgetUsd)}) is held by its calls in progress, each for the most it may cost; ${retry}` };
  if (workflow) return { ok: false, kind: 'workflow_budget_held', retryAfterSec: 1, message: `what is left of this workflow's budget for today is held by its calls in progress, each for the most it may cost; ${retry}` };
  if (all) return { ok: false, kind: 'global_budget_held', retryAfterSec: 1, message: `what is left of the gateway's budget for today is held by calls in progress, each for the most it may cost; ${retry}` };
  return undefined;
}

/** Pure: the checks of calls in progress and of the last minute, for one instance or for all. */
function windowVerdict(
  who: string,
  prefix: '' | 'global_',
  limits: { readonly concurrent: number; readonly requestsPerMinute: number; readonly tokensPerMinute: number },
  usage: { readonly inFlight: number; readonly requestsLastMinute: number; readonly tokensLastMinute: number; readonly oldestInWindowAgeMs: number },
  estimatedTokens: number,
): Exclude<Verdict, { ok: true }> | undefined {
  const whose = prefix === '' ? 'its limit' : "the gateway's global limit";
  const windowWait = Math.max(1, Math.ceil((60_000 - usage.oldestInWindowAgeMs) / 1000));
  if (limits.concurrent > 0 && usage.inFlight >= limits.concurrent) {
    return { ok: false, kind: `${prefix}concurrency`, retryAfterSec: 1, message: `${who} already ${prefix === '' ? 'has' : 'have'} ${usage.inFlight} model calls in progress, ${whose}; retry when one has finished` };
  }
  if (limits.requestsPerMinute > 0 && usage.requestsLastMinute >= limits.requestsPerMinute) {
    return { ok: false, kind: `${prefix}requests_per_minute`, retryAfterSec: windowWait, message: `${who} made ${usage.requestsLastMinute} model calls in the last minute, ${whose}` };
  }
  if (limits.tokensPerMinute > 0 && usage.tokensLastMinute + estimatedTokens > limits.tokensPerMinute && usage.tokensLastMinute > 0) {
    return { ok: false, kind: `${prefix}tokens_per_minute`, retryAfterSec: windowWait, message: `${who} used ${usage.tokensLastMinute} tokens in the last minute; with this call's ${estimatedTokens} it would pass ${whose} of ${limits.tokensPerMinute}` };
  }
  return undefined;
}

/** Pure: input tokens estimated from a request body's size (about 4 bytes a token for text and JSON). */
export function estimateTokens(bodyBytes: number): number {
  return Math.ceil(bodyBytes / 4);
}

/** What admission answers: the call's reservation, or why not. */
export type Admission =
  | { readonly ok: true; readonly reservation: Reservation }
  | Exclude<Verdict, { ok: true }>
  /**
   * Under the failure policy `closed`: the shared store cannot be reached (or answered something
   * else), or it answers but lost its state (its spend and slots gone, until an operator runs
   * confirm-store-reset or every earlier token has expired).
   */
  | { readonly ok: false; readonly kind: 'store_unavailable' | 'store_state_lost'; readonly retryAfterSec: number; readonly message: string };

/** Where the limits' state is: this process (LocalLimits) or Redis, shared by replicas (RedisLimits). */
export interface LimitsStore {
  /** The file's limits (before any token lowers them). */
  readonly policy: LimitsPolicy;
  /**
   * Admits a call, or says which limit refuses it. `holdUsd` is the most the call may cost (its
   * worst case): held against the budgets until the reservation is released with the real charge.
   */
  admit(who: WorkloadIdentity, bodyBytes: number, nowMs: number, holdUsd?: number): Admission | Promise<Admission>;
}

export interface Reservation {
  /** Charges the call (real or estimated tokens and cost) and frees its slot; only the first call counts. */
  release(charge: { readonly tokens: number; readonly costUsd: number }): void;
}

interface WindowEntry {
  readonly at: number;
  /** Estimated at admission, then the call's real tokens. */
  tokens: number;
  /** In the running sum still (false once it has slid out of the window). */
  counted: boolean;
}

interface InstanceState {
  inFlight: number;
  /** Each admitted call of the last minute, oldest first, from `head` on (a queue without shifts). */
  window: WindowEntry[];
  head: number;
  /** The tokens of window[head..], kept as entries come and go (admission is O(1), not O(calls a minute)). */
  tokens: number;
}

const WINDOW_MS = 60_000;
/** How long a run's spend is kept after its last call: a bot token lives at most 24 h, so two days is past any of its calls. */
const RUN_KEPT_MS = 48 * 3600_000;
/** How often idle state is swept (instances with nothing in flight or in the window, other days' workflows, runs past RUN_KEPT_MS). */
const SWEEP_EVERY_MS = 60_000;

/** Drops the window's entries that are 60 s old or older, keeping the running sum. */
function slide(state: InstanceState, nowMs: number): void {
  const w = state.window;
  while (state.head < w.length && nowMs - w[state.head]!.at >= WINDOW_MS) {
    const gone = w[state.head++]!;
    gone.counted = false;
    state.tokens -= gone.tokens;
  }
  if (state.head === w.length) {
    state.window = [];
    state.head = 0;
    state.tokens = 0;
  } else if (state.head > 1024 && state.head * 2 > w.length) {
    state.window = w.slice(state.head);
    state.head = 0;
  }
}

/**
 * The in-process store: one replica's view. Admission costs the same however many calls the
 * window holds, and state does not outlive its use: a sweep at most once a minute drops idle
 * instances, other days' workflow totals and runs not seen for two days.
 */
export class LocalLimits implements LimitsStore {
  readonly #policy: LimitsPolicy;
  readonly #instances = new Map<string, InstanceState>();
  /** Micro-dollars spent per run, and when it was last charged. */
  readonly #runSpent = new Map<string, { micro: number; lastMs: number }>();
  /** Micro-dollars spent per workflow and UTC day. */
  readonly #workflowSpent = new Map<string, number>();
  /** Every workload together (kept only when the policy has global limits). */
  readonly #global: InstanceState = { inFlight: 0, window: [], head: 0, tokens: 0 };
  /** Micro-dollars spent by every workload, per UTC day. */
  readonly #globalSpent = new Map<string, number>();
  /** Micro-dollars held by calls in progress (their worst cases), per run, workflow-day and day: gone when nothing is held. */
  readonly #held = new Map<string, number>();
  #lastSweepMs = 0;

  constructor(policy: LimitsPolicy) {
    this.#policy = policy;
  }

  get policy(): LimitsPolicy {
    return this.#policy;
  }

  #hold(key: string, micro: number): void {
    const left = (this.#held.get(key) ?? 0) + micro;
    if (left > 0) this.#held.set(key, left);
    else this.#held.delete(key);
  }

  admit(who: WorkloadIdentity, bodyBytes: number, nowMs: number, holdUsd = 0): Admission {
    const keys = limitsKeys(who);
    if (nowMs - this.#lastSweepMs >= SWEEP_EVERY_MS) this.#sweep(nowMs);
    const state = this.#instances.get(keys.instance) ?? { inFlight: 0, window: [], head: 0, tokens: 0 };
    slide(state, nowMs);
    const day = new Date(nowMs).toISOString().slice(0, 10);
    const workflowKey = `${day}\u0000${keys.workflow}`;
    const heldKeys = [`r\u0000${keys.run}`, `w\u0000${workflowKey}`, `g\u0000${day}`] as const;
    const estimate = estimateTokens(bodyBytes);
    const inWindow = state.window.length - state.head;
    const all = this.#policy.global === undefined ? undefined : this.#global;
    if (all) slide(all, nowMs);
    const verdict = admissionVerdict(
      effectivePolicy(this.#policy, who.lowered),
      {
        inFlight: state.inFlight,
        requestsLastMinute: inWindow,
        tokensLastMinute: state.tokens,
        runSpentUsd: (this.#runSpent.get(keys.run)?.micro ?? 0) / 1e6,
        workflowSpentUsdToday: (this.#workflowSpent.get(workflowKey) ?? 0) / 1e6,
        runHeldUsd: (this.#held.get(heldKeys[0]) ?? 0) / 1e6,
        workflowHeldUsdToday: (this.#held.get(heldKeys[1]) ?? 0) / 1e6,
        ...(all && {
          global: {
            inFlight: all.inFlight,
            requestsLastMinute: all.window.length - all.head,
            tokensLastMinute: all.tokens,
            oldestInWindowAgeMs: all.window.length > all.head ? nowMs - all.window[all.head]!.at : 0,
            spentUsdToday: (this.#globalSpent.get(day) ?? 0) / 1e6,
            heldUsdToday: (this.#held.get(heldKeys[2]) ?? 0) / 1e6,
          },
        }),
      },
      estimate,
      inWindow > 0 ? nowMs - state.window[state.head]!.at : 0,
    );
    if (!verdict.ok) return verdict;
    const entry: WindowEntry = { at: nowMs, tokens: estimate, counted: true };
    state.inFlight++;
    state.window.push(entry);
    state.tokens += estimate;
    this.#instances.set(keys.instance, state);
    const globalEntry: WindowEntry | undefined = all && { at: nowMs, tokens: estimate, counted: true };
    if (all && globalEntry) {
      all.inFlight++;
      all.window.push(globalEntry);
      all.tokens += estimate;
    }
    const holdMicro = toMicroUsd(Math.max(0, holdUsd));
    for (const key of heldKeys) this.#hold(key, holdMicro);
    let released = false;
    return {
      ok: true,
      reservation: {
        release: ({ tokens, costUsd }) => {
          if (released) return;
          released = true;
          for (const key of heldKeys) this.#hold(key, -holdMicro);
          state.inFlight--;
          const actual = Math.max(tokens, 0);
          if (entry.counted) state.tokens += actual - entry.tokens;
          entry.tokens = actual;
          if (all && globalEntry) {
            all.inFlight--;
            if (globalEntry.counted) all.tokens += actual - globalEntry.tokens;
            globalEntry.tokens = actual;
          }
          const micro = toMicroUsd(costUsd);
          if (micro > 0) {
            const run = this.#runSpent.get(keys.run);
            this.#runSpent.set(keys.run, { micro: (run?.micro ?? 0) + micro, lastMs: Math.max(run?.lastMs ?? 0, nowMs) });
            this.#workflowSpent.set(workflowKey, (this.#workflowSpent.get(workflowKey) ?? 0) + micro);
            if (all) this.#globalSpent.set(day, (this.#globalSpent.get(day) ?? 0) + micro);
          }
        },
      },
    };
  }

  #sweep(nowMs: number): void {
    this.#lastSweepMs = nowMs;
    for (const [id, state] of this.#instances) {
      slide(state, nowMs);
      if (state.inFlight === 0 && state.window.length === 0) this.#instances.delete(id);
    }
    const today = new Date(nowMs).toISOString().slice(0, 10);
    for (const key of this.#workflowSpent.keys()) if (!key.startsWith(`${today}\u0000`)) this.#workflowSpent.delete(key);
    for (const key of this.#globalSpent.keys()) if (key !== today) this.#globalSpent.delete(key);
    for (const [run, spent] of this.#runSpent) if (nowMs - spent.lastMs >= RUN_KEPT_MS) this.#runSpent.delete(run);
  }

  /** What the store holds: calls in progress over all instances, and how many instances, runs and workflow-days it keeps (tests: nothing leaks, idle state goes). */
  held(): { inFlight: number; instances: number; runs: number; workflowDays: number } {
    let inFlight = 0;
    for (const s of this.#instances.values()) inFlight += s.inFlight;
    return { inFlight, instances: this.#instances.size, runs: this.#runSpent.size, workflowDays: this.#workflowSpent.size };
  }
}
