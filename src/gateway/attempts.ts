// Step 6 of a model call: sending it, with retries only while nothing has reached the client
// (SECURITY rule 28): a connect that was refused or timed out, or a status the protocol marks
// retryable (429, 5xx overload), within the retry policy's count and time budget. The body is
// released the moment an answer begins.
import type { IncomingMessage } from 'node:http';
import { errorForUpstream, type UpstreamError } from '../http/errors.ts';
import { newExchange, openUpstream, type Exchange, type UpstreamTarget, type UpstreamTimeouts } from '../http/forward.ts';
import type { RequestBody } from './body.ts';
import type { GatewayCall } from './call.ts';
import type { WireProtocol } from './protocols/protocol.ts';
import { nextRetryDelay, retryableFailure, retryHintMs, type RetryPolicy } from './retry.ts';

/** The upstream's answer to relay, or nothing: the call was ended here (an upstream failure answered, or the client gone). */
export type Answer = { readonly kind: 'response'; readonly res: IncomingMessage; readonly exchange: Exchange } | { readonly kind: 'ended' };

export interface SendPolicy {
  readonly timeouts: UpstreamTimeouts;
  readonly retry: RetryPolicy;
  readonly random: () => number;
}

export async function sendWithRetries(call: GatewayCall, target: UpstreamTarget, body: RequestBody, protocol: WireProtocol, policy: SendPolicy): Promise<Answer> {
  let waited = 0;
  for (;;) {
    if (call.gone) return ended(call);
    const attempt = newExchange();
    call.attempt = attempt;
    call.lastAttempt = attempt;
    call.attempts++;
    call.waitingAfterUnbilled = false;
    const sent = openUpstream(call.traced(target), policy.timeouts, body.bytes!, attempt);
    call.attach(sent.request);
    let res: IncomingMessage;
    try {
      res = await sent.response;
    } catch (err) {
      if (call.gone) return ended(call);
      const failed = err as UpstreamError;
      const kind = failed.kind;
      call.attemptEnded(kind);
      const delay = retryableFailure(kind) ? nextRetryDelay(policy.retry, call.retries, waited, undefined, policy.random) : undefined;
      if (delay === undefined) {
        call.endRefused({ error: errorForUpstream(failed) }, kind);
        return { kind: 'ended' };
      }
      if (!(await backOff(call, delay))) return ended(call);
      waited += delay;
      continue;
    }
    const status = res.statusCode ?? 502;
    call.attemptAnswered(status);
    const upstreamId = res.headers[protocol.upstreamRequestIdHeader];
    call.upstreamRequestId = typeof upstreamId === 'string' ? upstreamId.slice(0, 128) : undefined;
    if (protocol.retryStatuses.has(status)) {
      if (status === 429) call.rateLimited++;
      const delay = nextRetryDelay(policy.retry, call.retries, waited, retryHintMs(res.headers, Date.now()), policy.random);
      if (delay !== undefined) {
        call.attemptEnded(undefined);
        res.resume();
        if (!(await backOff(call, delay))) return ended(call);
        waited += delay;
        continue;
      }
    }
    // The answer has begun: the call will not be sent again (SECURITY rule 52).
    body.release();
    return { kind: 'response', res, exchange: attempt };
  }
}

/** Waits before the next attempt, counted as a retry; false if the client went away. */
async function backOff(call: GatewayCall, ms: number): Promise<boolean> {
  call.attempt = undefined; // between attempts: a client leaving now is recorded in the client's exchange
  call.attach(undefined);
  call.waitingAfterUnbilled = true; // only a refused connect or a complete retryable error leads here
  if (!(await call.pause(ms))) return false;
  call.retries++;
  return true;
}

function ended(call: GatewayCall): Answer {
  call.endAbandoned();
  return { kind: 'ended' };
}
