// One turn of a Responses WebSocket connection (./responses-socket.ts): a `response.create` the
// client sent, checked as an HTTP call is (checkTurn), then forwarded and its events relayed until
// the response ends. Its state is a GatewayCall's, as far as the record and the charge read it
// (ModelCallState), and kept as a GatewayCall keeps it (call-facts.ts): each fact written by the
// one method that records it, the connection's steps calling them. It ends as an HTTP call does, the first
// ending said winning (endAnswered, endRefused, endFailed), or by endCut when the connection loses
// a leg; finish(), in the turn's `finally`, gives back the message's bytes and the limits slot
// with the turn's charge, and writes its one record, exactly once, however the turn ended.
import type { IncomingMessage } from 'node:http';
import type { WorkloadIdentity } from '../auth/identity.ts';
import { ERRORS } from '../http/errors.ts';
import { newExchange, type Exchange } from '../http/forward.ts';
import type { BodyHold } from '../http/held-bodies.ts';
import type { AttemptSpan, Outcome, Refusal } from '../http/lifecycle.ts';
import type { Redactor } from '../http/redactor.ts';
import type { SpanContext, TraceContext } from '../http/trace-context.ts';
import type { LimitsStore } from '../limits/admission.ts';
import { admitCall } from './admit-call.ts';
import { authenticateBot, type BotAuth } from './authenticate.ts';
import { withCallFacts } from './call-facts.ts';
import { checkCall, type CallPolicy } from './check-call.ts';
import { openAiError } from './protocols/openai.ts';
import type { CallSummary } from './protocols/protocol.ts';
import { responses } from './protocols/responses.ts';
import { settleModelCall, type SettleContext } from './settle.ts';
import type { Provider } from './providers.ts';
import { TURN_METHOD, type ModelCallState, type ModelSpanFacts } from './record.ts';

/** A turn extends nothing else: its facts are its whole base. */
class NoBase {}

export class SocketTurn extends withCallFacts(NoBase) implements ModelCallState, ModelSpanFacts {
  readonly method = TURN_METHOD;
  readonly target = '/v1/responses';
  readonly api = 'responses';
  readonly usageExpected = true;
  readonly stream = true;
  readonly startedAt = performance.now();
  /** The turn's bytes both ways and how it failed, if it did: `client_aborted`, `shutdown`, `reset`, `protocol`, `idle_timeout`. */
  readonly exchange: Exchange = newExchange();
  /** With tracing on, the turn's span: a turn is a model call, traced as an HTTP call is (its upstream leg is the connection's socket: no attempt spans). */
  readonly span: SpanContext | undefined;
  readonly attemptSpans: readonly AttemptSpan[] = [];
  readonly retries = 0;
  // What only a turn finds (the rest: call-facts.ts), each written by its one method below.
  #hold: BodyHold | undefined;
  #attempts = 0;
  #outcome: Outcome | undefined;
  #finished = false;

  constructor(
    readonly requestId: string,
    readonly trace: TraceContext | undefined,
    private readonly ctx: SettleContext,
  ) {
    super();
    this.span = ctx.trace?.tracing.start(trace);
  }

  /** 1 once the message was sent upstream (a turn is never sent twice). */
  get attempts(): number {
    return this.#attempts;
  }

  /** The message (its bytes counted, --max-held-request-bytes, until forwarded), and who, which provider, which credential the handshake settled. */
  received(message: Buffer, hold: BodyHold, on: { readonly identity: WorkloadIdentity; readonly provider: Provider; readonly redactor: Redactor }): void {
    this.bodySized(message.length);
    this.#hold = hold;
    this.identified(on.identity);
    this.servedBy(on.provider);
    this.prepared(on.redactor);
  }

  /** The message went upstream, once: its bytes leave the process's count. */
  sent(): void {
    this.#attempts = 1;
    this.exchange.reached = true;
    this.exchange.bytesIn = this.bytesIn;
    this.#hold?.release();
  }

  /** A piece of the turn's answer went to the client. */
  relayedPiece(bytes: number): void {
    this.exchange.bytesOut += bytes;
    this.relayBegan();
  }

  /** The upstream named the response (`resp_...`). */
  responseNamed(responseId: string): void {
    this.upstreamNamed(responseId.slice(0, 128));
  }

  /** The usage as far as the turn's events came (a cut turn is charged it). */
  relayed(summary: CallSummary): void {
    this.summarized(summary);
  }

  /** Ends the turn with a status and error class; the first ending wins. */
  endAnswered(status: number, error?: string): void {
    this.#outcome ??= { status, error };
  }

  /** A turn the gateway refused (the connection sends the error event). */
  endRefused(refusal: Refusal): void {
    this.endAnswered(refusal.error.status, refusal.error.code);
  }

  /** A turn a step threw in: recorded as internal. */
  endFailed(): void {
    this.endAnswered(ERRORS.internal.status, ERRORS.internal.code);
  }

  /** The turn was cut: by whom is its failure; a turn whose first event went out keeps its 200. */
  endCut(failure: NonNullable<Exchange['failure']>): void {
    this.exchange.failure ??= failure;
    this.endAnswered(this.relaying ? 200 : this.#attempts > 0 && failure !== 'client_aborted' && failure !== 'shutdown' ? 502 : 0);
  }

  /** Once, in the turn's `finally`: the bytes and the slot given back with the charge, then the record. */
  finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    const outcome = this.#outcome ?? { status: 0, error: undefined };
    settleModelCall(this.ctx, this, this.held(this.#hold, this.exchange.reached, false), outcome);
  }
}

/** The protocol's `error` event for a refusal, as OpenAI wraps an HTTP error on the socket (Codex reads `status` as the HTTP status). */
export function socketErrorEvent(refusal: Refusal): Buffer {
  const { error } = refusal;
  const body = { type: 'error', status: error.status, error: openAiError(error, refusal.param ?? null, refusal.message ?? error.message), ...(refusal.headers ? { headers: refusal.headers } : {}) };
  return Buffer.from(JSON.stringify(body), 'utf8');
}

/** What a turn's checks read of its connection. */
interface TurnChecks {
  readonly auth: BotAuth;
  readonly limits: LimitsStore | undefined;
  /** The gateway's policy with this connection's responses: what previous_response_id may name. */
  readonly policy: CallPolicy;
  /** The upgrade request: each turn authenticates again with its headers and its socket's peer. */
  readonly req: IncomingMessage;
  /** The provider the connection reaches. */
  readonly provider: Provider;
}

/** Why a turn is not sent: its refusal; `closes`: the token itself was refused, and the connection ends. */
type TurnRefused = { readonly refusal: Refusal; readonly closes: boolean };

/**
 * The turn's steps, an HTTP call's: the bot authenticated again and the deny list asked again,
 * the message checked (strict JSON, the allowlist and the connection's provider, stored state,
 * hosted tools, price fields), the turn admitted (its slot held by the turn from then on). The
 * refusal, or 'ending' when the connection began to end during a wait; undefined: send it.
 */
export async function checkTurn(turn: SocketTurn, message: Buffer, c: TurnChecks, ending: () => boolean): Promise<TurnRefused | 'ending' | undefined> {
  const who = await authenticateBot(c.req, c.auth, responses, Math.floor(Date.now() / 1000));
  if (ending()) return 'ending';
  if (!who.ok) return { refusal: who.refusal, closes: who.refusal.error.status === 401 || who.refusal.error.status === 403 };
  turn.identified(who.identity);
  const checked = checkCall(message, responses, undefined, c.policy);
  turn.checked(checked);
  if (!checked.ok) return { refusal: checked.refusal, closes: false };
  if (checked.provider !== c.provider) {
    const why = `model "${checked.model}" is served by provider ${checked.provider.config.name}; this WebSocket reaches provider ${c.provider.config.name}: send it as POST /v1/responses`;
    return { refusal: { error: ERRORS.modelNotOnRoute, param: 'model', message: why }, closes: false };
  }
  const admitted = await admitCall(c.limits, turn.identity, checked, undefined, message.length, responses, Date.now());
  // Held before anything else is looked at: the turn's finish gives it back, whatever follows.
  turn.admitted(admitted);
  if (ending()) return 'ending';
  if (!admitted.ok) return { refusal: admitted.refusal, closes: false };
  return undefined;
}
