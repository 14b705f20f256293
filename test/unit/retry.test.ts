import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nextRetryDelay, retryHintMs, type RetryPolicy } from '../../src/gateway/retry.ts';

const NOW = Date.parse('2025-01-01T00:00:00Z');
const POLICY: RetryPolicy = { maxRetries: 3, budgetMs: 30_000, baseDelayMs: 500 };
const never = (): number => {
  throw new Error('random() must not be called');
};

// ---- retryHintMs ----

test('retry-after-ms wins over Retry-After', () => {
  assert.equal(retryHintMs({ 'retry-after-ms': '1500', 'retry-after': '20' }, NOW), 1500);
});

test('a fractional retry-after-ms is rounded up to whole milliseconds', () => {
  assert.equal(retryHintMs({ 'retry-after-ms': '1.2' }, NOW), 2);
});

test('an unreadable retry-after-ms falls back to Retry-After', () => {
  assert.equal(retryHintMs({ 'retry-after-ms': 'soon', 'retry-after': '2' }, NOW), 2000);
});

test('Retry-After in seconds is converted to milliseconds', () => {
  assert.equal(retryHintMs({ 'retry-after': '7' }, NOW), 7000);
  assert.equal(retryHintMs({ 'retry-after': '0' }, NOW), 0);
});

test('Retry-After as an HTTP date is the time from now until then', () => {
  assert.equal(retryHintMs({ 'retry-after': new Date(NOW + 12_000).toUTCString() }, NOW), 12_000);
});

test('Retry-After as an HTTP date in the past is 0, never negative', () => {
  assert.equal(retryHintMs({ 'retry-after': new Date(NOW - 60_000).toUTCString() }, NOW), 0);
});

test('no hint headers, or an unparseable Retry-After, give undefined', () => {
  assert.equal(retryHintMs({}, NOW), undefined);
  assert.equal(retryHintMs({ 'retry-after': 'soon' }, NOW), undefined);
  assert.equal(retryHintMs({ 'retry-after': '' }, NOW), undefined);
  assert.equal(retryHintMs({ 'retry-after-ms': 'soon' }, NOW), undefined);
});

// ---- nextRetryDelay ----

test('with maxRetries 0 no request is retried', () => {
  assert.equal(nextRetryDelay({ ...POLICY, maxRetries: 0 }, 0, 0, undefined, () => 0.5), undefined);
  assert.equal(nextRetryDelay({ ...POLICY, maxRetries: 0 }, 0, 0, 100, () => 0.5), undefined);
});

test('once maxRetries retries are done there is no further retry', () => {
  assert.notEqual(nextRetryDelay(POLICY, 2, 0, undefined, () => 0.5), undefined);
  assert.equal(nextRetryDelay(POLICY, 3, 0, undefined, () => 0.5), undefined);
  assert.equal(nextRetryDelay(POLICY, 3, 0, 100, () => 0.5), undefined);
});

test('the upstream hint is used as the delay, without randomness', () => {
  assert.equal(nextRetryDelay(POLICY, 0, 0, 4321, never), 4321);
  assert.equal(nextRetryDelay(POLICY, 2, 0, 0, never), 0);
});

test('a delay that would overrun the budget means no retry', () => {
  assert.equal(nextRetryDelay(POLICY, 0, 0, 30_001, never), undefined);
  assert.equal(nextRetryDelay(POLICY, 1, 25_000, 5_001, never), undefined);
});

test('a delay that exactly fills the budget is allowed', () => {
  assert.equal(nextRetryDelay(POLICY, 1, 25_000, 5_000, never), 5_000);
});

test('the backoff overrunning the remaining budget means no retry', () => {
  // base 500 * 2^2 = 2000; random 1 -> 2000 ms; 29_000 + 2000 > 30_000.
  assert.equal(nextRetryDelay(POLICY, 2, 29_000, undefined, () => 1), undefined);
});

test('without a hint the backoff doubles per retry, between half and all of base * 2^n', () => {
  for (let n = 0; n < 3; n++) {
    const full = POLICY.baseDelayMs * 2 ** n;
    assert.equal(nextRetryDelay(POLICY, n, 0, undefined, () => 0), full / 2, `retry ${n}, random 0`);
    assert.equal(nextRetryDelay(POLICY, n, 0, undefined, () => 1), full, `retry ${n}, random 1`);
    const mid = nextRetryDelay(POLICY, n, 0, undefined, () => 0.5)!;
    assert.ok(mid >= full / 2 && mid <= full, `retry ${n}: ${mid}`);
  }
});

test('a Retry-After that is neither whole seconds nor an HTTP date is ignored, not read as a date', () => {
  for (const v of ['1.5', '0.5', '-1', 'soon', '2024']) {
    assert.equal(retryHintMs({ 'retry-after': v }, Date.parse('Sun, 22 Nov 2026 00:00:00 GMT')), v === '2024' ? 2_024_000 : undefined, v);
  }
});
