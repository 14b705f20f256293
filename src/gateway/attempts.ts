// Step 6 of a model call: sending it, with retries only while nothing has reached the client
// (SECURITY rule 28): a connect that was refused or timed out, or a status the protocol marks
// retryable (429, 5xx overload), within the retry policy's count and time budget. The body is
// released the moment an answer begins. The call is told of each attempt as it goes (started,
// answered, waiting to retry): a client that leaves at any point is charged and recorded by it.
import type { IncomingMessage } from 'node:http';
import { errorForUpstream, type UpstreamError } from '../http/errors.ts';
import { newExchange, openUpstream, type Exchange, type UpstreamTarget, type UpstreamTimeouts } from '../http/forward.ts';
import { GONE, type Stopped } from '../http/lifecycle.ts';
import type { RequestBody } from './body.ts';
import type { GatewayCall } from './call.ts';
import type { WireProtocol } from './protocols/protocol.ts';
import { nextRetryDelay, retryableFailure, retryHintMs, type RetryPolicy } from './retry.ts';

/** The upstream's answer to relay; or an upstream failure, refused here; or the client gone. */
export type Sent = { readonly ok: true; readonly res: IncomingMessage; readonly exchange: Exchange } | Stopped;

export interface SendPolicy {
  readonly timeouts: UpstreamTimeouts;
  readonly retry: RetryPolicy;
  readonly random: () => number;
}

export async function sendWithRetries(call: GatewayCall, target: UpstreamTarget, body: RequestBody, protocol: WireProtocol, policy: SendPolicy): Promise<Sent> {
  let waited = 0;
  for (;;) {
    if (call.gone) return GONE;
    const attempt = newExchange();
    call.attemptStarted(attempt);
    const sent = openUpstream(call.traced(target), policy.timeouts, body.bytes!, attempt);
    call.attach(sent.request);
    let res: IncomingMessage;
    try {
      res = await sent.response;
    } catch (err) {
      if (call.gone) return GONE;
      const failed = err as UpstreamError;
      const kind = failed.kind;
      call.attemptEnded(kind);
      const delay = retryableFailure(kind) ? nextRetryDelay(policy.retry, call.retries, waited, undefined, policy.random) : undefined;
      if (delay === undefined) return { ok: false, refusal: { error: errorForUpstream(failed) }, errorClass: kind };
      // Only a refused connect or a complete retryable error leads to a wait: nothing to bill.
      if (!(await call.waitToRetry(delay))) return GONE;
      waited += delay;
      continue;
    }
    const status = res.statusCode ?? 502;
    const upstreamId = res.headers[protocol.upstreamRequestIdHeader];
    call.upstreamAnswered(status, typeof upstreamId === 'string' ? upstreamId.slice(0, 128) : undefined);
    if (protocol.retryStatuses.has(status)) {
      if (status === 429) call.throttled();
      const delay = nextRetryDelay(policy.retry, call.retries, waited, retryHintMs(res.headers, Date.now()), policy.random);
      if (delay !== undefined) {
        call.attemptEnded(undefined);
        res.resume();
        if (!(await call.waitToRetry(delay))) return GONE;
        waited += delay;
        continue;
      }
    }
    // The answer has begun: the call will not be sent again (SECURITY rule 52).
    body.release();
    return { ok: true, res, exchange: attempt };
  }
}
