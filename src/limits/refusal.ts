// How a refused admission is told to the agent, per protocol: a rate or concurrency limit (or a
// store outage, or a store that lost its state) is transient, 429 or 503 with Retry-After; a spent budget is final, in the form
// each agent takes for "stop" (Codex: 429 insufficient_quota on OpenAI routes; Claude Code: 402
// billing_error on Messages). Pure.
import { ERRORS } from '../http/errors.ts';
import type { Refusal } from '../http/lifecycle.ts';
import type { Admission } from './admission.ts';

/** The protocol family whose clients are told: OpenAI's routes, or Anthropic's (Messages and the clouds). */
export type RefusalForm = 'openai' | 'anthropic';

export function limitRefusal(refused: Exclude<Admission, { ok: true }>, form: RefusalForm): Refusal {
  if ('retryAfterSec' in refused) {
    const error = refused.kind === 'store_unavailable' ? ERRORS.limitsStoreUnavailable : refused.kind === 'store_state_lost' ? ERRORS.limitsStoreStateLost : ERRORS.limitRateExceeded;
    return { error, message: `${refused.message}; retry after ${refused.retryAfterSec} s`, headers: { 'retry-after': String(refused.retryAfterSec) } };
  }
  return { error: form === 'openai' ? ERRORS.budgetSpentOpenAi : ERRORS.budgetSpentAnthropic, message: refused.message };
}
