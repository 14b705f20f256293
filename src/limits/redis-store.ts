// The limits' state in Redis, shared by every replica: one round trip per admission, a script that
// checks and reserves atomically (the same verdict as admissionVerdict, in Lua, since it must run
// where the state is), and one per charge. When the store cannot be reached the failure policy
// decides: `closed` refuses calls until it is back (503, transient), `open` lets them through
// unlimited; either is logged and counted while it lasts.
import { createHash, randomUUID } from 'node:crypto';
import { effectivePolicy, estimateTokens, formatUsd, toMicroUsd, type Admission, type LimitsStore, type Who } from './admission.ts';
import type { LimitsPolicy } from './policy.ts';
import { RespError, type RespClient, type RespValue } from './resp.ts';

/**
 * Checks every limit and, when all pass, reserves the call; returns {'ok'} or {kind, detail, wait}.
 * Keys per instance: `:f` the calls in flight (a sorted set of reservation ids by start time, so
 * the slots of a replica that died holding them lapse after an hour each), `:w` the calls of the
 * last minute (members `id:tokens` by start time) and `:t` the running sum of their tokens. Each
 * call costs O(log n) plus the entries that leave the window: never a pass over the whole window.
 */
const ADMIT = `
local inst, run, wf = KEYS[1], KEYS[2], KEYS[3]
local now, estimate, id = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local concurrent, rpm, tpm, runBudget, wfBudget = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local f, w, t = inst .. ':f', inst .. ':w', inst .. ':t'
local runSpent = tonumber(redis.call('GET', run) or '0')
if runBudget > 0 and runSpent >= runBudget then return {'run_budget', tostring(runSpent)} end
local wfSpent = tonumber(redis.call('GET', wf) or '0')
if wfBudget > 0 and wfSpent >= wfBudget then return {'workflow_budget', tostring(wfSpent)} end
redis.call('ZREMRANGEBYSCORE', f, '-inf', now - 3600000)
local inflight = redis.call('ZCARD', f)
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
local wait = math.max(1, math.ceil((60000 - (now - oldest)) / 1000))
if concurrent > 0 and inflight >= concurrent then return {'concurrency', tostring(inflight)} end
if rpm > 0 and count >= rpm then return {'requests_per_minute', tostring(count), tostring(wait)} end
if tpm > 0 and tokens > 0 and tokens + estimate > tpm then return {'tokens_per_minute', tostring(tokens), tostring(wait)} end
redis.call('ZADD', f, now, id)
redis.call('EXPIRE', f, 3600)
redis.call('ZADD', w, now, id .. ':' .. estimate)
if count == 0 then redis.call('SET', t, estimate) else redis.call('INCRBY', t, estimate) end
redis.call('EXPIRE', w, 120)
redis.call('EXPIRE', t, 120)
return {'ok'}
`;

/** Gives the slot back and charges the call: its real tokens in the window (while it is still there), its cost to the run and the workflow's day. */
const RELEASE = `
local inst, run, wf = KEYS[1], KEYS[2], KEYS[3]
local id, estimate, tokens, cost = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local w = inst .. ':w'
redis.call('ZREM', inst .. ':f', id)
local member = id .. ':' .. ARGV[2]
local score = redis.call('ZSCORE', w, member)
if score then
  redis.call('ZREM', w, member)
  redis.call('ZADD', w, score, id .. ':' .. ARGV[3])
  redis.call('INCRBY', inst .. ':t', tokens - estimate)
end
if cost > 0 then
  redis.call('INCRBY', run, cost)
  redis.call('EXPIRE', run, 172800)
  redis.call('INCRBY', wf, cost)
  redis.call('EXPIRE', wf, 172800)
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

export class RedisLimits implements LimitsStore {
  readonly #policy: LimitsPolicy;
  readonly #client: RespClient;
  readonly #failure: FailurePolicy;
  readonly #onError: (why: string) => void;
  readonly #onRoundTrip: (op: 'admit' | 'charge', seconds: number) => void;

  constructor(policy: LimitsPolicy, client: RespClient, failure: FailurePolicy, onError: (why: string) => void, onRoundTrip: (op: 'admit' | 'charge', seconds: number) => void = () => {}) {
    this.#policy = policy;
    this.#client = client;
    this.#failure = failure;
    this.#onError = onError;
    this.#onRoundTrip = onRoundTrip;
  }

  get policy(): LimitsPolicy {
    return this.#policy;
  }

  /**
   * Runs a script by its SHA-1 (EVALSHA: the script's bytes are not sent on every call); a server
   * that does not have it yet (a new or restarted Redis answers NOSCRIPT) is sent the whole script
   * once (EVAL), which also caches it there. Still one round trip per call in the usual case.
   */
  async #runScript(op: 'admit' | 'charge', script: string, keys: readonly string[], args: readonly (string | number)[]): Promise<RespValue> {
    const began = performance.now();
    const tail = [keys.length, ...keys, ...args];
    let reply = await this.#client.command(['EVALSHA', scriptSha(script), ...tail]);
    if (reply instanceof RespError && reply.message.startsWith('NOSCRIPT')) reply = await this.#client.command(['EVAL', script, ...tail]);
    if (reply instanceof RespError) throw reply;
    this.#onRoundTrip(op, (performance.now() - began) / 1000);
    return reply;
  }

  async admit(who: Who, bodyBytes: number, nowMs: number): Promise<Admission> {
    const policy = effectivePolicy(this.#policy, who.lowered);
    const day = new Date(nowMs).toISOString().slice(0, 10);
    const keys = [`lim:i:${who.instanceId}`, `lim:r:${who.runId}`, `lim:wf:${who.workflow}:${day}`];
    const id = randomUUID();
    const estimate = estimateTokens(bodyBytes);
    let reply: RespValue;
    try {
      reply = await this.#runScript('admit', ADMIT, keys, [nowMs, estimate, id, policy.concurrent, policy.requestsPerMinute, policy.tokensPerMinute, toMicroUsd(policy.runBudgetUsd), toMicroUsd(policy.workflowBudgetUsdPerDay)]);
    } catch (err) {
      this.#onError((err as Error).message);
      if (this.#failure === 'closed') return { ok: false, kind: 'store_unavailable', retryAfterSec: 1, message: 'the limits store cannot be reached, and the operator chose to refuse calls until it is back (--limits-store-failure closed)' };
      return { ok: true, reservation: { release: () => {} } };
    }
    const [kind, detail, wait] = Array.isArray(reply) ? (reply as string[]) : ['error'];
    const usd = (micro: string | undefined) => formatUsd(Number(micro ?? 0) / 1e6);
    switch (kind) {
      case 'ok': {
        let released = false;
        return {
          ok: true,
          reservation: {
            release: ({ tokens, costUsd }) => {
              if (released) return;
              released = true;
              this.#runScript('charge', RELEASE, keys, [id, estimate, Math.max(0, Math.round(tokens)), Math.max(0, toMicroUsd(costUsd))]).catch((err: Error) => this.#onError(err.message));
            },
          },
        };
      }
      case 'run_budget':
        return { ok: false, kind, message: `this run's budget is spent: ${usd(detail)} of ${usd(String(toMicroUsd(policy.runBudgetUsd)))}; the run must stop (the operator sets it in --limits, the orchestrator may lower it per run)` };
      case 'workflow_budget':
        return { ok: false, kind, message: `this workflow's budget for today (UTC) is spent: ${usd(detail)} of ${usd(String(toMicroUsd(policy.workflowBudgetUsdPerDay)))}; it starts again tomorrow` };
      case 'concurrency':
        return { ok: false, kind, retryAfterSec: 1, message: `this instance already has ${detail} model calls in progress, its limit; retry when one has finished` };
      case 'requests_per_minute':
        return { ok: false, kind, retryAfterSec: Number(wait), message: `this instance made ${detail} model calls in the last minute, its limit` };
      case 'tokens_per_minute':
        return { ok: false, kind, retryAfterSec: Number(wait), message: `this instance used ${detail} tokens in the last minute, its limit is ${policy.tokensPerMinute}` };
      default:
        this.#onError('the limits store answered something unexpected');
        return this.#failure === 'closed' ? { ok: false, kind: 'store_unavailable', retryAfterSec: 1, message: 'the limits store answered something unexpected' } : { ok: true, reservation: { release: () => {} } };
    }
  }
}
