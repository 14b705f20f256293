// One model call's state: who asked, what it asked for, the body bytes and the limits slot it
// holds, what the upstream answered. Steps (./handler.ts) fill it in from their results; finish()
// (in the handler's `finally`) gives back the body's bytes, charges the slot and writes the
// record (settle), exactly once, however the call ended.
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
import { chargeFor, type Charge } from '../limits/charge.ts';
import type { WorstCase } from '../limits/worst-case.ts';
import type { PriceTable } from '../limits/prices.ts';
import { openAiErrorBody } from './protocols/openai.ts';
import type { ApiName, CallSummary, WireProtocol } from './protocols/protocol.ts';
import type { Provider } from './providers.ts';
import { callFailure, modelRecord, type ModelCallState, type ModelRequestRecord, type ModelSpanFacts } from './record.ts';
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
  identity: WorkloadIdentity = NO_IDENTITY;
  provider: Provider | undefined;
  model: string | null = null;
  refusedModel: string | null = null;
  stream = false;
  relaying = false;
  summary: CallSummary | undefined;
  attempts = 0;
  /** The last upstream attempt's exchange, kept after it (`attempt` is let go of between attempts): whether the request reached the provider. */
  lastAttempt: Exchange | undefined;
  retries = 0;
  rateLimited = 0;
  upstreamRequestId: string | undefined;
  bytesIn = 0;
  limit: string | null = null;
  maxOutputTokens: number | undefined;
  /** The credential sent upstream, as the relays and the spans scrub it. */
  redactor: Redactor = NO_SECRETS;
  /** Its body's bytes in the process's count (--max-held-request-bytes), from before the body is read until the body is let go or finish(). */
  heldBody: BodyHold | undefined;
  /** The limits slot, held from admission until settle() gives it back with the charge. */
  reservation: Reservation | undefined;
  /** The most the call may cost (held against the budgets): what a call cut before its answer is charged. */
  worst: WorstCase | undefined;
  charge: Charge | undefined;
  /**
   * Between attempts after one the provider cannot have billed (a refused connect, a complete
   * error answer such as a 429): a client leaving now leaves nothing to charge.
   */
  waitingAfterUnbilled = false;

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

  protected writeError(refusal: Refusal): void {
    const errorBody = this.errorProtocol?.errorBody ?? openAiErrorBody;
    const error = refusal.error;
    writeProxyError(this.req, this.res, error.status, 'application/json', errorBody(error, refusal.param ?? null, refusal.message ?? error.message), refusal.allow);
  }

  /** Gives back the body's bytes (if the answer has not already), then the limits slot with the call's charge, then records: both come back even if recording fails. */
  protected settle(outcome: Outcome): void {
    try {
      this.heldBody?.release();
      if (this.reservation) {
        const failure = callFailure(this.exchange.failure, this.summary);
        const price = this.provider && this.model ? this.ctx.prices?.get(this.provider.config.name, this.model) : undefined;
        this.charge = chargeFor(
          {
            summary: this.summary,
            bytesIn: this.bytesIn,
            bytesOut: this.exchange.bytesOut,
            cut: failure !== undefined,
            reached: this.lastAttempt?.reached === true,
            status: outcome.status,
            betweenAttempts: this.waitingAfterUnbilled,
            streamed: this.stream,
          },
          price,
          this.worst,
        );
        this.reservation.release({ tokens: this.charge.tokens, costUsd: this.charge.costUsd });
      }
    } finally {
      const rec = modelRecord(this, outcome, this.charge, performance.now());
      this.ctx.record(rec);
      if (this.span?.sampled) this.ctx.trace?.span(rec, this);
    }
  }
}
