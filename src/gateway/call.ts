// One model call's state: who asked, what it asked for, the body bytes and the limits slot it
// holds, what the upstream answered. Private: the handler (./handler.ts) records each step's
// result through one method, and the send step tells of each attempt as it goes (what the charge
// and the record need of a call cut short); the record reads it through getters. finish() (in the
// handler's `finally`) gives back the body's bytes, charges the slot and writes the record
// (settle), exactly once, however the call ended.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { NO_IDENTITY, type WorkloadIdentity } from '../auth/identity.ts';
import type { Exchange } from '../http/forward.ts';
import type { BodyHold } from '../http/held-bodies.ts';
import { RequestLifecycle, type Outcome, type Refusal, type SpanSink } from '../http/lifecycle.ts';
import type { LogSink } from '../http/log.ts';
import { NO_SECRETS, type Redactor } from '../http/redactor.ts';
import type { GatewayLogEvent } from './log-events.ts';
import { writeProxyError } from '../http/respond.ts';
import type { Reservation } from '../limits/admission.ts';
import type { AdmittedCall } from './admit-call.ts';
import type { RequestBody } from './body.ts';
import type { CheckedCall } from './check-call.ts';
import type { Relayed } from './relay.ts';
import type { WorstCase } from '../limits/worst-case.ts';
import type { PriceTable } from '../limits/prices.ts';
import { openAiErrorBody } from './protocols/openai.ts';
import type { ApiName, CallSummary, WireProtocol } from './protocols/protocol.ts';
import type { Provider } from './providers.ts';
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

export class GatewayCall extends RequestLifecycle implements ModelCallState, ModelSpanFacts {
  readonly route: GatewayRoute;
  /** The protocol whose clients are talking (also when its route refused them): its error format and request-id header. */
  readonly errorProtocol: WireProtocol | undefined;
  readonly requestId: string;
  readonly usageExpected: boolean;
  // What the steps found: each written by the one method below that records it, read by getters.
  #identity: WorkloadIdentity = NO_IDENTITY;
  #heldBody: BodyHold | undefined;
  #bytesIn = 0;
  #provider: Provider | undefined;
  #model: string | null = null;
  #refusedModel: string | null = null;
  #stream = false;
  #maxOutputTokens: number | undefined;
  #reservation: Reservation | undefined;
  #worst: WorstCase | undefined;
  #limit: string | null = null;
  #redactor: Redactor = NO_SECRETS;
  #attempts = 0;
  #lastAttempt: Exchange | undefined;
  #retries = 0;
  #rateLimited = 0;
  #upstreamRequestId: string | undefined;
  #waitingToRetry = false;
  #relaying = false;
  #summary: CallSummary | undefined;

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
  get identity(): WorkloadIdentity {
    return this.#identity;
  }
  get bytesIn(): number {
    return this.#bytesIn;
  }
  get provider(): Provider | undefined {
    return this.#provider;
  }
  get model(): string | null {
    return this.#model;
  }
  get refusedModel(): string | null {
    return this.#refusedModel;
  }
  get stream(): boolean {
    return this.#stream;
  }
  get maxOutputTokens(): number | undefined {
    return this.#maxOutputTokens;
  }
  get limit(): string | null {
    return this.#limit;
  }
  get redactor(): Redactor {
    return this.#redactor;
  }
  get attempts(): number {
    return this.#attempts;
  }
  get retries(): number {
    return this.#retries;
  }
  get rateLimited(): number {
    return this.#rateLimited;
  }
  get upstreamRequestId(): string | undefined {
    return this.#upstreamRequestId;
  }
  get relaying(): boolean {
    return this.#relaying;
  }
  get summary(): CallSummary | undefined {
    return this.#summary;
  }

  identified(identity: WorkloadIdentity): void {
    this.#identity = identity;
  }

  /** The body's bytes in the process's count (--max-held-request-bytes), given back in settle() at the latest. */
  holdBody(hold: BodyHold): BodyHold {
    return (this.#heldBody = hold);
  }

  received(body: RequestBody): void {
    this.#bytesIn = body.size;
  }

  /** The model and provider asked for (a refusal names them too), or the model the allowlist refused. */
  checked(checked: CheckedCall): void {
    this.#model = checked.model ?? null;
    this.#provider = checked.provider;
    if (!checked.ok) this.#refusedModel = checked.refusedModel ?? null;
    else {
      this.#stream = checked.stream;
      this.#maxOutputTokens = checked.maxOutputTokens;
    }
  }

  /** The limits slot and the worst case held against the budgets, given back by settle(); or the limit that refused. */
  admitted(admitted: AdmittedCall): void {
    if (!admitted.ok) this.#limit = admitted.limit;
    else {
      this.#reservation = admitted.reservation;
      this.#worst = admitted.worst;
    }
  }

  /** A WebSocket's handshake: no body chose the provider. */
  servedBy(provider: Provider): void {
    this.#provider = provider;
  }

  prepared(redactor: Redactor): void {
    this.#redactor = redactor;
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
    this.#upstreamRequestId = upstreamRequestId;
  }

  throttled(): void {
    this.#rateLimited++;
  }

  /** Only after an attempt the provider cannot have billed: a client leaving meanwhile is charged nothing. */
  override async waitToRetry(ms: number): Promise<boolean> {
    this.#waitingToRetry = true;
    if (!(await super.waitToRetry(ms))) return false;
    this.#retries++;
    return true;
  }

  relayStarted(stream: boolean): void {
    this.#relaying = true;
    if (stream) this.#stream = true;
  }

  /** The usage the relay read (a stream's as far as it came), and how it ended the call. */
  relayed(relayed: Relayed): void {
    if (!relayed.ok) return 'gone' in relayed ? this.endAbandoned() : this.endRefused(relayed.refusal, relayed.errorClass);
    this.#summary = relayed.summary;
    this.endAnswered(relayed.status, relayed.errorClass);
  }

  protected writeError(refusal: Refusal): void {
    const errorBody = this.errorProtocol?.errorBody ?? openAiErrorBody;
    const error = refusal.error;
    writeProxyError(this.req, this.res, error.status, 'application/json', errorBody(error, refusal.param ?? null, refusal.message ?? error.message), refusal.allow);
  }

  /** Gives back the body's bytes (if the answer has not already), then the limits slot with the call's charge, then records: both come back even if recording fails. */
  protected settle(outcome: Outcome): void {
    const held = { body: this.#heldBody, reservation: this.#reservation, worst: this.#worst, reached: this.#lastAttempt?.reached === true, betweenAttempts: this.#waitingToRetry };
    settleModelCall(this.ctx, this, held, outcome);
  }
}
