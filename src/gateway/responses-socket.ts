// The Responses API's WebSocket mode (`GET /v1/responses` upgraded), Codex's own transport: one
// connection for a session, each turn a `response.create` message answered by the events an HTTP
// stream would carry, a later turn continuing an earlier one by `previous_response_id` with only
// its new input. Every policy of an HTTP call applies to each turn.
//
// The handshake is an HTTP call (a GatewayCall, recorded with status 101 or its refusal): the bot
// authenticates as on HTTP, and a refusal is the HTTP status and body, before any upgrade. Then the
// gateway opens its own WebSocket to the provider, with the provider's key and the request's
// allowed headers only (prepare-upstream.ts), and answers the client's 101 once the provider's has
// come. A provider that does not switch (404) gets the client the 404 that makes it fall back to
// plain HTTP, as does a gateway whose providers speak no WebSocket mode (config.ts, `websocket`).
//
// Each client message is a turn (socket-turn.ts), one at a time: the bot token verified again
// and the deny list asked again (a token revoked or expired since is refused, and the connection
// closed with 1008), the message checked as an HTTP body is (strict JSON, the allowlist, stored
// state and hosted tools, price fields; check-call.ts, with `previous_response_id` allowed only for
// a response this connection's own turns produced), admitted against the limits, holding its slot
// until the turn ends. A refused turn gets the protocol's `error` event, with the status and code
// an HTTP call would have got, and is never forwarded; the connection stays open. The upstream's
// events are relayed as they arrive, through the stream redactor (a key split across frames is
// still one key: a message is redacted as one text), and read for the usage the turn is charged;
// its end (`response.completed`, `.failed`, `.incomplete`, an `error` event) ends the turn. A
// socket that closes mid-turn, on either side or at shutdown, ends the turn as cut and charged as
// an HTTP call cut the same way. Drain: the turn in progress finishes within the grace, then both
// legs close with 1001.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { errorForUpstream, ERRORS, type UpstreamError } from '../http/errors.ts';
import { newExchange, type Exchange } from '../http/forward.ts';
import type { BodyHold, HeldBodies } from '../http/held-bodies.ts';
import type { Refusal } from '../http/lifecycle.ts';
import { StreamRedactor } from '../http/redact.ts';
import type { UpgradeContext } from '../http/server.ts';
import { wasCutByShutdown } from '../http/sockets.ts';
import { WsEndpoint, type EndpointEvents } from '../http/ws-endpoint.ts';
import { CLOSE } from '../http/ws-frames.ts';
import { handshakeProblem, openUpstreamSocket, switchingProtocolsHead, withoutHandshakeHeaders, type UpgradeAnswer } from '../http/ws-upgrade.ts';
import type { LimitsStore } from '../limits/admission.ts';
import { admitCall } from './admit-call.ts';
import type { SendPolicy } from './attempts.ts';
import { authenticateBot, type BotAuth } from './authenticate.ts';
import { GatewayCall, type CallContext } from './call.ts';
import { checkCall, type CallPolicy } from './check-call.ts';
import { prepareUpstream } from './prepare-upstream.ts';
import { openAiErrorType } from './protocols/openai.ts';
import type { StreamReader } from './protocols/protocol.ts';
import { responses, socketEventFacts } from './protocols/responses.ts';
import type { Provider } from './providers.ts';
import { errorClassForStatus, relayAnswer, relayedHeaders, type RelayContext } from './relay.ts';
import type { LargeEventConsumer } from './sse.ts';
import { SocketTurn } from './socket-turn.ts';

/** What the metrics are told of WebSocket connections (the turns are counted from their records). */
export interface SocketMetrics {
  opened(provider: string): void;
  closed(provider: string): void;
  /** A peer's frames refused (a protocol violation, a binary message), by side and reason. */
  refused(side: 'client' | 'upstream', reason: string): void;
}

/** What a WebSocket connection needs of the gateway. */
export interface SocketContext extends CallContext, RelayContext {
  readonly auth: BotAuth;
  readonly policy: CallPolicy;
  readonly send: SendPolicy;
  readonly limits: LimitsStore | undefined;
  /** The largest message either way, and every frame of it: the body-size limit. */
  readonly maxBodyBytes: number;
  readonly heldBodies: HeldBodies;
  /** The provider that speaks WebSocket mode (at most one: the upgrade names no model), if any. */
  readonly socketProvider: Provider | undefined;
  readonly sockets?: SocketMetrics;
  /** How long a peer has to answer a close frame. */
  readonly socketCloseMs: number;
}

const RESPONSES_ROUTE = responses.routes[0]!;
const NO_BODY = Buffer.alloc(0);
/** An upstream event kept whole for its usage up to this size (as the SSE reader keeps one); past it, read in pieces. */
const EVENT_COPY_BYTES = 1024 * 1024;

/** The responses of one connection that previous_response_id may name, at most. */
const MAX_RESPONSE_IDS = 1000;

const nowSec = () => Math.floor(Date.now() / 1000);

/** The protocol's `error` event for a refusal, as OpenAI wraps an HTTP error on the socket (Codex reads `status` as the HTTP status). */
export function socketErrorEvent(refusal: Refusal): Buffer {
  const { error } = refusal;
  const body = { type: 'error', status: error.status, error: { type: error.type ?? openAiErrorType(error.status), code: error.code, message: refusal.message ?? error.message, param: refusal.param ?? null }, ...(refusal.headers ? { headers: refusal.headers } : {}) };
  return Buffer.from(JSON.stringify(body), 'utf8');
}

/** The listener's `upgrade`: one WebSocket connection, from its handshake to its last turn. */
export async function serveSocketUpgrade(ctx: SocketContext, req: IncomingMessage, res: ServerResponse, upgrade: UpgradeContext): Promise<void> {
  // An HTTP answer to an upgrade request ends its connection: what follows may be the other protocol.
  res.setHeader('connection', 'close');
  res.once('finish', () => req.socket.end());
  const call = new GatewayCall(ctx, req, res);
  let opened: OpenedSocket | undefined;
  try {
    opened = await handshake(ctx, call);
  } catch (err) {
    call.fail(err);
  } finally {
    call.finish();
  }
  if (opened === undefined) return;
  const connection = new ResponsesSocket(ctx, call, opened);
  upgrade.onDrain(() => connection.drain());
  await connection.run(upgrade.head);
}

interface OpenedSocket {
  readonly upstream: Socket;
  readonly head: Buffer;
  readonly secrets: readonly string[];
  readonly provider: Provider;
}

function refuseUpgrade(call: GatewayCall, refusal: Refusal, errorClass?: string): undefined {
  call.refuse({ ...refusal, closeAfter: true }, errorClass);
  return undefined;
}

/** The handshake's steps; the connection's two sockets when both legs switched. */
async function handshake(ctx: SocketContext, call: GatewayCall): Promise<OpenedSocket | undefined> {
  const q = call.target.indexOf('?');
  const path = q < 0 ? call.target : call.target.slice(0, q);
  const provider = ctx.socketProvider;
  const problem = handshakeProblem(call.method, call.req.headers);
  // Served on /v1/responses only, and only through a provider that speaks it: anything else gets
  // the 404 that makes a client fall back to plain HTTP (never a 400, which ends Codex's turn).
  if (path !== RESPONSES_ROUTE.path || provider === undefined || problem === 'not_websocket') return refuseUpgrade(call, { error: ERRORS.upgradeNotServed });
  if (q >= 0) return refuseUpgrade(call, { error: ERRORS.badQuery });
  if (problem === 'version') return refuseUpgrade(call, { error: ERRORS.socketVersion, headers: { 'sec-websocket-version': '13' } });
  if (problem === 'key') return refuseUpgrade(call, { error: ERRORS.socketHandshake });

  const who = await authenticateBot(call.req, ctx.auth, responses, nowSec());
  if (call.gone) return void call.abandon();
  if (!who.ok) return refuseUpgrade(call, who.refusal);
  call.identity = who.identity;
  call.provider = provider;

  const shape = { protocol: responses, route: RESPONSES_ROUTE, query: '', pathModel: undefined, model: '', provider, requestId: call.requestId, method: 'GET' as const };
  const upstream = await prepareUpstream(shape, call.req.headers, NO_BODY, ctx.log, Date.now());
  if (call.gone) return void call.abandon();
  if (!upstream.ok) return refuseUpgrade(call, upstream.refusal);

  const attempt = newExchange();
  call.attempt = attempt;
  call.lastAttempt = attempt;
  call.attempts = 1;
  const sent = openUpstreamSocket(upstream.target, ctx.send.timeouts, attempt);
  call.attach(sent.request);
  let answer: UpgradeAnswer;
  try {
    answer = await sent.answer;
  } catch (err) {
    if (call.gone) return void call.abandon();
    const failed = err as UpstreamError;
    return refuseUpgrade(call, { error: errorForUpstream(failed) }, failed.kind);
  }
  call.attach(undefined);
  if (answer.kind === 'refused') return refuseUpgrade(call, { error: ERRORS.upstreamProtocol, message: `the upstream's WebSocket handshake was not one RFC 6455 allows (${answer.problem})` }, 'upstream_bad_upgrade');
  const id = answer.res.headers['x-request-id'];
  call.upstreamRequestId = typeof id === 'string' ? id.slice(0, 128) : undefined;
  if (answer.kind === 'response') return void (await upgradeRefused(ctx, call, answer.res, attempt, upstream.secrets));
  if (call.gone) {
    answer.socket.destroy();
    return void call.abandon();
  }
  const relayed = withoutHandshakeHeaders(relayedHeaders(answer.res.rawHeaders, upstream.secrets));
  call.req.socket.write(switchingProtocolsHead(call.req.headers['sec-websocket-key']!, ['X-Client-Request-Id', call.requestId, ...relayed]));
  call.end(101);
  return { upstream: answer.socket, head: answer.head, secrets: upstream.secrets, provider };
}

/** The provider answered the upgrade without switching. */
async function upgradeRefused(ctx: SocketContext, call: GatewayCall, res: IncomingMessage, exchange: Exchange, secrets: readonly string[]): Promise<void> {
  const status = res.statusCode ?? 502;
  // It has no WebSocket mode after all: the 404 that makes the client fall back to HTTP.
  if (status === 404 || status === 405 || status === 426) {
    res.resume();
    return void refuseUpgrade(call, { error: ERRORS.upgradeNotServed }, `upstream_${status}`);
  }
  if (status < 400) {
    res.resume();
    return void refuseUpgrade(call, { error: ERRORS.upstreamProtocol }, 'upstream_bad_status');
  }
  // Its key refused (502 upstream_auth_failed), or an error answer, relayed redacted, as on HTTP.
  await relayAnswer(call, res, exchange, secrets, responses, ctx);
}

/** A copy of one upstream message for the protocol's reader: whole up to EVENT_COPY_BYTES, in pieces to its large-event consumer past that. */
class EventCopy {
  #parts: Buffer[] = [];
  #bytes = 0;
  /** Past the size: the consumer, or null when the reader has none. */
  #large: LargeEventConsumer | null | undefined;

  constructor(private readonly reader: StreamReader) {}

  push(piece: Buffer): void {
    if (this.#large !== undefined) return this.#large?.push(piece);
    if (this.#bytes + piece.length <= EVENT_COPY_BYTES) {
      this.#parts.push(piece);
      this.#bytes += piece.length;
      return;
    }
    this.#large = this.reader.largeEvent() ?? null;
    for (const part of [...this.#parts, piece]) this.#large?.push(part);
    this.#parts = [];
  }

  /** The message is whole: read; its bytes when it was kept whole. */
  end(): Buffer | undefined {
    if (this.#large !== undefined) {
      this.#large?.end();
      return undefined;
    }
    const whole = this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts);
    this.reader.event(whole);
    return whole;
  }
}

/** A turn in progress: its state, the reader of its events, and what ends it. */
interface LiveTurn {
  readonly turn: SocketTurn;
  readonly reader: StreamReader;
  /** Its first upstream message is still to come. */
  first: boolean;
  over: () => void;
}

/** One upstream message on its way to the client. */
interface Relayed {
  readonly redactor: StreamRedactor;
  readonly copy: EventCopy | undefined;
  readonly inTurn: LiveTurn | undefined;
  sent: boolean;
}

class ResponsesSocket {
  readonly #client: WsEndpoint;
  readonly #upstream: WsEndpoint;
  readonly #policy: CallPolicy;
  /** The responses this connection's turns produced: what its previous_response_id may name. */
  readonly #responses = new Set<string>();
  readonly #startedAt = performance.now();
  #turns = 0;
  #turn: LiveTurn | undefined;
  /** The last turn's end, finish included. */
  #settled: Promise<void> = Promise.resolve();
  /** The client's message being received, and its bytes' share of the process's count. */
  #incoming: Buffer[] = [];
  #incomingBytes = 0;
  #incomingHold: BodyHold | undefined;
  #dropping = false;
  #relayed: Relayed | undefined;
  #timer: NodeJS.Timeout | undefined;
  #paused = false;
  #draining = false;
  /** Why the connection ends (the first reason), once it began to. */
  #reason: string | undefined;
  #clientGone = false;
  #upstreamGone = false;
  #bothGone!: () => void;
  readonly #gone = new Promise<void>((resolve) => (this.#bothGone = resolve));

  constructor(
    private readonly ctx: SocketContext,
    private readonly call: GatewayCall,
    private readonly opened: OpenedSocket,
  ) {
    const options = { maxMessageBytes: ctx.maxBodyBytes, closeMs: ctx.socketCloseMs };
    this.#client = new WsEndpoint(call.req.socket, { ...options, role: 'server' }, this.#clientEvents());
    this.#upstream = new WsEndpoint(opened.upstream, { ...options, role: 'client' }, this.#upstreamEvents());
    this.#policy = { ...ctx.policy, request: { ...ctx.policy.request, socket: { responses: this.#responses } } };
  }

  /** The connection's life; its one finish (the metric, the log line) in the `finally`. */
  async run(head: Buffer): Promise<void> {
    this.ctx.sockets?.opened(this.opened.provider.config.name);
    try {
      this.#client.start(head);
      this.#upstream.start(this.opened.head);
      this.#idleBetweenTurns();
      await this.#gone;
      await this.#settled;
    } finally {
      this.#finish();
    }
  }

  /** The drain began: the turn in progress may finish, then both legs close with 1001. */
  drain(): void {
    this.#draining = true;
    if (this.#turn === undefined) this.#end('draining', [CLOSE.goingAway, 'the gateway is shutting down'], [CLOSE.goingAway, 'the gateway is shutting down']);
  }

  #clientEvents(): EndpointEvents {
    return {
      data: (piece, text, first, last) => this.#fromClient(piece, text, first, last),
      ping: (payload) => {
        this.#upstream.sendPing(payload);
        this.#flow();
      },
      closed: (code) => {
        this.#interrupt('client_aborted');
        this.#end('client_closed', undefined, [code ?? CLOSE.normal, '']);
      },
      refused: (v) => {
        this.ctx.sockets?.refused('client', v.reason);
        this.#interrupt('client_aborted');
        this.#end(`client_${v.reason}`, undefined, [CLOSE.goingAway, 'the client broke the WebSocket protocol']);
      },
      gone: () => {
        this.#clientGone = true;
        const shutdown = wasCutByShutdown(this.#client.socket);
        this.#interrupt(shutdown ? 'shutdown' : 'client_aborted');
        this.#end(shutdown ? 'shutdown' : 'client_gone', undefined, [CLOSE.goingAway, 'the client went away']);
        // A forced shutdown leaves no time for the upstream's answer.
        if (shutdown) this.#upstream.destroy();
        this.#maybeGone();
      },
      drained: () => this.#flow(),
    };
  }

  #upstreamEvents(): EndpointEvents {
    const toClient = (): [number, string] => (this.#turn ? [CLOSE.badGateway, 'the upstream ended the connection mid-response'] : [CLOSE.goingAway, 'the upstream ended the connection']);
    return {
      data: (piece, text, first, last) => this.#fromUpstream(piece, text, first, last),
      ping: (payload) => {
        this.#client.sendPing(payload);
        this.#flow();
      },
      closed: () => {
        const close = toClient();
        this.#interrupt('reset');
        this.#end('upstream_closed', close);
      },
      refused: (v) => {
        this.ctx.sockets?.refused('upstream', v.reason);
        this.#interrupt('protocol');
        this.#end(`upstream_${v.reason}`, [CLOSE.badGateway, 'the upstream broke the WebSocket protocol']);
      },
      gone: () => {
        this.#upstreamGone = true;
        const close = toClient();
        this.#interrupt('reset');
        this.#end('upstream_gone', close);
        this.#maybeGone();
      },
      drained: () => this.#flow(),
    };
  }

  /** A piece of a client message: kept (counted in the process's bytes held) until the message is whole. */
  #fromClient(piece: Buffer, text: boolean, first: boolean, last: boolean): void {
    if (first) this.#dropping = !text;
    if (this.#dropping) {
      // A binary message is no JSON the gateway can check: refused, the connection kept.
      if (last) {
        this.ctx.sockets?.refused('client', 'binary_message');
        this.#sendError({ error: ERRORS.socketEventNotServed, message: 'a binary message was refused: this WebSocket takes "response.create" messages as JSON text' });
      }
      return;
    }
    this.#incomingHold ??= this.ctx.heldBodies.open();
    this.#incomingBytes += piece.length;
    if (!this.#incomingHold.holdUpTo(this.#incomingBytes)) {
      // The process holds as many request bytes as it may: the message cannot be read whole.
      this.#incoming = [];
      this.#end('request_bodies_full', [CLOSE.tryAgainLater, 'the gateway holds as many request bytes as it may: retry shortly'], [CLOSE.goingAway, 'the client was refused']);
      return;
    }
    if (piece.length > 0) this.#incoming.push(piece);
    if (!last) return;
    const message = this.#incoming.length === 1 ? this.#incoming[0]! : Buffer.concat(this.#incoming, this.#incomingBytes);
    const hold = this.#incomingHold;
    this.#incoming = [];
    this.#incomingBytes = 0;
    this.#incomingHold = undefined;
    void this.#turnOf(message, hold);
  }

  /** One message, one turn: its steps, and in the `finally` its one finish. */
  async #turnOf(message: Buffer, hold: BodyHold): Promise<void> {
    const turn = new SocketTurn(`${this.call.requestId}.${++this.#turns}`, this.call.trace, this.ctx);
    turn.hold = hold;
    turn.bytesIn = message.length;
    turn.identity = this.call.identity;
    turn.provider = this.opened.provider;
    turn.secrets = this.opened.secrets;
    if (this.#turn !== undefined || this.#reason !== undefined) {
      // One response at a time per connection: every event is then the one turn's.
      if (this.#reason === undefined) this.#refuseTurn(turn, { error: ERRORS.socketTurnInFlight });
      else turn.end(0);
      return turn.finish();
    }
    let over!: () => void;
    const turnOver = new Promise<void>((resolve) => (over = resolve));
    const inTurn: LiveTurn = { turn, reader: responses.newStreamReader(() => performance.now()), first: true, over };
    this.#turn = inTurn;
    clearTimeout(this.#timer);
    let settle!: () => void;
    this.#settled = new Promise((resolve) => (settle = resolve));
    try {
      if (await this.#forward(inTurn, message)) await turnOver;
    } catch (err) {
      this.ctx.log({ event: 'handler_error', listener: 'model', error: (err as Error)?.name ?? 'Error', detail: String((err as Error)?.message ?? err) });
      if (!turn.relaying && turn.attempts === 0) this.#refuseTurn(turn, { error: ERRORS.internal });
      turn.end(ERRORS.internal.status, ERRORS.internal.code);
      this.#end('internal', [CLOSE.internalError, 'internal proxy error'], [CLOSE.goingAway, 'internal proxy error']);
    } finally {
      turn.summary = inTurn.reader.summary();
      if (this.#turn === inTurn) this.#turn = undefined;
      turn.finish();
      settle();
      this.#afterTurn();
    }
  }

  /** The turn's checks, as an HTTP call's; true when the message went upstream. */
  async #forward(inTurn: LiveTurn, bytes: Buffer): Promise<boolean> {
    const { turn } = inTurn;
    const who = await authenticateBot(this.call.req, this.ctx.auth, responses, nowSec());
    if (this.#reason !== undefined) return this.#cutBeforeSent(turn);
    if (!who.ok) {
      this.#refuseTurn(turn, who.refusal);
      // Revoked, expired or no longer valid: the connection ends with it.
      if (who.refusal.error.status === 401 || who.refusal.error.status === 403) this.#end('token_refused', [CLOSE.policyViolation, 'the bot token was refused'], [CLOSE.goingAway, 'the client was refused']);
      return false;
    }
    turn.identity = who.identity;

    const checked = checkCall(bytes, responses, undefined, this.#policy);
    turn.model = checked.model ?? null;
    turn.provider = checked.provider ?? this.opened.provider;
    if (checked.ok) turn.maxOutputTokens = checked.maxOutputTokens;
    if (!checked.ok) {
      turn.refusedModel = checked.refusedModel ?? null;
      this.#refuseTurn(turn, checked.refusal);
      return false;
    }
    if (checked.provider !== this.opened.provider) {
      const why = `model "${checked.model}" is served by provider ${checked.provider.config.name}; this WebSocket reaches provider ${this.opened.provider.config.name}: send it as POST /v1/responses`;
      this.#refuseTurn(turn, { error: ERRORS.modelNotOnRoute, param: 'model', message: why });
      return false;
    }

    const admitted = await admitCall(this.ctx.limits, turn.identity, checked, undefined, bytes.length, responses, Date.now());
    // Held before anything else is looked at: the turn's finish gives it back, whatever follows.
    if (admitted.ok) {
      turn.reservation = admitted.reservation;
      turn.worst = admitted.worst;
    }
    if (this.#reason !== undefined) return this.#cutBeforeSent(turn);
    if (!admitted.ok) {
      turn.limit = admitted.limit;
      this.#refuseTurn(turn, admitted.refusal);
      return false;
    }

    turn.attempts = 1;
    turn.exchange.reached = true;
    turn.exchange.bytesIn = bytes.length;
    this.#upstream.sendData(bytes, true, true, true);
    turn.hold?.release();
    this.#idleInTurn();
    this.#flow();
    return true;
  }

  /** The connection began to end while the turn was being checked: it is not sent. */
  #cutBeforeSent(turn: SocketTurn): false {
    turn.cut(wasCutByShutdown(this.#client.socket) ? 'shutdown' : 'client_aborted');
    return false;
  }

  /** A turn refused by the gateway: the protocol's error event, never forwarded; the connection stays. */
  #refuseTurn(turn: SocketTurn, refusal: Refusal): void {
    turn.end(refusal.error.status, refusal.error.code);
    this.#sendError(refusal);
  }

  #sendError(refusal: Refusal): void {
    this.#client.sendData(socketErrorEvent(refusal), true, true, true);
    this.#flow();
  }

  /** A piece of an upstream message, relayed as it came, redacted, and read for the turn's usage and end. */
  #fromUpstream(piece: Buffer, text: boolean, first: boolean, last: boolean): void {
    if (first) {
      if (!text) {
        // Nothing in OpenAI's protocol is binary, and a binary message could not be checked as text is.
        this.ctx.sockets?.refused('upstream', 'binary_message');
        this.#interrupt('protocol');
        this.#end('upstream_binary_message', [CLOSE.badGateway, 'the upstream sent a binary message'], [CLOSE.unsupportedData, 'binary_message']);
        return;
      }
      // A turn's events are the ones that come after its message went upstream: anything before
      // it is relayed, but can neither charge nor end the turn.
      const current = this.#turn?.turn.attempts === 1 ? this.#turn : undefined;
      this.#relayed = { redactor: new StreamRedactor(this.opened.secrets, false), copy: current && new EventCopy(current.reader), inTurn: current, sent: false };
    }
    const relayed = this.#relayed;
    if (relayed === undefined || this.#reason !== undefined) return;
    const inTurn = relayed.inTurn;
    let out: Buffer;
    try {
      out = relayed.redactor.push(piece);
      if (last) out = Buffer.concat([out, relayed.redactor.end()]);
    } catch {
      // Too ambiguous to be checked for the key (UnreadableText): never relayed.
      this.#interrupt('protocol');
      this.#end('upstream_unreadable', [CLOSE.badGateway, 'the upstream sent a message the gateway could not check'], [CLOSE.goingAway, 'refused']);
      return;
    }
    if (out.length > 0 || last) {
      this.#client.sendData(out, true, !relayed.sent, last);
      relayed.sent = true;
    }
    if (inTurn !== undefined && inTurn === this.#turn) {
      inTurn.turn.exchange.bytesOut += piece.length;
      inTurn.turn.relaying = true;
      relayed.copy?.push(piece);
      if (last) this.#eventOf(inTurn, relayed.copy!.end());
      else this.#idleInTurn();
    }
    if (last) this.#relayed = undefined;
    this.#flow();
  }

  /** A whole upstream message of the turn, read: its response id, an error's status, the turn's end. */
  #eventOf(inTurn: LiveTurn, whole: Buffer | undefined): void {
    const { turn } = inTurn;
    const facts = whole === undefined ? {} : socketEventFacts(whole);
    if (facts.responseId !== undefined) {
      // Bounded: a long session's oldest ids go first (the provider keeps fewer still).
      if (this.#responses.size >= MAX_RESPONSE_IDS) this.#responses.delete(this.#responses.values().next().value!);
      this.#responses.add(facts.responseId);
      turn.upstreamRequestId = facts.responseId.slice(0, 128);
    }
    if (inTurn.first && facts.status !== undefined && facts.status >= 400) {
      // The error an HTTP call would have been answered with: recorded (and charged) as that answer.
      if (facts.status === 429) turn.rateLimited++;
      turn.end(facts.status, errorClassForStatus(facts.status));
    }
    inTurn.first = false;
    turn.end(200);
    if (inTurn.reader.summary().terminated) inTurn.over();
    else this.#idleInTurn();
  }

  /** The connection lost a leg (or broke): the turn in progress is cut, by whom `failure` says. */
  #interrupt(failure: NonNullable<Exchange['failure']>): void {
    const inTurn = this.#turn;
    if (inTurn === undefined) return;
    inTurn.turn.cut(failure);
    inTurn.over();
  }

  #afterTurn(): void {
    this.#flow();
    if (this.#reason !== undefined) return;
    if (this.#draining) return this.drain();
    this.#idleBetweenTurns();
  }

  /**
   * The connection ends (the first reason is its record's): each leg still open is sent its close
   * frame, or just told nothing more will come. Idempotent; the sockets close after the handshake.
   */
  #end(reason: string, client?: [number, string], upstream?: [number, string]): void {
    this.#reason ??= reason;
    clearTimeout(this.#timer);
    if (client) this.#client.close(...client);
    if (upstream) this.#upstream.close(...upstream);
    if (!client && !this.#client.closing && !this.#clientGone) this.#client.close(CLOSE.goingAway, 'the connection is ending');
    if (!upstream && !this.#upstream.closing && !this.#upstreamGone) this.#upstream.close(CLOSE.goingAway, 'the connection is ending');
  }

  #maybeGone(): void {
    if (this.#clientGone && this.#upstreamGone) this.#bothGone();
  }

  /** Between turns, a connection with no message for the idle timeout is closed. */
  #idleBetweenTurns(): void {
    this.#arm(() => this.#end('idle', [CLOSE.goingAway, 'idle: no response.create for --upstream-idle-timeout'], [CLOSE.goingAway, 'idle']));
  }

  /** In a turn, an upstream that sends nothing for the idle timeout cuts the turn (as a stalled HTTP stream is cut). */
  #idleInTurn(): void {
    this.#arm(() => {
      this.#interrupt('idle_timeout');
      this.#end('upstream_idle', [CLOSE.badGateway, 'the upstream sent nothing for --upstream-idle-timeout'], [CLOSE.goingAway, 'idle']);
    });
  }

  #arm(expired: () => void): void {
    clearTimeout(this.#timer);
    const ms = this.ctx.send.timeouts.idleMs;
    if (ms > 0 && this.#reason === undefined) this.#timer = setTimeout(expired, ms);
  }

  /**
   * Backpressure both ways: while either socket's write buffer is past the mark, neither is read,
   * so a peer that does not read (its events, or the pongs to its pings) grows nothing here.
   */
  #flow(): void {
    const congested = this.#client.congested || this.#upstream.congested;
    if (congested === this.#paused) return;
    this.#paused = congested;
    if (congested) {
      this.#client.pause();
      this.#upstream.pause();
    } else {
      this.#client.resume();
      this.#upstream.resume();
    }
  }

  /** Once, when both legs are closed and the last turn has finished. */
  #finish(): void {
    clearTimeout(this.#timer);
    this.#incomingHold?.release();
    const provider = this.opened.provider.config.name;
    this.ctx.sockets?.closed(provider);
    const who = this.call.identity;
    this.ctx.log({
      event: 'websocket_closed',
      listener: 'model',
      request_id: this.call.requestId,
      provider,
      instance_id: who.instanceId,
      workflow: who.workflow,
      run_id: who.runId,
      turns: this.#turns,
      duration_ms: Math.round(performance.now() - this.#startedAt),
      reason: this.#reason ?? 'closed',
      client_close: this.#client.receivedCode ?? null,
      upstream_close: this.#upstream.receivedCode ?? null,
    });
  }
}
