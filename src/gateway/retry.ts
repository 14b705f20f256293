// When to try an upstream model call again. Pure: the caller supplies the clock and randomness.
import type { IncomingHttpHeaders } from 'node:http';

export interface RetryPolicy {
  /** Retries after the first attempt; 0 disables retrying. */
  readonly maxRetries: number;
  /** Total time all waits of one request may add up to. */
  readonly budgetMs: number;
  /** First backoff step when the upstream gives no hint; doubles with each retry. */
  readonly baseDelayMs: number;
}

const IMF_FIXDATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/**
 * The upstream's own hint, in milliseconds: `retry-after-ms` (OpenAI), else `Retry-After` as
 * seconds or an HTTP date. Undefined when absent or unreadable.
 */
export function retryHintMs(headers: IncomingHttpHeaders, nowMs: number): number | undefined {
  const ms = headers['retry-after-ms'];
  if (typeof ms === 'string' && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.ceil(Number(ms));
  const after = headers['retry-after'];
  if (typeof after !== 'string') return undefined;
  if (/^\d+$/.test(after.trim())) return Number(after.trim()) * 1000;
  // Date.parse reads almost anything ("1.5" is a date in 2001): only IMF-fixdate counts.
  if (!IMF_FIXDATE.test(after.trim())) return undefined;
  const date = Date.parse(after);
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}

/**
 * Milliseconds to wait before retry number `retriesDone + 1`, or undefined when the request
 * must not be retried: attempts used up, or the wait would overrun the budget (then the
 * client is better served by the upstream's answer, with its Retry-After, right away).
 */
export function nextRetryDelay(
  policy: RetryPolicy,
  retriesDone: number,
  waitedMs: number,
  hintMs: number | undefined,
  random: () => number,
): number | undefined {
  if (retriesDone >= policy.maxRetries) return undefined;
  // Equal jitter: half fixed, half random, so that a burst of throttled bots spreads out.
  const backoff = policy.baseDelayMs * 2 ** retriesDone;
  const delay = hintMs ?? Math.round(backoff / 2 + (random() * backoff) / 2);
  return waitedMs + delay > policy.budgetMs ? undefined : delay;
}

/**
 * Pure: whether a failure before any response byte is worth another attempt: only a refused or
 * timed-out connect, which sent nothing. Any reset, on a new or a reused connection, may have
 * come after the upstream read the whole request and began a (billed) generation, so a model
 * call is never sent twice; the client's SDK decides whether to try again.
 */
export function retryableFailure(kind: string): boolean {
  return kind === 'connect_refused' || kind === 'connect_timeout';
}
