// Listener lifecycle shared by both proxies: the node:http server and its timeouts, /healthz,
// refusal of CONNECT and upgrades, isolation of handler errors, and graceful draining.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { formatAddress, type ListenAddress } from './address.ts';
import { connectionVerdict, KeyedCounts, REFUSAL_LOG_INTERVAL_MS, type ConnectionCaps } from './connection-caps.ts';
import { ERRORS, type ProxyError } from './errors.ts';
import type { Refusal } from './lifecycle.ts';
import type { LogSink } from './log.ts';
import { markCutByShutdown, STREAM_HIGH_WATER_MARK } from './sockets.ts';

/**
 * At drain start, a connection whose request head is still arriving gets this long (or the
 * header timeout, if shorter) to complete it; the request is then served and the connection
 * closed. Long enough for bytes a client sent before it saw the drain to land, short enough
 * that a slow or stalled head cannot hold the process: it is cut when this ends.
 */
const DRAIN_HEAD_DEADLINE_MS = 500;

export interface ListenerTimeouts {
  /** Time a client has to send the complete request head. */
  readonly headerMs: number;
  /** An idle keep-alive connection is closed after this long. */
  readonly keepAliveMs: number;
}

export interface ListenerSpec {
  readonly name: string;
  /** The command-line flag that set the address, named when it cannot be listened on. */
  readonly flag: string;
  readonly address: ListenAddress;
  readonly timeouts: ListenerTimeouts;
  readonly caps: ConnectionCaps;
  /** Called for each connection refused by a cap (the metric); the log line is the listener's. */
  readonly onConnectionRefused?: (reason: 'total' | 'per_client') => void;
  readonly log: LogSink;
  /** Serves one request; the listener waits for its promise when it cuts every connection (forced shutdown). */
  readonly handle: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;
  /**
   * `GET /` and `HEAD /` answer as /healthz does (the model gateway: Claude Code sends `HEAD /`
   * to its base URL at start), never counted or logged as a request.
   */
  readonly rootIsHealth?: boolean;
  /**
   * Refuses a request before any handler runs (HTTP version, Host, a GET with a body), or one whose
   * handler threw synchronously: rendered as this listener's clients read errors (git: text,
   * gateway: JSON) and recorded like every other refusal.
   */
  readonly refuse: (req: IncomingMessage, res: ServerResponse, refusal: Refusal) => void;
}

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
  /** A request of this connection is being served (its response has not closed). */
  serving: boolean;
  /** Pipelined requests waiting for the one ahead of them to finish, in arrival order. */
  readonly queue: (() => void)[];
}

export interface Listener {
  readonly name: string;
  readonly server: Server;
  /** e.g. `127.0.0.1:8447`, the address actually bound (port 0 resolved). */
  readonly address: string;
  readonly port: number;
  /** Client connections open right now. */
  connections(): number;
  /** From now on /healthz answers 503 and responses close their connection. */
  markDraining(): void;
  /**
   * Stop accepting and close every connection with no request in progress; a request head
   * still arriving gets DRAIN_HEAD_DEADLINE_MS; in-flight requests get up to graceMs, each
   * connection closing as its response ends; then the rest are cut.
   */
  close(graceMs: number): Promise<void>;
  /**
   * Cuts every connection now (a forced shutdown) and resolves once every request in progress
   * has finished (recorded, charged, its slot given back), or after `deadlineMs` at most.
   */
  cut(deadlineMs: number): Promise<void>;
}

export async function startListener(spec: ListenerSpec): Promise<Listener> {
  let draining = false;
  // Node's own bookkeeping counts a connection that has not sent a complete head as active
  // until its header timeout, so closeIdleConnections() leaves never-used connections (pools
  // and load balancers pre-connect) and half-sent heads open: the drain tracks its own.
  const connections = new Map<Socket, Connection>();
  /** Counts a request in progress on its connection until its response is over. */
  const track = (socket: Socket, state: Connection, res: ServerResponse) => {
    state.inProgress++;
    res.once('close', () => {
      state.inProgress--;
      if (state.inProgress > 0) return;
      state.bytesAtIdle = socket.bytesRead;
      // A response that began before the drain did not say Connection: close: end it here,
      // once its bytes are written, instead of waiting for the client or the idle timeout.
      if (draining) socket.destroySoon();
    });
  };
  /**
   * One request at a time per connection. Node parses pipelined requests as they arrive and
   * hands each to the handler at once: every one would open its own upstream request, and those
   * queued behind the first would outlive a client that left (Node never closes a response
   * still queued behind another). So a pipelined request is served only once the one ahead of it
   * has finished; a connection that closes drops whatever it still had queued, unserved.
   */
  const admit = (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const state = connections.get(socket);
    if (!state) return;
    track(socket, state, res);
    const run = () => {
      state.serving = true;
      res.once('close', () => {
        state.serving = false;
        if (socket.destroyed) state.queue.length = 0; // the client left: nothing queued is served
        else state.queue.shift()?.();
      });
      serve(req, res);
    };
    if (state.serving) state.queue.push(run);
    else run();
  };
  const serve = (req: IncomingMessage, res: ServerResponse) => {
    if (draining) res.setHeader('connection', 'close');
    // Node's parser lets HTTP/0.9-style and HTTP/2.0-labelled request lines through, and
    // HTTP/1.0 without Host: none of them is a client we serve, so none is forwarded.
    const formError =
      requestFormError(req.httpVersionMajor, req.httpVersionMinor, req.headers.host) ??
      bodylessMethodError(req.method ?? '', req.headers['content-length'], req.headers['transfer-encoding']);
    if (formError) {
      res.setHeader('connection', 'close');
      spec.refuse(req, res, { error: formError });
      return;
    }
    if ((req.url === '/healthz' || (spec.rootIsHealth === true && req.url === '/')) && (req.method === 'GET' || req.method === 'HEAD')) {
      const status = draining ? 503 : 200;
      const body = draining ? 'draining\n' : 'ok\n';
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': body.length, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    try {
      const serving = spec.handle(req, res);
      if (serving) {
        inFlight.add(serving);
        void serving.finally(() => inFlight.delete(serving));
      }
    } catch (err) {
      // One request's bug must not take the listener down; the cause goes to the log only.
      spec.log({ event: 'handler_error', listener: spec.name, error: (err as Error)?.name ?? 'Error', detail: String((err as Error)?.message ?? err) });
      if (!res.headersSent) spec.refuse(req, res, { error: ERRORS.internal });
      else res.destroy();
    }
  };
  /** The handlers still running, for a forced shutdown to wait on. */
  const inFlight = new Set<Promise<void>>();
  const server = createServer(
    {
      // Node's 300 s default would cut a long push or stream; head and idle limits still apply.
      requestTimeout: 0,
      headersTimeout: spec.timeouts.headerMs,
      keepAliveTimeout: spec.timeouts.keepAliveMs,
      connectionsCheckingInterval: Math.min(1000, spec.timeouts.headerMs || 1000),
      noDelay: true,
      highWaterMark: STREAM_HIGH_WATER_MARK,
    },
    admit,
  );
  // Connections per source address: one client holding the listener's every connection (or
  // the process's every descriptor) would refuse all the others and /healthz with them.
  const perClient = new KeyedCounts();
  let refusedSinceLog = 0;
  let refusalLoggedAt = -Infinity;
  const refuseConnection = (socket: Socket, client: string, reason: 'total' | 'per_client') => {
    socket.destroy();
    spec.onConnectionRefused?.(reason);
    refusedSinceLog++;
    const now = performance.now();
    if (now - refusalLoggedAt < REFUSAL_LOG_INTERVAL_MS) return;
    spec.log({ event: 'connection_refused', listener: spec.name, reason, client, refused: refusedSinceLog, cap: reason === 'total' ? spec.caps.total : spec.caps.perClient });
    refusalLoggedAt = now;
    refusedSinceLog = 0;
  };
  server.on('connection', (socket: Socket) => {
    const client = socket.remoteAddress ?? '';
    const verdict = connectionVerdict(connections.size, perClient.of(client), spec.caps);
    if (verdict !== 'accept') return refuseConnection(socket, client, verdict);
    perClient.tryAcquire(client, 0);
    const state: Connection = { inProgress: 0, bytesAtIdle: 0, serving: false, queue: [] };
    connections.set(socket, state);
    socket.once('close', () => {
      perClient.release(client);
      connections.delete(socket);
      if (state.queue.length === 0) return;
      spec.log({ event: 'pipelined_dropped', listener: spec.name, requests: state.queue.length });
      state.queue.length = 0;
    });
  });
  // CONNECT (forward-proxy tunnelling) and protocol upgrades are never proxied.
  server.on('connect', (_req: IncomingMessage, socket: Socket) => refuseRaw(socket, 405, 'Method Not Allowed'));
  server.on('upgrade', (_req: IncomingMessage, socket: Socket) => refuseRaw(socket, 400, 'Bad Request'));

  await new Promise<void>((resolve, reject) => {
    const fail = (err: NodeJS.ErrnoException) => reject(new Error(listenErrorMessage(spec.flag, spec.address, err.code ?? err.message)));
    server.once('error', fail);
    server.listen({ host: spec.address.host, port: spec.address.port }, () => {
      server.off('error', fail);
      resolve();
    });
  });
  const bound = server.address();
  if (bound === null || typeof bound === 'string') throw new Error(`${spec.name}: listener has no TCP address`);

  return {
    name: spec.name,
    server,
    address: formatAddress(bound.address, bound.port),
    port: bound.port,
    connections: () => connections.size,
    markDraining: () => void (draining = true),
    close(graceMs: number): Promise<void> {
      draining = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      let headsArriving = false;
      for (const [socket, state] of connections) {
        const action = drainAction(state, socket.bytesRead);
        if (action === 'close') socket.destroy();
        else if (action === 'deadline') headsArriving = true;
      }
      // Heads that were still arriving: whatever has not become a request by now is cut.
      const headDeadline =
        headsArriving
          ? setTimeout(() => {
              for (const [socket, state] of connections) if (state.inProgress === 0) socket.destroy();
            }, Math.min(DRAIN_HEAD_DEADLINE_MS, spec.timeouts.headerMs || DRAIN_HEAD_DEADLINE_MS))
          : undefined;
      const force = setTimeout(() => server.closeAllConnections(), graceMs);
      return closed.finally(() => {
        clearTimeout(headDeadline);
        clearTimeout(force);
      });
    },
    async cut(deadlineMs: number): Promise<void> {
      draining = true;
      server.close();
      for (const socket of connections.keys()) markCutByShutdown(socket);
      server.closeAllConnections();
      for (const socket of connections.keys()) socket.destroy();
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, deadlineMs)));
      await Promise.race([Promise.allSettled([...inFlight]), deadline]);
      clearTimeout(timer);
    },
  };
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

/**
 * Pure: why an address cannot be listened on, naming the flag that set it and what to type
 * instead. Only the metrics listener may be switched off, so only its message offers that.
 */
export function listenErrorMessage(flag: string, address: ListenAddress, code: string): string {
  const given = `--${flag} ${address.host === undefined ? `:${address.port}` : formatAddress(address.host, address.port)}`;
  const instead = `use a free address with --${flag} HOST:PORT${flag === 'metrics-listen' ? ', or --metrics-listen off to run without the metrics listener' : ''}`;
  switch (code) {
    case 'EADDRINUSE':
      return `${given}: the address is already in use (another proxy on this host?); ${instead}`;
    case 'EACCES':
      return `${given}: not allowed to listen there (ports below 1024 need privileges); ${instead}`;
    case 'EADDRNOTAVAIL':
      return `${given}: no network interface of this host has that address; ${instead}`;
    default:
      return `${given}: cannot listen (${code}); ${instead}`;
  }
}

/** Pure: HTTP/1.1, or HTTP/1.0 with a Host header; anything else is refused. */
export function requestFormError(major: number, minor: number, host: string | undefined): ProxyError | undefined {
  if (major !== 1 || minor > 1) return ERRORS.httpVersion;
  if (host === undefined) return ERRORS.hostHeaderMissing;
  return undefined;
}

/**
 * Pure: a GET or HEAD that announces a body (any Content-Length but 0, any Transfer-Encoding) is
 * refused on every listener, before any handler runs. No route of either listener reads such a
 * body, so relaying the request would mean dropping bytes the client framed as part of it, and
 * the connection closes after the answer so that whatever body follows is never read as a
 * request. `Content-Length: 0` announces no body and passes.
 */
export function bodylessMethodError(method: string, contentLength: string | undefined, transferEncoding: string | undefined): ProxyError | undefined {
  if (method !== 'GET' && method !== 'HEAD') return undefined;
  if (transferEncoding !== undefined || (contentLength !== undefined && contentLength !== '0')) return ERRORS.bodyOnBodylessMethod;
  return undefined;
}

function refuseRaw(socket: Socket, status: number, reason: string): void {
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}
