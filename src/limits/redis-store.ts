// The limits' state in Redis, shared by every replica: one round trip per admission, a script that
// checks and reserves atomically (the same verdict as admissionVerdict, in Lua, since it must run
// where the state is), and one per charge. When the store cannot be reached the failure policy
// decides: `closed` refuses calls until it is back (503, transient), `open` lets them through
// unlimited; either is logged and counted while it lasts.
import { createHash, randomUUID } from 'node:crypto';
import { admissionVerdict, budgetMicroUsd, effectivePolicy, estimateTokens, limitsKeys, toMicroUsd, type Admission, type LimitsStore, type Reservation, type WindowCounts } from './admission.ts';
import type { WorkloadIdentity } from '../auth/identity.ts';
import type { LimitsPolicy } from './policy.ts';
import { RespError, type RespClient, type RespValue } from '../store/resp.ts';
import { ADMIT, RELEASE, RENEW } from './redis-scripts.ts';

const shas = new Map<string, string>();
function scriptSha(script: string): string {
  let sha = shas.get(script);
  if (sha === undefined) shas.set(script, (sha = createHash('sha1').update(script).digest('hex')));
  return sha;
}

export type FailurePolicy = 'open' | 'closed';

/** Observers of the store: its errors, round trips, and the backlog of charges it could not take yet. */
export interface RedisLimitsHooks {
  readonly onError?: (why: string) => void;
  readonly onRoundTrip?: (op: 'admit' | 'charge', seconds: number) => void;
  /** Told when charges start waiting for the store, when one is dropped (the backlog is full), and when the backlog is empty again. */
  readonly onBacklog?: (state: { pending: number; dropped: number; settled: number }) => void;
  /** How long a call's slot and held money last in the store unless renewed (default LEASE_MS). */
  readonly leaseMs?: number;
  /** How often the backlog of charges is tried again while the store is away (default REPLAY_EVERY_MS). */
  readonly replayEveryMs?: number;
  /** Whether the store lost its state (store/state-marker.ts): under the closed policy, calls are refused as in an outage. */
  readonly stateLost?: () => boolean;
}

/**
 * A call's slot (and the money it holds) is a lease this long, renewed every third of it while the
 * call lives: a replica that dies, or an admission whose answer never arrived, frees its slots
 * within one lease, not an hour.
 */
const LEASE_MS = 30_000;

/** Charges kept while the store is away (each a few hundred bytes); past this, the oldest is dropped. */
const MAX_UNSETTLED_CHARGES = 10_000;
const REPLAY_EVERY_MS = 1000;
const REPLAY_BATCH = 256;

export class RedisLimits implements LimitsStore {
  readonly #policy: LimitsPolicy;
  readonly #client: RespClient;
  readonly #failure: FailurePolicy;
  readonly #onError: (why: string) => void;
  readonly #onRoundTrip: (op: 'admit' | 'charge', seconds: number) => void;
  readonly #onBacklog: (state: { pending: number; dropped: number; settled: number }) => void;
  readonly #leaseMs: number;
  readonly #replayEveryMs: number;
  readonly #stateLost: () => boolean;
  /** Charges the store could not take (it was away), replayed oldest first once it answers. */
  readonly #unsettled: { keys: readonly string[]; args: readonly (string | number)[] }[] = [];
  #replaying = false;
  #dropped = 0;
  #settled = 0;

  constructor(policy: LimitsPolicy, client: RespClient, failure: FailurePolicy, hooks: RedisLimitsHooks = {}) {
    this.#policy = policy;
    this.#client = client;
    this.#failure = failure;
    this.#onError = hooks.onError ?? (() => {});
    this.#onRoundTrip = hooks.onRoundTrip ?? (() => {});
    this.#onBacklog = hooks.onBacklog ?? (() => {});
    this.#leaseMs = hooks.leaseMs ?? LEASE_MS;
    this.#replayEveryMs = hooks.replayEveryMs ?? REPLAY_EVERY_MS;
    this.#stateLost = hooks.stateLost ?? (() => false);
  }

  /** Charges waiting for the store to come back. */
  get unsettled(): number {
    return this.#unsettled.length;
  }

  get policy(): LimitsPolicy {
    return this.#policy;
  }

  /**
   * Runs a script by its SHA-1 (EVALSHA: the script's bytes are not sent on every call); a server
   * that does not have it yet (a new or restarted Redis answers NOSCRIPT) is sent the whole script
   * once (EVAL), which also caches it there. Still one round trip per call in the usual case.
   */
  async #runScript(op: 'admit' | 'charge' | 'renew', script: string, keys: readonly string[], args: readonly (string | number)[]): Promise<RespValue> {
    const began = performance.now();
    const tail = [keys.length, ...keys, ...args];
    let reply = await this.#client.command(['EVALSHA', scriptSha(script), ...tail]);
    if (reply instanceof RespError && reply.message.startsWith('NOSCRIPT')) reply = await this.#client.command(['EVAL', script, ...tail]);
    if (reply instanceof RespError) throw reply;
    if (op !== 'renew') this.#onRoundTrip(op, (performance.now() - began) / 1000);
    return reply;
  }

  /**
   * Charges a call. A charge the store cannot take now (not connected, the connection lost, no
   * answer in time) waits in a bounded backlog and is replayed, oldest first, once the store
   * answers again: the run's money and the slot it held are settled late, not lost. A charge
   * Redis itself refused (a script error) would be refused again: it is reported, not kept.
   */
  #charge(keys: readonly string[], args: readonly (string | number)[]): void {
    if (this.#replaying) {
      this.#keep(keys, args); // behind the backlog, in order
      return;
    }
    this.#runScript('charge', RELEASE, keys, args).catch((err: Error) => {
      this.#onError(err.message);
      if (!(err instanceof RespError)) this.#keep(keys, args);
    });
  }

  #keep(keys: readonly string[], args: readonly (string | number)[]): void {
    let droppedFirst = false;
    if (this.#unsettled.length >= MAX_UNSETTLED_CHARGES) {
      this.#unsettled.shift();
      droppedFirst = this.#dropped++ === 0;
    }
    this.#unsettled.push({ keys, args });
    // Told when the backlog begins and when it first overflows (the total dropped comes when it is settled).
    if (this.#unsettled.length === 1 || droppedFirst) this.#onBacklog({ pending: this.#unsettled.length, dropped: this.#dropped, settled: this.#settled });
    if (!this.#replaying) {
      this.#replaying = true;
      setTimeout(() => void this.#replay(), this.#replayEveryMs).unref();
    }
  }

  async #replay(): Promise<void> {
    while (this.#unsettled.length > 0) {
      // Pipelined in batches: Redis runs one connection's commands in order, so the oldest still
      // goes first. A replay is idempotent, so one sent again after a partial batch costs nothing.
      const batch = this.#unsettled.slice(0, REPLAY_BATCH);
      const results = await Promise.allSettled(batch.map((c) => this.#runScript('charge', RELEASE, c.keys, c.args)));
      let done = 0;
      for (const r of results) {
        if (r.status === 'rejected' && !(r.reason instanceof RespError)) break; // still away
        if (r.status === 'fulfilled') this.#settled++;
        else this.#onError((r.reason as Error).message);
        done++;
      }
      this.#unsettled.splice(0, done);
      if (done < batch.length) {
        setTimeout(() => void this.#replay(), this.#replayEveryMs).unref(); // try again later
        return;
      }
    }
    this.#replaying = false;
    this.#onBacklog({ pending: 0, dropped: this.#dropped, settled: this.#settled });
    this.#dropped = 0;
    this.#settled = 0;
  }

  async admit(who: WorkloadIdentity, bodyBytes: number, nowMs: number, holdUsd = 0): Promise<Admission> {
    if (this.#failure === 'closed' && this.#stateLost()) {
      return { ok: false, kind: 'store_state_lost', retryAfterSec: 1, message: 'the limits store lost its state (restarted empty, flushed or evicting keys): calls are refused until an operator confirms it (proxy.js confirm-store-reset --limits-store URL) or every token issued before the loss has expired (--limits-store-failure closed)' };
    }
    const at = limitsKeys(who);
    const policy = effectivePolicy(this.#policy, who.lowered);
    const day = new Date(nowMs).toISOString().slice(0, 10);
    const keys = [`lim:i:${at.instance}`, `lim:r:${at.run}`, `lim:wf:${at.workflow}:${day}`, 'lim:g', `lim:g:d:${day}`];
    const g = this.#policy.global;
    const global = g === undefined ? ['0', 0, 0, 0, 0] : ['1', g.concurrent, g.requestsPerMinute, g.tokensPerMinute, budgetMicroUsd(g.budgetUsdPerDay)];
    const id = randomUUID();
    const estimate = estimateTokens(bodyBytes);
    const budgets = [budgetMicroUsd(policy.runBudgetUsd), budgetMicroUsd(policy.workflowBudgetUsdPerDay)];
    let reply: RespValue;
    try {
      reply = await this.#runScript('admit', ADMIT, keys, [nowMs, estimate, id, policy.concurrent, policy.requestsPerMinute, policy.tokensPerMinute, ...budgets, ...global, this.#leaseMs, toMicroUsd(Math.max(0, holdUsd))]);
    } catch (err) {
      this.#onError((err as Error).message);
      // The script may have run and only its answer be lost: whatever it reserved is given back
      // as soon as the store answers (the backlog), and lapses with its lease at the latest.
      if (!(err instanceof RespError)) this.#keep(keys, [id, estimate, 0, 0, global[0]!]);
      if (this.#failure === 'closed') return { ok: false, kind: 'store_unavailable', retryAfterSec: 1, message: 'the limits store cannot be reached, and the operator chose to refuse calls until it is back (--limits-store-failure closed)' };
      return { ok: true, reservation: { release: () => {} } };
    }
    const [kind, detail, third] = Array.isArray(reply) ? (reply as string[]) : ['error'];
    if (kind === 'ok') return { ok: true, reservation: this.#lease(keys, id, estimate, global[0] === '1') };
    const refused = kind === undefined ? undefined : refusalFromStore(policy, kind, Number(detail ?? 0), Number(third ?? 1), estimate);
    if (refused !== undefined) return refused;
    this.#onError('the limits store answered something unexpected');
    return this.#failure === 'closed' ? { ok: false, kind: 'store_unavailable', retryAfterSec: 1, message: 'the limits store answered something unexpected' } : { ok: true, reservation: { release: () => {} } };
  }

  /** An admitted call's reservation: its lease renewed while it lives, released once with its charge. */
  #lease(keys: readonly string[], id: string, estimate: number, global: boolean): Reservation {
    const renew = setInterval(() => {
      this.#runScript('renew', RENEW, keys, [id, Date.now(), this.#leaseMs, global ? '1' : '0']).catch((err: Error) => this.#onError(err.message));
    }, Math.max(1, Math.floor(this.#leaseMs / 3)));
    renew.unref();
    let released = false;
    return {
      release: ({ tokens, costUsd }) => {
        if (released) return;
        released = true;
        clearInterval(renew);
        this.#charge(keys, [id, estimate, Math.max(0, Math.round(tokens)), Math.max(0, toMicroUsd(costUsd)), global ? '1' : '0']);
      },
    };
  }
}

/**
 * Pure: the refusal the script reported (its kind, the figure it found, the window's wait), as
 * admissionVerdict words it: the usage that gives that verdict is rebuilt, so the messages have
 * one source. Undefined when the verdict does not come out the same (an unexpected answer).
 */
function refusalFromStore(policy: LimitsPolicy, kind: string, detail: number, third: number, estimate: number): Exclude<Admission, { ok: true }> | undefined {
  const waitSec = third;
  const none = { inFlight: 0, requestsLastMinute: 0, tokensLastMinute: 0, runSpentUsd: 0, workflowSpentUsdToday: 0 };
  const windowAge = 60_000 - waitSec * 1000;
  const globalNone = { inFlight: 0, requestsLastMinute: 0, tokensLastMinute: 0, oldestInWindowAgeMs: 0, spentUsdToday: 0 };
  const usage: Record<string, WindowCounts> = {
    run_budget: { ...none, runSpentUsd: detail / 1e6 },
    workflow_budget: { ...none, workflowSpentUsdToday: detail / 1e6 },
    global_budget: { ...none, global: { ...globalNone, spentUsdToday: detail / 1e6 } },
    run_budget_held: { ...none, runSpentUsd: detail / 1e6, runHeldUsd: third / 1e6 },
    workflow_budget_held: { ...none, workflowSpentUsdToday: detail / 1e6, workflowHeldUsdToday: third / 1e6 },
    global_budget_held: { ...none, global: { ...globalNone, spentUsdToday: detail / 1e6, heldUsdToday: third / 1e6 } },
    concurrency: { ...none, inFlight: detail },
    requests_per_minute: { ...none, requestsLastMinute: detail },
    tokens_per_minute: { ...none, tokensLastMinute: detail },
    global_concurrency: { ...none, global: { ...globalNone, inFlight: detail } },
    global_requests_per_minute: { ...none, global: { ...globalNone, requestsLastMinute: detail, oldestInWindowAgeMs: windowAge } },
    global_tokens_per_minute: { ...none, global: { ...globalNone, tokensLastMinute: detail, oldestInWindowAgeMs: windowAge } },
  };
  const u = usage[kind];
  if (u === undefined) return undefined;
  const verdict = admissionVerdict(policy, u, estimate, windowAge);
  return !verdict.ok && verdict.kind === kind ? verdict : undefined;
}
