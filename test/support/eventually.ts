// Waiting for a state another connection or process reaches later, without a deadline of its own:
// a deadline is a timing assertion, and one that fails when the machine is loaded. The test's
// timeout bounds the wait; its signal (t.signal) ends the polling and names what never came.
import { setTimeout as delay } from 'node:timers/promises';

/** Polls `ok` every `everyMs` until it holds; throws naming `what` once `signal` aborts (the test timed out or ended). */
export async function eventually(what: string, ok: () => boolean | Promise<boolean>, signal: AbortSignal, everyMs = 5): Promise<void> {
  while (!(await ok())) {
    if (signal.aborted) throw new Error(`gave up waiting for ${what}: the test ended first`);
    await delay(everyMs);
  }
}
