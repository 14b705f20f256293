// A Responses API WebSocket connection once both legs switched (socket-handshake.ts): Codex's
// own transport, one connection for a session, each turn a `response.create` message answered by
// the events an HTTP stream would carry, a later turn continuing an earlier one by
// `previous_response_id` with only its new input. Every policy of an HTTP call applies to each turn.
//
// Each client message is a turn (socket-turn.ts), one at a time, checked as an HTTP call is
// (checkTurn: the token and the deny list again, the body, the limits), holding its slot until the
// turn ends. A refused turn gets the protocol's `error` event, with the status and code an HTTP
// call would have got, and is never forwarded; the connection stays open, but for a token refused
// since the handshake (close 1008). The upstream's messages are relayed as they arrive, redacted
// (socket-messages.ts), and read for the usage the turn is charged; its end (`response.completed`,
// `.failed`, `.incomplete`, an `error` event) ends the turn. A socket that closes mid-turn, on
// either side or at shutdown, ends the turn as cut and charged as an HTTP call cut the same way.
// Backpressure both ways; an idle connection and a stalled upstream are cut; drain: the turn in
// progress finishes within the grace, then both legs close with 1001.
import { ERRORS } from '../http/errors.ts';
import type { Exchange } from '../http/forward.ts';
import type { BodyHold } from '../http/held-bodies.ts';
import type { Refusal } from '../http/lifecycle.ts';
import { wasCutByShutdown } from '../http/sockets.ts';
import { WsEndpoint, type EndpointEvents } from '../http/ws-endpoint.ts';
import { CLOSE } from '../http/ws-frames.ts';
import type { GatewayCall } from './call.ts';
import type { CallPolicy } from './check-call.ts';
import type { StreamReader } from './protocols/protocol.ts';
import { responses, socketEventFacts } from './protocols/responses.ts';
import { errorClassForStatus } from './relay.ts';
import type { OpenedSocket, SocketContext } from './socket-context.ts';
import { ClientMessage, UpstreamMessage } from './socket-messages.ts';
import { checkTurn, SocketTurn, socketErrorEvent } from './socket-turn.ts';

/** The responses of one connection that previous_response_id may name, at most. */
const MAX_RESPONSE_IDS = 1000;

/** A turn in progress: its state, the reader of its events, and what ends it. */
interface LiveTurn {
  readonly turn: SocketTurn;
  readonly reader: StreamReader;
  /** Its first upstream message is still to come. */
  first: boolean;
  over: () => void;
}

/** The upstream message on its way to the client, and the turn it counts for (if any). */
interface Relayed {
  readonly message: UpstreamMessage;
  readonly live: LiveTurn | undefined;
}

export class ResponsesSocket {
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
  /** The client's message being received (a binary one is dropped). */
  #incoming: ClientMessage | undefined;
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
    this.#incoming ??= new ClientMessage(this.ctx.heldBodies);
    if (!this.#incoming.add(piece)) {
      // The process holds as many request bytes as it may: the message cannot be read whole.
      this.#end('request_bodies_full', [CLOSE.tryAgainLater, 'the gateway holds as many request bytes as it may: retry shortly'], [CLOSE.goingAway, 'the client was refused']);
      return;
    }
    if (!last) return;
    const { bytes: message, hold } = this.#incoming.take();
    this.#incoming = undefined;
    void this.#turnOf(message, hold);
  }

  /** One message, one turn: its steps, and in the `finally` its one finish. */
  async #turnOf(message: Buffer, hold: BodyHold): Promise<void> {
    const turn = new SocketTurn(`${this.call.requestId}.${++this.#turns}`, this.call.trace, this.ctx);
    turn.received(message, hold, { identity: this.call.identity, provider: this.opened.provider, redactor: this.opened.redactor });
    if (this.#turn !== undefined || this.#reason !== undefined) {
      // One response at a time per connection: every event is then the one turn's.
      if (this.#reason === undefined) this.#refuseTurn(turn, { error: ERRORS.socketTurnInFlight });
      else turn.endAnswered(0); // the connection is ending: dropped unsent, nothing answered
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
      turn.endFailed();
      this.#end('internal', [CLOSE.internalError, 'internal proxy error'], [CLOSE.goingAway, 'internal proxy error']);
    } finally {
      turn.relayed(inTurn.reader.summary());
      if (this.#turn === inTurn) this.#turn = undefined;
      turn.finish();
      settle();
      this.#afterTurn();
    }
  }

  /** The turn's checks, as an HTTP call's (checkTurn); true when the message went upstream. */
  async #forward(inTurn: LiveTurn, bytes: Buffer): Promise<boolean> {
    const { turn } = inTurn;
    const against = { auth: this.ctx.auth, limits: this.ctx.limits, policy: this.#policy, req: this.call.req, provider: this.opened.provider };
    const refused = await checkTurn(turn, bytes, against, () => this.#reason !== undefined);
    if (refused === 'ending') return this.#cutBeforeSent(turn);
    if (refused !== undefined) {
      this.#refuseTurn(turn, refused.refusal);
      // Revoked, expired or no longer valid: the connection ends with it.
      if (refused.closes) this.#end('token_refused', [CLOSE.policyViolation, 'the bot token was refused'], [CLOSE.goingAway, 'the client was refused']);
      return false;
    }
    this.#upstream.sendData(bytes, true, true, true);
    turn.sent();
    this.#idleInTurn();
    this.#flow();
    return true;
  }

  /** The connection began to end while the turn was being checked: it is not sent. */
  #cutBeforeSent(turn: SocketTurn): false {
    turn.endCut(wasCutByShutdown(this.#client.socket) ? 'shutdown' : 'client_aborted');
    return false;
  }

  /** A turn refused by the gateway: the protocol's error event, never forwarded; the connection stays. */
  #refuseTurn(turn: SocketTurn, refusal: Refusal): void {
    turn.endRefused(refusal);
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
      this.#relayed = { message: new UpstreamMessage(this.opened.redactor, this.#client, current?.reader), live: current };
    }
    const relayed = this.#relayed;
    if (relayed === undefined || this.#reason !== undefined) return;
    let whole: Buffer | undefined;
    try {
      whole = relayed.message.push(piece, last);
    } catch {
      // Too ambiguous to be checked for the key (UnreadableText): its rest is never relayed.
      this.#interrupt('protocol');
      this.#end('upstream_unreadable', [CLOSE.badGateway, 'the upstream sent a message the gateway could not check'], [CLOSE.goingAway, 'refused']);
      return;
    }
    const inTurn = relayed.live;
    if (inTurn !== undefined && inTurn === this.#turn) {
      inTurn.turn.relayedPiece(piece.length);
      if (last) this.#eventOf(inTurn, whole);
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
      turn.responseNamed(facts.responseId);
    }
    if (inTurn.first) {
      // The turn's answer is its first message: an error is what an HTTP call would have been answered with, recorded (and charged) as that answer.
      inTurn.first = false;
      const failed = facts.status !== undefined && facts.status >= 400;
      if (facts.status === 429) turn.throttled();
      if (failed) turn.endAnswered(facts.status!, errorClassForStatus(facts.status!));
      else turn.endAnswered(200);
    }
    if (inTurn.reader.summary().terminated) inTurn.over();
    else this.#idleInTurn();
  }

  /** The connection lost a leg (or broke): the turn in progress is cut, by whom `failure` says. */
  #interrupt(failure: NonNullable<Exchange['failure']>): void {
    const inTurn = this.#turn;
    if (inTurn === undefined) return;
    inTurn.turn.endCut(failure);
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
    for (const leg of [this.#client, this.#upstream]) {
      if (congested) leg.pause();
      else leg.resume();
    }
  }

  /** Once, when both legs are closed and the last turn has finished. */
  #finish(): void {
    clearTimeout(this.#timer);
    this.#incoming?.release();
    const provider = this.opened.provider.config.name;
    this.ctx.sockets?.closed(provider);
    const who = this.call.identity;
    const duration_ms = Math.round(performance.now() - this.#startedAt);
    const closes = { client_close: this.#client.receivedCode ?? null, upstream_close: this.#upstream.receivedCode ?? null };
    this.ctx.log({ event: 'websocket_closed', listener: 'model', request_id: this.call.requestId, provider, instance_id: who.instanceId, workflow: who.workflow, run_id: who.runId, turns: this.#turns, duration_ms, reason: this.#reason ?? 'closed', ...closes });
  }
}
