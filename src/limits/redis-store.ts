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

/**
 * Checks every limit and, when all pass, reserves the call; returns {'ok'} or {kind, detail, wait}
 * (for a budget held by calls in progress: {kind, spent, held}). Keys per instance (KEYS[1]) and,
 * with global limits, for every workload together (KEYS[4]): `:f` the calls in flight, a sorted
 * set of reservation ids scored by when their lease ends (a call renews its lease while it lives,
 * so the slots of a replica that died, or of an admission whose answer was lost, lapse within one
 * lease), `:w` the calls of the last minute (members `id:tokens` by start time) and `:t` the
 * running sum of their tokens. Money: KEYS[2] the run's, KEYS[3] the workflow's day, KEYS[5] the
 * day's over all, in micro-dollars; beside each, `:h` the money held by calls in progress (a hash
 * of id -> `micro:lease end`: each call's worst case, until it is charged). Budgets arrive in
 * whole micro-dollars rounded up (budgetMicroUsd), 0 meaning none. Each call costs O(log n) plus
 * the entries that leave the window and the calls in progress of its run. The same verdicts, in
 * the same order, as admissionVerdict.
 */
const ADMIT = `
local now, estimate, id = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local concurrent, rpm, tpm, runBudget, wfBudget = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local global = ARGV[9] == '1'
local gConcurrent, gRpm, gTpm, gBudget = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
local lease, hold = tonumber(ARGV[14]), tonumber(ARGV[15])
local function slide(prefix)
  local w, t = prefix .. ':w', prefix .. ':t'
  local old = redis.call('ZRANGEBYSCORE', w, '-inf', now - 60000)
  if #old > 0 then
    local gone = 0
    for i = 1, #old do gone = gone + tonumber(string.match(old[i], ':(%d+)$')) end
    redis.call('ZREMRANGEBYSCORE', w, '-inf', now - 60000)
    redis.call('DECRBY', t, gone)
  end
  local count = redis.call('ZCARD', w)
  local tokens, oldest = 0, now
  if count > 0 then
    tokens = tonumber(redis.call('GET', t) or '0')
    oldest = tonumber(redis.call('ZRANGE', w, 0, 0, 'WITHSCORES')[2])
  end
  redis.call('ZREMRANGEBYSCORE', prefix .. ':f', '-inf', now)
  return {redis.call('ZCARD', prefix .. ':f'), count, tokens, math.max(1, math.ceil((60000 - (now - oldest)) / 1000))}
end
local function check(kind, u, limC, limR, limT)
  if limC > 0 and u[1] >= limC then return {kind .. 'concurrency', tostring(u[1])} end
  if limR > 0 and u[2] >= limR then return {kind .. 'requests_per_minute', tostring(u[2]), tostring(u[4])} end
  if limT > 0 and u[3] > 0 and u[3] + estimate > limT then return {kind .. 'tokens_per_minute', tostring(u[3]), tostring(u[4])} end
  return nil
end
local function held(key)
  local h = redis.call('HGETALL', key .. ':h')
  local sum = 0
  for i = 1, #h, 2 do
    local micro, ends = string.match(h[i + 1], '^(%d+):(%d+)$')
    if tonumber(ends) <= now then redis.call('HDEL', key .. ':h', h[i]) else sum = sum + tonumber(micro) end
  end
  return sum
end
local function reserve(prefix, count)
  redis.call('ZADD', prefix .. ':f', now + lease, id)
  redis.call('PEXPIRE', prefix .. ':f', lease + 60000)
  redis.call('ZADD', prefix .. ':w', now, id .. ':' .. estimate)
  if count == 0 then redis.call('SET', prefix .. ':t', estimate) else redis.call('INCRBY', prefix .. ':t', estimate) end
  redis.call('EXPIRE', prefix .. ':w', 120)
  redis.call('EXPIRE', prefix .. ':t', 120)
end
local function hold_on(key)
  redis.call('HSET', key .. ':h', id, hold .. ':' .. (now + lease))
  redis.call('PEXPIRE', key .. ':h', lease + 60000)
end
local runSpent = tonumber(redis.call('GET', KEYS[2]) or '0')
if runBudget > 0 and runSpent >= runBudget then return {'run_budget', tostring(runSpent)} end
local wfSpent = tonumber(redis.call('GET', KEYS[3]) or '0')
if wfBudget > 0 and wfSpent >= wfBudget then return {'workflow_budget', tostring(wfSpent)} end
local allSpent = 0
if global then
  allSpent = tonumber(redis.call('GET', KEYS[5]) or '0')
  if gBudget > 0 and allSpent >= gBudget then return {'global_budget', tostring(allSpent)} end
end
if runBudget > 0 then
  local h = held(KEYS[2])
  if runSpent + h >= runBudget then return {'run_budget_held', tostring(runSpent), tostring(h)} end
end
if wfBudget > 0 then
  local h = held(KEYS[3])
  if wfSpent + h >= wfBudget then return {'workflow_budget_held', tostring(wfSpent), tostring(h)} end
end
if global and gBudget > 0 then
  local h = held(KEYS[5])
  if allSpent + h >= gBudget then return {'global_budget_held', tostring(allSpent), tostring(h)} end
end
local mine = slide(KEYS[1])
local all = nil
if global then all = slide(KEYS[4]) end
local refused = check('', mine, concurrent, rpm, tpm)
if refused then return refused end
if global then
  refused = check('global_', all, gConcurrent, gRpm, gTpm)
  if refused then return refused end
end
reserve(KEYS[1], mine[2])
if global then reserve(KEYS[4], all[2]) end
if hold > 0 then
  if runBudget > 0 then hold_on(KEYS[2]) end
  if wfBudget > 0 then hold_on(KEYS[3]) end
  if global and gBudget > 0 then hold_on(KEYS[5]) end
end
return {'ok'}
`;

/**
 * Renews a call's lease while it lives: its slots and the money it holds, where they still are
 * (a lease that already lapsed is not brought back), and the keys that hold them with it (a key
 * is set to expire a lease and a minute after the last admission that touched it: a long call
 * renews that too, or its slot would vanish with the key).
 */
const RENEW = `
local id, lease = ARGV[1], tonumber(ARGV[3])
local ends = tonumber(ARGV[2]) + lease
local function renew_slot(set)
  if redis.call('ZSCORE', set, id) then
    redis.call('ZADD', set, 'XX', ends, id)
    if redis.call('PTTL', set) < lease + 60000 then redis.call('PEXPIRE', set, lease + 60000) end
  end
end
renew_slot(KEYS[1] .. ':f')
if ARGV[4] == '1' then renew_slot(KEYS[4] .. ':f') end
for _, key in ipairs({KEYS[2], KEYS[3], KEYS[5]}) do
  local v = redis.call('HGET', key .. ':h', id)
  if v then
    redis.call('HSET', key .. ':h', id, string.match(v, '^(%d+):') .. ':' .. ends)
    if redis.call('PTTL', key .. ':h') < lease + 60000 then redis.call('PEXPIRE', key .. ':h', lease + 60000) end
  end
end
return 'OK'
`;

/**
 * Gives the slot back and charges the call: its real tokens in the windows (while it is still
 * there), its cost to the run, the workflow's day and, with global limits, the day's total; the
 * money it held goes. A charge is applied once per reservation id (a marker kept five minutes,
 * longer than a reconnection and a replay take; a few tens of bytes a call): a charge sent again
 * after the store was away, whose first attempt did run and only lost its answer, charges nothing.
 */
const RELEASE = `
local id, estimate, tokens, cost = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local global = ARGV[5] == '1'
if not redis.call('SET', 'lim:c:' .. id, '1', 'NX', 'EX', 300) then return 'SETTLED' end
local function settle(prefix)
  redis.call('ZREM', prefix .. ':f', id)
  local member = id .. ':' .. ARGV[2]
  local score = redis.call('ZSCORE', prefix .. ':w', member)
  if score then
    redis.call('ZREM', prefix .. ':w', member)
    redis.call('ZADD', prefix .. ':w', score, id .. ':' .. ARGV[3])
    redis.call('INCRBY', prefix .. ':t', tokens - estimate)
  end
end
settle(KEYS[1])
if global then settle(KEYS[4]) end
for _, key in ipairs({KEYS[2], KEYS[3], KEYS[5]}) do redis.call('HDEL', key .. ':h', id) end
if cost > 0 then
  redis.call('INCRBY', KEYS[2], cost)
  redis.call('EXPIRE', KEYS[2], 172800)
  redis.call('INCRBY', KEYS[3], cost)
  redis.call('EXPIRE', KEYS[3], 172800)
  if global then
    redis.call('INCRBY', KEYS[5], cost)
    redis.call('EXPIRE', KEYS[5], 172800)
  end
end
return 'OK'
`;

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
      return { ok: false, kind: 'store_unavailable', retryAfterSec: 1, message: 'the limits store lost its state (restarted empty, flushed or evicting): calls are refused until an operator confirms it (confirm-store-reset) or every token issued before the loss has expired (--limits-store-failure closed)' };
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
