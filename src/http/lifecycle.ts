// One request's life, the same on both listeners: it begins when the handler is called and the
// client-close watcher goes in at once, before any step awaits anything. It ends one of four
// ways, the first one said winning: endAnswered (an answer went out: relayed, or the proxy's
// own), endRefused (the proxy's error), endAbandoned (the client left), endFailed (a step threw).
// Then exactly one finish(), from the handler's `finally`, settles whatever the request holds and
// writes its record (settle, each listener's own). No step finishes a request: the step or its
// handler says how it ended, and returns.
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import { ERRORS, type ProxyError } from './errors.ts';
import { newExchange, type Exchange, type UpstreamTarget } from './forward.ts';
import { assertHeaderValue, requestTraceContext } from './headers.ts';
import type { LogSink } from './log.ts';
import type { HttpLogEvent } from './log-events.ts';
import { wasCutByShutdown } from './sockets.ts';
import { traceparentOf, type SpanContext, type TraceContext, type Tracing } from './trace-context.ts';

/** How a request ended, for its record: the status sent (0: none) and the error class, if any. */
export interface Outcome {
  readonly status: number;
  readonly error: string | undefined;
}

/** A refusal a step returns: what the client is told, and the headers that go with it. */
export interface Refusal {
  readonly error: ProxyError;
  /** The request field at fault (the gateway's `param`). */
  readonly param?: string | null;
  /** Replaces the error's fixed message when the refusal can say more. */
  readonly message?: string;
  /** The Allow header of a 405. */
  readonly allow?: string;
  /** Extra response headers (Retry-After, WWW-Authenticate), each checked for CR/LF. */
  readonly headers?: Readonly<Record<string, string>>;
  /** The request body was not read to its end: the connection closes once the answer is out. */
  readonly closeAfter?: boolean;
}

/** A step's result when the request goes no further: refused (recorded as `errorClass`, else the error's code), or its client gone. */
export type Stopped = { readonly ok: false; readonly refusal: Refusal; readonly errorClass?: string } | typeof GONE;

/** The client left: the step did not go on. */
export const GONE = Object.freeze({ ok: false, gone: true } as const);

/** Pure: a status Node can write and a client can read (llhttp accepts 000 and 099 from an upstream). */
export function isRelayableStatus(status: number): boolean {
  return Number.isInteger(status) && status >= 100 && status <= 599;
}

/** What an upstream request needs of its state once its request is done with it (leftoverUpstream). */
export interface UpstreamLeftover {
  readonly destroyed: boolean;
  readonly writableEnded: boolean;
  readonly writableFinished: boolean;
}

/**
 * How long the last bytes of a body already ended may take to leave once the request is done.
 * They leave within moments when the upstream reads; one that has answered and will not read
 * them has no other timer left to cut it (Node removes the request's timeout at the response's end).
 */
const UNSENT_BYTES_GRACE_MS = 1000;

/**
 * Pure: what becomes of an upstream request its request is done with (rule 99). `none`: it is
 * destroyed or its connection is back in the pool (Node marks a pooled request destroyed), or it
 * sent everything and Node pools it. `cut`: its body never ended, so it never will be sent whole
 * (the upstream answered first: git http-backend answers a malformed upload at once, a broken
 * upstream may answer without reading); left alone it would hold the upstream connection, and a
 * streamed body the client's, after the request was recorded and its slots given back.
 * `flush`: its body ended but bytes are still queued: cut unless they leave within the grace.
 */
export function leftoverUpstream(request: UpstreamLeftover): 'none' | 'cut' | 'flush' {
  if (request.destroyed || request.writableFinished) return 'none';
  return request.writableEnded ? 'flush' : 'cut';
}

/** One upstream attempt as its span shows it: when it began and ended, where it went, how it ended. */
export interface AttemptSpan {
  readonly spanId: string;
  readonly startedAt: number;
  readonly method: string;
  readonly host: string;
  readonly port: number;
  /** Undefined for the last attempt until the request ends (its answer is the relay). */
  endedAt: number | undefined;
  status: number | undefined;
  failure: string | undefined;
}

/** What a request's spans are built from besides its record (src/telemetry/spans.ts). */
export interface TracedRequest {
  readonly startedAt: number;
  readonly span: SpanContext | undefined;
  readonly attemptSpans: readonly AttemptSpan[];
}

/** Tracing on a listener: the ids and sampling of each request's span, and where its finished spans go with its record. */
export interface SpanSink<R, F> {
  readonly tracing: Tracing;
  span(record: R, call: F): void;
}

export abstract class RequestLifecycle implements TracedRequest {
  readonly startedAt = performance.now();
  readonly method: string;
  /** The request target as received (only ever logged through pathForLog). */
  readonly target: string;
  /** The client's W3C trace context when valid: forwarded upstream and recorded (headers.ts). */
  readonly trace: TraceContext | undefined;
  /** Outside an upstream attempt (reading the body, waiting to retry), the client's leaving is recorded here. */
  readonly client: Exchange = newExchange();
  /** With tracing on: the proxy's span, the upstream's parent (undefined with tracing off: the client's traceparent crosses as sent). */
  readonly span: SpanContext | undefined;
  readonly attemptSpans: AttemptSpan[] = [];
  /** The upstream attempt in flight, with its own bytes and failure (a retried one never mixes into the next). */
  #attempt: Exchange | undefined;
  #upstream: ClientRequest | undefined;
  #outcome: Outcome | undefined;
  #finished = false;
  #closed = false;
  #wake: (() => void) | undefined;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    protected readonly log: LogSink<HttpLogEvent>,
    readonly listener: string,
    private readonly tracing?: Tracing,
  ) {
    this.method = req.method ?? '';
    this.target = req.url ?? '';
    this.trace = requestTraceContext(req.headers);
    this.span = tracing?.start(this.trace);
    // First thing, before any await: a client that leaves at any instant after this is seen.
    res.once('close', () => this.#clientClosed());
  }

  /** The exchange the bytes and the failure are accounted in right now. */
  get exchange(): Exchange {
    return this.#attempt ?? this.client;
  }

  /** The client is gone (its connection closed before the answer was complete): nothing more is forwarded. */
  get gone(): boolean {
    const failure = this.exchange.failure;
    return this.#closed || this.res.destroyed || this.req.socket?.destroyed === true || failure === 'client_aborted' || failure === 'shutdown';
  }

  /** An upstream attempt's exchange: the request's until the next, or a wait to retry. */
  attemptStarted(attempt: Exchange): void {
    this.#attempt = attempt;
  }

  /** The upstream request in flight: the client's leaving destroys it. One it replaces (a retried attempt) is let go of. */
  attach(request: ClientRequest | undefined): void {
    if (this.#upstream !== undefined && this.#upstream !== request) this.#letGoOf(this.#upstream, 'now');
    this.#upstream = request;
    if (request && this.gone) request.destroy();
  }

  /**
   * The target of the next upstream attempt. With tracing on, the attempt is a span of its own,
   * the child of the request's, and the upstream gets it as its parent in `traceparent` (the
   * client's tracestate as judged, unchanged): the previous attempt's span ends here if it has not.
   */
  traced(target: UpstreamTarget): UpstreamTarget {
    if (this.span === undefined || this.tracing === undefined) return target;
    this.attemptEnded(undefined);
    const spanId = this.tracing.newSpanId();
    this.attemptSpans.push({ spanId, startedAt: performance.now(), method: target.method, host: target.hostname, port: target.port, endedAt: undefined, status: undefined, failure: undefined });
    return { ...target, headers: { ...target.headers, traceparent: traceparentOf(this.span, spanId) } };
  }

  /** The current attempt's answer began: its status (its span goes on while the answer is relayed). */
  attemptAnswered(status: number): void {
    const last = this.attemptSpans[this.attemptSpans.length - 1];
    if (last !== undefined && last.endedAt === undefined) last.status = status;
  }

  /** The current attempt's span ends now: retried, or failed with `failure`. */
  attemptEnded(failure: string | undefined): void {
    const last = this.attemptSpans[this.attemptSpans.length - 1];
    if (last === undefined || last.endedAt !== undefined) return;
    last.endedAt = performance.now();
    last.failure = failure;
  }

  /** Lets the attempt go and waits `ms`, or less when the client leaves: true if the wait passed with the client still there. */
  waitToRetry(ms: number): Promise<boolean> {
    this.#attempt = undefined;
    this.attach(undefined);
    if (this.gone) return Promise.resolve(false);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#wake = undefined;
        resolve(!this.gone);
      }, ms);
      this.#wake = () => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve(false);
      };
    });
  }

  #clientClosed(): void {
    if (this.res.writableFinished) return;
    this.#closed = true;
    this.exchange.failure ??= wasCutByShutdown(this.req.socket) ? 'shutdown' : 'client_aborted';
    this.#upstream?.destroy();
    this.#wake?.();
  }

  /** Ends the request with the answer a step wrote or relayed: its status (0: none went out) and error class. The first ending wins. */
  endAnswered(status: number, errorClass?: string): void {
    this.#outcome ??= { status, error: errorClass };
  }

  /** Ends the request with the proxy's own error, answered here (recorded as `errorClass`, else the error's code). */
  endRefused(refusal: Refusal, errorClass?: string): void {
    if (!this.res.headersSent && !this.res.destroyed) {
      for (const [name, value] of Object.entries(refusal.headers ?? {})) this.res.setHeader(name, assertHeaderValue(name, value));
      if (refusal.closeAfter) this.#afterTheAnswer(() => this.req.destroy());
      this.writeError(refusal);
    }
    this.endAnswered(refusal.error.status, errorClass ?? refusal.error.code);
  }

  /** Ends the request the client left before its answer was complete: nothing was (or will be) sent. */
  endAbandoned(): void {
    this.exchange.failure ??= 'client_aborted';
    this.endAnswered(0);
  }

  /**
   * Ends the request a step threw in: a bug, never a request's fault. Logged without request
   * data; the client gets a 500 if nothing was sent yet, else a broken connection.
   */
  endFailed(err: unknown): void {
    this.log({ event: 'handler_error', listener: this.listener, error: (err as Error)?.name ?? 'Error', detail: String((err as Error)?.message ?? err) });
    if (!this.res.headersSent && !this.res.destroyed) {
      this.writeError({ error: ERRORS.internal });
      this.endAnswered(ERRORS.internal.status, ERRORS.internal.code);
      return;
    }
    this.#upstream?.destroy();
    this.res.destroy();
    this.endAnswered(this.res.headersSent ? this.res.statusCode : 0, ERRORS.internal.code);
  }

  /**
   * Called once, from the handler's `finally`, however the request ended: settles what it holds
   * (a limits slot, a concurrency slot, a charge) and writes its record. A second call does nothing.
   */
  finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    // A path that returned without an ending is a bug: the client is not left hanging.
    if (this.#outcome === undefined && !this.gone) this.endFailed(new Error('the request ended without an answer'));
    if (this.#upstream !== undefined) this.#letGoOf(this.#upstream, 'after the answer');
    const outcome = this.#outcome ?? { status: 0, error: undefined };
    this.settle(outcome);
  }

  /**
   * An upstream request this request is done with: one still sending a body its upstream has
   * already answered must not outlive it (rule 99). A retried attempt's is cut `now` (its body is
   * bytes in hand: only a git push streams the client's, and a push is never sent again). The
   * last one's is cut `after the answer` is out, and with it the client's connection when the
   * client's body was not read to its end (a push streaming into it), as a refusal whose body was
   * not read closes it (closeAfter): the rest of that body has nowhere to go.
   */
  #letGoOf(request: ClientRequest, when: 'now' | 'after the answer'): void {
    const action = leftoverUpstream(request);
    if (action === 'cut' && when === 'now') request.destroy();
    else if (action === 'cut') {
      this.#afterTheAnswer(() => {
        request.destroy();
        if (!this.req.complete) this.req.destroy();
      });
    } else if (action === 'flush') {
      const timer = setTimeout(() => leftoverUpstream(request) === 'none' || request.destroy(), UNSENT_BYTES_GRACE_MS).unref();
      request.once('finish', () => clearTimeout(timer)).once('close', () => clearTimeout(timer));
    }
  }

  /** Runs `then` once the answer is out (written whole, or the connection gone): at once if it already is. */
  #afterTheAnswer(then: () => void): void {
    if (this.res.writableFinished || this.res.destroyed) then();
    else this.res.once('close', then);
  }

  /** Renders the proxy's own error the way this listener's clients read it. */
  protected abstract writeError(refusal: Refusal): void;
  /** Gives back what the request holds, charges it, and writes its record: once, from finish(). */
  protected abstract settle(outcome: Outcome): void;
}
