// One model call's state: who asked, what it asked for, the body bytes and the limits slot it
// holds, what the upstream answered. Private: the handler (./handler.ts) records each step's
// result through one method, and the send step tells of each attempt as it goes (what the charge
// and the record need of a call cut short); the record reads it through getters. finish() (in the
// handler's `finally`) gives back the body's bytes, charges the slot and writes the record
// (settle), exactly once, however the call ended.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Exchange } from '../http/forward.ts';
import type { BodyHold } from '../http/held-bodies.ts';
import { RequestLifecycle, type Outcome, type Refusal, type SpanSink } from '../http/lifecycle.ts';
import type { LogSink } from '../http/log.ts';
import type { GatewayLogEvent } from './log-events.ts';
import { writeProxyError } from '../http/respond.ts';
import type { RequestBody } from './body.ts';
import type { CheckedCall } from './check-call.ts';
import type { Relayed } from './relay.ts';
import type { PriceTable } from '../limits/prices.ts';
import { openAiErrorBody } from './protocols/openai.ts';
import type { ApiName, WireProtocol } from './protocols/protocol.ts';
import { withCallFacts } from './call-facts.ts';
import type { ModelCallState, ModelRequestRecord, ModelSpanFacts } from './record.ts';
import { settleModelCall } from './settle.ts';
import { clientRequestId, routeGatewayRequest, type GatewayRoute } from './route.ts';

/** What a call needs from the gateway to begin and to finish. */
export interface CallContext {
  readonly protocols: readonly WireProtocol[];
  readonly prices?: PriceTable;
  readonly record: (rec: ModelRequestRecord) => void;
  readonly log: LogSink<GatewayLogEvent>;
  /** Tracing (OTEL_EXPORTER_OTLP_*): each sampled call's spans, built from its record. */
  readonly trace?: SpanSink<ModelRequestRecord, ModelSpanFacts>;
}

export class GatewayCall extends withCallFacts(RequestLifecycle) implements ModelCallState, ModelSpanFacts {
  readonly route: GatewayRoute;
  /** The protocol whose clients are talking (also when its route refused them): its error format and request-id header. */
  readonly errorProtocol: WireProtocol | undefined;
  readonly requestId: string;
  readonly usageExpected: boolean;
  // What only an HTTP call finds (the rest: call-facts.ts), each written by its one method below.
  #heldBody: BodyHold | undefined;
  #stream = false;
  #attempts = 0;
  #lastAttempt: Exchange | undefined;
  #retries = 0;
  #waitingToRetry = false;

  /** Begins a call: its route, its correlation id on every answer. */
  constructor(
    readonly ctx: CallContext,
    req: IncomingMessage,
    res: ServerResponse,
  ) {
    super(req, res, ctx.log, 'model', ctx.trace?.tracing);
    this.route = routeGatewayRequest(this.method, this.target, ctx.protocols);
    const route = this.route;
    this.errorProtocol = route.ok ? (route.kind === 'protocol' ? route.protocol : undefined) : route.protocol;
    this.usageExpected = route.ok && route.kind === 'protocol' && !route.route.noUsage && route.pathModel?.countTokens !== true;
    // Forwarded or generated, returned on every answer and in the record even when refused or
    // abandoned. X-Request-Id carries it on the gateway's own answers (the SDKs report it); a
    // relayed answer carries the upstream's. Anthropic's SDKs read `request-id`.
    this.requestId = clientRequestId(req.headers) ?? randomUUID();
    res.setHeader('x-client-request-id', this.requestId);
    res.setHeader('x-request-id', this.requestId);
    const idHeader = this.errorProtocol?.upstreamRequestIdHeader;
    if (idHeader !== undefined && idHeader !== 'x-request-id') res.setHeader(idHeader, this.requestId);
  }

  get api(): ApiName | null {
    return this.errorProtocol?.api ?? null;
  }
  get stream(): boolean {
    return this.#stream;
  }
  get attempts(): number {
    return this.#attempts;
  }
  get retries(): number {
    return this.#retries;
  }

  /** The body's bytes in the process's count (--max-held-request-bytes), given back in settle() at the latest. */
  holdBody(hold: BodyHold): BodyHold {
    return (this.#heldBody = hold);
  }

  received(body: RequestBody): void {
    this.bodySized(body.size);
  }

  /** And whether the body asks for a stream. */
  override checked(checked: CheckedCall): void {
    super.checked(checked);
    if (checked.ok) this.#stream = checked.stream;
  }

  /** Counted; the last attempt's reach is what the charge reads. */
  override attemptStarted(attempt: Exchange): void {
    super.attemptStarted(attempt);
    this.#lastAttempt = attempt;
    this.#attempts++;
    this.#waitingToRetry = false;
  }

  upstreamAnswered(status: number, upstreamRequestId: string | undefined): void {
    this.attemptAnswered(status);
    this.upstreamNamed(upstreamRequestId);
  }

  /** Only after an attempt the provider cannot have billed: a client leaving meanwhile is charged nothing. */
  override async waitToRetry(ms: number): Promise<boolean> {
    this.#waitingToRetry = true;
    if (!(await super.waitToRetry(ms))) return false;
    this.#retries++;
    return true;
  }

  relayStarted(stream: boolean): void {
    this.relayBegan();
    if (stream) this.#stream = true;
  }

  /** The usage the relay read (a stream's as far as it came), and how it ended the call. */
  relayed(relayed: Relayed): void {
    if (!relayed.ok) return 'gone' in relayed ? this.endAbandoned() : this.endRefused(relayed.refusal, relayed.errorClass);
    this.summarized(relayed.summary);
    this.endAnswered(relayed.status, relayed.errorClass);
  }

  protected writeError(refusal: Refusal): void {
    const errorBody = this.errorProtocol?.errorBody ?? openAiErrorBody;
    const error = refusal.error;
    writeProxyError(this.req, this.res, error.status, 'application/json', errorBody(error, refusal.param ?? null, refusal.message ?? error.message), refusal.allow);
  }

  /** Gives back the body's bytes (if the answer has not already), then the limits slot with the call's charge, then records: both come back even if recording fails. */
  protected settle(outcome: Outcome): void {
    settleModelCall(this.ctx, this, this.held(this.#heldBody, this.#lastAttempt?.reached === true, this.#waitingToRetry), outcome);
  }
}
