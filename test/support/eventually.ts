// Waiting for a state another connection or process reaches later, without a deadline of its own:
// a deadline is a timing assertion, and one that fails when the machine is loaded. A guard of
// 120 s ends a wait for a state that never comes, naming it; the test's signal (t.signal: the test
// timed out or ended) ends it sooner. Under npm test a test is bounded by its file's 150 s
// (scripts/test.mjs), so this guard speaks first; a file run alone by `node --test` has no test
// timeout, and the guard is the same there.
import { setTimeout as delay } from 'node:timers/promises';

const HANG_GUARD_MS = 120_000;

/**
 * Polls `ok` every `everyMs` until it holds; throws naming `what` once `signal` aborts (the test
 * timed out or ended) or after 120 s, with `detail()` (the state last seen, the output) appended.
 */
export async function eventually(what: string, ok: () => boolean | Promise<boolean>, signal: AbortSignal, everyMs = 5, detail?: () => string): Promise<void> {
  const guard = AbortSignal.timeout(HANG_GUARD_MS);
  const giveUp = (why: string) => new Error(`gave up waiting for ${what}: ${why}${detail === undefined ? '' : `; ${detail()}`}`);
  while (!(await ok())) {
    if (signal.aborted) throw giveUp('the test ended first');
    if (guard.aborted) throw giveUp(`it did not come in ${HANG_GUARD_MS / 1000} s`);
    await delay(everyMs);
  }
}
