// The limits' state in Redis, shared by every replica: one round trip per admission, a script that
// checks and reserves atomically (the same verdict as admissionVerdict, in Lua, since it must run
// where the state is), and one per charge. When the store cannot be reached the failure policy
// decides: `closed` refuses calls until it is back (503, transient), `open` lets them through
// unlimited; either is logged and counted while it lasts.
import { createHash, randomUUID } from 'node:crypto';
import { effectivePolicy, estimateTokens, type Admission, type LimitsStore, type Who } from './admission.ts';
import type { LimitsPolicy } from './policy.ts';
import { RespError, type RespClient, type RespValue } from './resp.ts';

/** Checks every limit and, when all pass, reserves the call; returns {'ok'} or {kind, detail}. */
const ADMIT = `
local inst, run, wf = KEYS[1], KEYS[2], KEYS[3]
local now, estimate, id = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local concurrent, rpm, tpm, runBudget, wfBudget = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local runSpent = tonumber(redis.call('GET', run) or '0')
if runBudget > 0 and runSpent >= runBudget then return {'run_budget', tostring(runSpent)} end
local wfSpent = tonumber(redis.call('GET', wf) or '0')
if wfBudget > 0 and wfSpent >= wfBudget then return {'workflow_budget', tostring(wfSpent)} end
local inflight = tonumber(redis.call('GET', inst .. ':f') or '0')
if concurrent > 0 and inflight >= concurrent then return {'concurrency', tostring(inflight)} end
redis.call('ZREMRANGEBYSCORE', inst .. ':w', '-inf', now - 60000)
local entries = redis.call('ZRANGE', inst .. ':w', 0, -1, 'WITHSCORES')
local count, tokens, oldest = #entries / 2, 0, now
for i = 1, #entries, 2 do
  tokens = tokens + tonumber(string.match(entries[i], ':(%d+)$'))
  if tonumber(entries[i + 1]) < oldest then oldest = tonumber(entries[i + 1]) end
end
local wait = math.max(1, math.ceil((60000 - (now - oldest)) / 1000))
if rpm > 0 and count >= rpm then return {'requests_per_minute', tostring(count), tostring(wait)} end
if tpm > 0 and tokens > 0 and tokens + estimate > tpm then return {'tokens_per_minute', tostring(tokens), tostring(wait)} end
redis.call('INCR', inst .. ':f')
redis.call('EXPIRE', inst .. ':f', 3600)
redis.call('ZADD', inst .. ':w', now, id .. ':' .. estimate)
redis.call('EXPIRE', inst .. ':w', 120)
return {'ok'}
`;

/** Gives the slot back and charges the call: its tokens in the window, its cost to the run and the workflow's day. */
const RELEASE = `
local inst, run, wf = KEYS[1], KEYS[2], KEYS[3]
local id, estimate, tokens, cost = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
if tonumber(redis.call('GET', inst .. ':f') or '0') > 0 then redis.call('DECR', inst .. ':f') end
local score = redis.call('ZSCORE', inst .. ':w', id .. ':' .. estimate)
if score then
  redis.call('ZREM', inst .. ':w', id .. ':' .. estimate)
  redis.call('ZADD', inst .. ':w', score, id .. ':' .. tokens)
end
if cost > 0 then
  redis.call('INCRBYFLOAT', run, cost)
  redis.call('EXPIRE', run, 172800)
  redis.call('INCRBYFLOAT', wf, cost)
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

  constructor(policy: LimitsPolicy, client: RespClient, failure: FailurePolicy, onError: (why: string) => void) {
    this.#policy = policy;
    this.#client = client;
    this.#failure = failure;
    this.#onError = onError;
  }

  get policy(): LimitsPolicy {
    return this.#policy;
  }

  /**
   * Runs a script by its SHA-1 (EVALSHA: the script's bytes are not sent on every call); a server
   * that does not have it yet (a new or restarted Redis answers NOSCRIPT) is sent the whole script
   * once (EVAL), which also caches it there. Still one round trip per call in the usual case.
   */
  async #runScript(script: string, keys: readonly string[], args: readonly (string | number)[]): Promise<RespValue> {
    const tail = [keys.length, ...keys, ...args];
    let reply = await this.#client.command(['EVALSHA', scriptSha(script), ...tail]);
    if (reply instanceof RespError && reply.message.startsWith('NOSCRIPT')) reply = await this.#client.command(['EVAL', script, ...tail]);
    if (reply instanceof RespError) throw reply;
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
      reply = await this.#runScript(ADMIT, keys, [nowMs, estimate, id, policy.concurrent, policy.requestsPerMinute, policy.tokensPerMinute, policy.runBudgetUsd, policy.workflowBudgetUsdPerDay]);
    } catch (err) {
      this.#onError((err as Error).message);
      if (this.#failure === 'closed') return { ok: false, kind: 'store_unavailable', retryAfterSec: 1, message: 'the limits store cannot be reached, and the operator chose to refuse calls until it is back (--limits-store-failure closed)' };
      return { ok: true, reservation: { release: () => {} } };
    }
    const [kind, detail, wait] = Array.isArray(reply) ? (reply as string[]) : ['error'];
    const usd = (v: string | undefined) => `$${Number(v ?? 0).toFixed(2)}`;
    switch (kind) {
      case 'ok': {
        let released = false;
        return {
          ok: true,
          reservation: {
            release: ({ tokens, costUsd }) => {
              if (released) return;
              released = true;
              this.#runScript(RELEASE, keys, [id, estimate, Math.max(0, Math.round(tokens)), costUsd]).catch((err: Error) => this.#onError(err.message));
            },
          },
        };
      }
      case 'run_budget':
        return { ok: false, kind, message: `this run's budget is spent: ${usd(detail)} of ${usd(String(policy.runBudgetUsd))}; the run must stop (the operator sets it in --limits, the orchestrator may lower it per run)` };
      case 'workflow_budget':
        return { ok: false, kind, message: `this workflow's budget for today (UTC) is spent: ${usd(detail)} of ${usd(String(policy.workflowBudgetUsdPerDay))}; it starts again tomorrow` };
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
