// A listener's client connections: the caps on how many (in all, per client address), one
// request at a time per connection (pipelined ones wait their turn), the handlers still running,
// and the two ways they end: the graceful drain and the forced cut.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { connectionVerdict, KeyedCounts, LogInterval, type ConnectionCaps } from './connection-caps.ts';
import type { LogSink } from './log.ts';
import type { HttpLogEvent } from './log-events.ts';
import { markCutByShutdown } from './sockets.ts';

/**
 * At drain start, a connection whose request head is still arriving gets this long (or the
 * header timeout, if shorter) to complete it; the request is then served and the connection
 * closed. Long enough for bytes a client sent before it saw the drain to land, short enough
 * that a slow or stalled head cannot hold the process: it is cut when this ends.
 */
const DRAIN_HEAD_DEADLINE_MS = 500;

/** How long requests cut at the end of the drain's grace have to write their records. */
const SETTLE_DEADLINE_MS = 1000;

/** What the drain does with one client connection (see drainAction). */
export type DrainAction = 'wait' | 'close' | 'deadline';

/** The per-connection state the drain decides on. */
export interface ConnectionState {
  /** Requests whose response has not finished (more than one only when pipelined). */
  inProgress: number;
  /** socket.bytesRead when the connection last had nothing in progress. */
  bytesAtIdle: number;
}

/** A client connection: the drain's state, and the requests pipelined behind the one being served. */
interface Connection extends ConnectionState {
  /** The socket requests arrive on: the one that arrived, or (TLS) the TLS socket once its handshake is done. */
  socket: Socket;
  /** Its source address, as counted against the per-client cap. */
  readonly client: string;
  closed: boolean;
  /** A request of this connection is being served (its response has not closed). */
  serving: boolean;
  /** Pipelined requests waiting for the one ahead of them to finish, in arrival order. */
  readonly queue: (() => void)[];
  /** An upgraded connection (a WebSocket): what the drain tells it. */
  drain?: () => void;
}

export class ConnectionTable {
  /** From now on responses close their connection and /healthz says draining. */
  draining = false;
  // Node's own bookkeeping counts a connection that has not sent a complete head as active
  // until its header timeout, so closeIdleConnections() leaves never-used connections (pools
  // and load balancers pre-connect) and half-sent heads open: the drain tracks its own.
  readonly #connections = new Map<Socket, Connection>();
  // Connections per source address: one client holding the listener's every connection (or
  // the process's every descriptor) would refuse all the others and /healthz with them.
  readonly #perClient = new KeyedCounts();
  /** The handlers still running, for a forced cut to wait on. */
  readonly #inFlight = new Set<Promise<void>>();
  readonly #refusals = new LogInterval();

  constructor(
    private readonly name: string,
    private readonly caps: ConnectionCaps,
    private readonly log: LogSink<HttpLogEvent>,
    private readonly onRefused?: (reason: 'total' | 'per_client') => void,
  ) {}

  get size(): number {
    return this.#connections.size;
  }

  /**
   * A new connection, as it arrives (for TLS, before its handshake): within the caps it is
   * tracked until it closes; past them it is closed at once, counted, logged at most once an interval.
   */
  accept(socket: Socket): void {
    const client = socket.remoteAddress ?? '';
    const verdict = connectionVerdict(this.#connections.size, this.#perClient.of(client), this.caps);
    if (verdict !== 'accept') return this.#refuse(socket, client, verdict);
    this.#perClient.tryAcquire(client, 0);
    const state: Connection = { socket, client, closed: false, inProgress: 0, bytesAtIdle: 0, serving: false, queue: [] };
    this.#connections.set(socket, state);
    socket.once('close', () => this.#closed(state));
  }

  /**
   * TLS: the TLS socket, its handshake done, takes the place of the socket it was made from (and
   * counted as on arrival). One that was not accepted (refused by a cap, or already gone) is closed.
   */
  handOver(arrived: Socket | undefined, secure: Socket): void {
    const state = arrived === undefined ? undefined : this.#connections.get(arrived);
    if (state === undefined || state.closed) return void secure.destroy();
    this.#connections.delete(state.socket);
    state.socket = secure;
    this.#connections.set(secure, state);
    secure.once('close', () => this.#closed(state));
  }

  #closed(state: Connection): void {
    if (state.closed) return;
    state.closed = true;
    this.#perClient.release(state.client);
    this.#connections.delete(state.socket);
    if (state.queue.length === 0) return;
    this.log({ event: 'pipelined_dropped', listener: this.name, requests: state.queue.length });
    state.queue.length = 0;
  }

  #refuse(socket: Socket, client: string, reason: 'total' | 'per_client'): void {
    socket.destroy();
    this.onRefused?.(reason);
    const refused = this.#refusals.note(performance.now());
    if (refused === undefined) return;
    this.log({ event: 'connection_refused', listener: this.name, reason, client, refused, cap: reason === 'total' ? this.caps.total : this.caps.perClient });
  }

  /**
   * One request at a time per connection. Node parses pipelined requests as they arrive and
   * hands each to the handler at once: every one would open its own upstream request, and those
   * queued behind the first would outlive a client that left (Node never closes a response
   * still queued behind another). So a pipelined request is served only once the one ahead of it
   * has finished; a connection that closes drops whatever it still had queued, unserved.
   */
  oneAtATime(req: IncomingMessage, res: ServerResponse, serve: () => void): void {
    const socket = req.socket;
    const state = this.#connections.get(socket);
    if (!state) return;
    this.#track(socket, state, res);
    const run = () => {
      state.serving = true;
      res.once('close', () => {
        state.serving = false;
        if (socket.destroyed) state.queue.length = 0; // the client left: nothing queued is served
        else state.queue.shift()?.();
      });
      serve();
    };
    if (state.serving) state.queue.push(run);
    else run();
  }

  /**
   * The connection switched protocols (a WebSocket): its request stays in progress until the socket
   * closes; the drain tells it to finish (at once if the drain has begun), and its grace's end cuts it.
   */
  upgraded(socket: Socket, drain: () => void): void {
    const state = this.#connections.get(socket);
    if (state === undefined) return;
    state.drain = drain;
    if (this.draining) drain();
  }

  /** Counts a request in progress on its connection until its response is over. */
  #track(socket: Socket, state: Connection, res: ServerResponse): void {
    state.inProgress++;
    res.once('close', () => {
      state.inProgress--;
      if (state.inProgress > 0) return;
      state.bytesAtIdle = socket.bytesRead;
      // A response that began before the drain did not say Connection: close: end it here,
      // once its bytes are written, instead of waiting for the client or the idle timeout.
      if (this.draining) socket.destroySoon();
    });
  }

  /** A handler's promise, kept until it settles. */
  serving(handled: void | Promise<void>): void {
    if (!handled) return;
    this.#inFlight.add(handled);
    void handled.finally(() => this.#inFlight.delete(handled));
  }

  /**
   * Stop accepting and close every connection with no request in progress; a request head
   * still arriving gets DRAIN_HEAD_DEADLINE_MS; in-flight requests get up to graceMs, each
   * connection closing as its response ends; then the rest are cut.
   */
  drain(server: Server, graceMs: number, headerMs: number): Promise<void> {
    this.draining = true;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    let headsArriving = false;
    for (const [socket, state] of this.#connections) {
      state.drain?.();
      const action = drainAction(state, socket.bytesRead);
      if (action === 'close') socket.destroy();
      else if (action === 'deadline') headsArriving = true;
    }
    // Heads that were still arriving: whatever has not become a request by now is cut.
    const headDeadline = headsArriving
      ? setTimeout(() => {
          for (const [socket, state] of this.#connections) if (state.inProgress === 0) socket.destroy();
        }, Math.min(DRAIN_HEAD_DEADLINE_MS, headerMs || DRAIN_HEAD_DEADLINE_MS))
      : undefined;
    // The grace is over: what is still open is cut by the shutdown, and recorded so (not as a client that left).
    const force = setTimeout(() => this.#cutAll(server), graceMs);
    // Every connection closed: the requests they carried still finish (recorded, charged, slots
    // given back) before the drain is over, within the forced cut's deadline.
    return closed
      .finally(() => {
        clearTimeout(headDeadline);
        clearTimeout(force);
      })
      .then(() => this.#settled(SETTLE_DEADLINE_MS));
  }

  /** Resolves once every handler in progress has finished, or after `deadlineMs` at most. */
  async #settled(deadlineMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, deadlineMs)));
    await Promise.race([Promise.allSettled([...this.#inFlight]), deadline]);
    clearTimeout(timer);
  }

  /**
   * Cuts every connection now (a forced shutdown; each request on one ends as `shutdown`) and
   * resolves once every handler has finished (recorded, charged, its slots given back), or after
   * `deadlineMs` at most.
   */
  async cut(server: Server, deadlineMs: number): Promise<void> {
    this.draining = true;
    server.close();
    this.#cutAll(server);
    await this.#settled(deadlineMs);
  }

  /** Every connection cut, and recorded as cut by the shutdown (not as a client that left). */
  #cutAll(server: Server): void {
    for (const socket of this.#connections.keys()) markCutByShutdown(socket);
    server.closeAllConnections();
    // Node's list no longer holds an upgraded connection: destroyed here (destroying one Node closed already does nothing).
    for (const socket of this.#connections.keys()) socket.destroy();
  }
}

/**
 * Pure: at drain start, a connection with a request in progress is waited for (it closes when
 * its response ends); one that received bytes since it was last idle has a head arriving and
 * gets a short deadline; any other (never used, or idle between requests) is closed at once.
 */
export function drainAction(state: ConnectionState, bytesRead: number): DrainAction {
  if (state.inProgress > 0) return 'wait';
  return bytesRead > state.bytesAtIdle ? 'deadline' : 'close';
}
