// Admission before a model call is forwarded, and its charge once the answer is over, against the
// limits of src/limits/policy.ts. The decisions are pure (admissionVerdict); the state they read
// is held here, in process (one replica). Overshoot is bounded: a call is admitted while the
// budget has anything left, so the spend can pass the budget by at most the calls already in
// flight (concurrent × the largest single call).
import type { LimitsPolicy } from './policy.ts';

export interface Who {
  readonly instanceId: string;
  readonly workflow: string;
  readonly runId: string;
  /** What the bot token lowered for this run (never raises: the lower of the two applies). */
  readonly lowered?: { readonly budgetUsd?: number; readonly concurrent?: number };
}

/** Pure: a run's limits: the file's, lowered by its token (0 in the file means none, so the token's applies). */
export function effectivePolicy(policy: LimitsPolicy, lowered: Who['lowered']): LimitsPolicy {
  if (lowered === undefined) return policy;
  const lower = (file: number, token: number | undefined) => (token === undefined ? file : file === 0 ? token : Math.min(file, token));
  return { ...policy, runBudgetUsd: lower(policy.runBudgetUsd, lowered.budgetUsd), concurrent: lower(policy.concurrent, lowered.concurrent) };
}

/** What the state holds for the verdict, at `nowMs`. */
export interface Usage {
  readonly inFlight: number;
  readonly requestsLastMinute: number;
  readonly tokensLastMinute: number;
  readonly runSpentUsd: number;
  readonly workflowSpentUsdToday: number;
}

export type Verdict =
  | { readonly ok: true }
  /** Transient: retry after `retryAfterSec`. */
  | { readonly ok: false; readonly kind: 'concurrency' | 'requests_per_minute' | 'tokens_per_minute'; readonly retryAfterSec: number; readonly message: string }
  /** Final: the budget is spent. */
  | { readonly ok: false; readonly kind: 'run_budget' | 'workflow_budget'; readonly message: string };

const usd = (v: number) => `$${v.toFixed(2)}`;

/** Pure: whether a call that will bring `estimatedTokens` input tokens may start now. */
export function admissionVerdict(policy: LimitsPolicy, usage: Usage, estimatedTokens: number, oldestInWindowAgeMs: number): Verdict {
  if (policy.runBudgetUsd > 0 && usage.runSpentUsd >= policy.runBudgetUsd) {
    return { ok: false, kind: 'run_budget', message: `this run's budget is spent: ${usd(usage.runSpentUsd)} of ${usd(policy.runBudgetUsd)}; the run must stop (the operator sets it in --limits, the orchestrator may lower it per run)` };
  }
  if (policy.workflowBudgetUsdPerDay > 0 && usage.workflowSpentUsdToday >= policy.workflowBudgetUsdPerDay) {
    return { ok: false, kind: 'workflow_budget', message: `this workflow's budget for today (UTC) is spent: ${usd(usage.workflowSpentUsdToday)} of ${usd(policy.workflowBudgetUsdPerDay)}; it starts again tomorrow` };
  }
  const windowWait = Math.max(1, Math.ceil((60_000 - oldestInWindowAgeMs) / 1000));
  if (policy.concurrent > 0 && usage.inFlight >= policy.concurrent) {
    return { ok: false, kind: 'concurrency', retryAfterSec: 1, message: `this instance already has ${usage.inFlight} model calls in progress, its limit; retry when one has finished` };
  }
  if (policy.requestsPerMinute > 0 && usage.requestsLastMinute >= policy.requestsPerMinute) {
    return { ok: false, kind: 'requests_per_minute', retryAfterSec: windowWait, message: `this instance made ${usage.requestsLastMinute} model calls in the last minute, its limit` };
  }
  if (policy.tokensPerMinute > 0 && usage.tokensLastMinute + estimatedTokens > policy.tokensPerMinute && usage.tokensLastMinute > 0) {
    return { ok: false, kind: 'tokens_per_minute', retryAfterSec: windowWait, message: `this instance used ${usage.tokensLastMinute} tokens in the last minute; with this call's ${estimatedTokens} it would pass its limit of ${policy.tokensPerMinute}` };
  }
  return { ok: true };
}

/** Pure: input tokens estimated from a request body's size (about 4 bytes a token for text and JSON). */
export function estimateTokens(bodyBytes: number): number {
  return Math.ceil(bodyBytes / 4);
}

/** What admission answers: the call's reservation, or why not. */
export type Admission =
  | { readonly ok: true; readonly reservation: Reservation }
  | Exclude<Verdict, { ok: true }>
  /** The shared store cannot be reached and the failure policy is `closed`. */
  | { readonly ok: false; readonly kind: 'store_unavailable'; readonly retryAfterSec: number; readonly message: string };

/** Where the limits' state is: this process (LocalLimits) or Redis, shared by replicas (RedisLimits). */
export interface LimitsStore {
  /** The file's limits (before any token lowers them). */
  readonly policy: LimitsPolicy;
  admit(who: Who, bodyBytes: number, nowMs: number): Admission | Promise<Admission>;
}

export interface Reservation {
  /** Charges the call (real or estimated tokens and cost) and frees its slot; only the first call counts. */
  release(charge: { readonly tokens: number; readonly costUsd: number }): void;
}

interface InstanceState {
  inFlight: number;
  /** Each admitted call of the last minute: when, and its tokens (estimated, then actual). */
  readonly window: { at: number; tokens: number }[];
}

/** The in-process store: one replica's view; state of idle identities is dropped as it ages out. */
export class LocalLimits implements LimitsStore {
  readonly #policy: LimitsPolicy;
  readonly #instances = new Map<string, InstanceState>();
  readonly #runSpent = new Map<string, number>();
  readonly #workflowSpent = new Map<string, number>();

  constructor(policy: LimitsPolicy) {
    this.#policy = policy;
  }

  get policy(): LimitsPolicy {
    return this.#policy;
  }

  admit(who: Who, bodyBytes: number, nowMs: number): Admission {
    const state = this.#instances.get(who.instanceId) ?? { inFlight: 0, window: [] };
    while (state.window.length > 0 && nowMs - state.window[0]!.at >= 60_000) state.window.shift();
    const day = new Date(nowMs).toISOString().slice(0, 10);
    const workflowKey = `${day}\u0000${who.workflow}`;
    const estimate = estimateTokens(bodyBytes);
    const verdict = admissionVerdict(
      effectivePolicy(this.#policy, who.lowered),
      {
        inFlight: state.inFlight,
        requestsLastMinute: state.window.length,
        tokensLastMinute: state.window.reduce((sum, e) => sum + e.tokens, 0),
        runSpentUsd: this.#runSpent.get(who.runId) ?? 0,
        workflowSpentUsdToday: this.#workflowSpent.get(workflowKey) ?? 0,
      },
      estimate,
      state.window.length > 0 ? nowMs - state.window[0]!.at : 0,
    );
    if (!verdict.ok) return verdict;
    const entry = { at: nowMs, tokens: estimate };
    state.inFlight++;
    state.window.push(entry);
    this.#instances.set(who.instanceId, state);
    let released = false;
    return {
      ok: true,
      reservation: {
        release: ({ tokens, costUsd }) => {
          if (released) return;
          released = true;
          state.inFlight--;
          entry.tokens = Math.max(tokens, 0);
          if (costUsd > 0) {
            this.#runSpent.set(who.runId, (this.#runSpent.get(who.runId) ?? 0) + costUsd);
            this.#workflowSpent.set(workflowKey, (this.#workflowSpent.get(workflowKey) ?? 0) + costUsd);
          }
          if (state.inFlight === 0 && state.window.length === 0) this.#instances.delete(who.instanceId);
        },
      },
    };
  }

  /** Calls in progress, all instances together (tests: nothing leaks). */
  inFlight(): number {
    let n = 0;
    for (const s of this.#instances.values()) n += s.inFlight;
    return n;
  }
}
