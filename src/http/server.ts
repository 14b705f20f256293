// Listener lifecycle shared by both proxies: the node:http server and its timeouts, /healthz,
// refusal of CONNECT and of upgrades (404, so that clients fall back), isolation of handler
// errors, and graceful draining.
import { createServer, ServerResponse, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { connectionNamed } from './headers.ts';
import { formatAddress, type ListenAddress } from './address.ts';
import type { ConnectionCaps } from './connection-caps.ts';
import { ConnectionTable } from './connections.ts';
import { ERRORS, type ProxyError } from './errors.ts';
import type { Refusal } from './lifecycle.ts';
import type { LogSink } from './log.ts';
import type { HttpLogEvent } from './log-events.ts';
import { STREAM_HIGH_WATER_MARK } from './sockets.ts';
import { createTlsServer, wrappedSocket, type TlsSource } from './tls-listener.ts';

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
  readonly log: LogSink<HttpLogEvent>;
  /** Serves one request; the listener waits for its promise when it cuts every connection (forced shutdown). */
  readonly handle: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;
  /**
   * `GET /` and `HEAD /` answer as /healthz does (the model gateway: Claude Code sends `HEAD /`
   * to its base URL at start), never counted or logged as a request.
   */
  readonly rootIsHealth?: boolean;
  /**
   * Asked by each /healthz: why this listener cannot serve its calls now (a credential file it
   * needs is missing), answered as a 503 with that text; undefined when it can.
   */
  readonly notReady?: () => string | undefined;
  /**
   * Refuses a request before any handler runs (HTTP version, Host, a GET with a body), or one whose
   * handler threw synchronously: rendered as this listener's clients read errors (git: text,
   * gateway: JSON) and recorded like every other refusal.
   */
  readonly refuse: (req: IncomingMessage, res: ServerResponse, refusal: Refusal) => void;
  /** Serve TLS (and mutual TLS) with these files (tls-listener.ts); undefined: plain HTTP. */
  readonly tls?: TlsSource;
  /**
   * Serves a request that asks to switch protocols, after the same form checks as any request:
   * `res` answers it over HTTP (a refusal), or the handler takes the socket (a WebSocket). The
   * listener waits for its promise as for a request's. Undefined: every upgrade is answered 404.
   */
  readonly upgrade?: (req: IncomingMessage, res: ServerResponse, upgrade: UpgradeContext) => Promise<void>;
}

/** What an upgraded connection gets from its listener. */
export interface UpgradeContext {
  /** The bytes that came after the request's head (the first frames, if the client did not wait). */
  readonly head: Buffer;
  /** Called when the listener drains (at once if it already is): the connection finishes its work and closes. */
  onDrain(drain: () => void): void;
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
  const table = new ConnectionTable(spec.name, spec.caps, spec.log, spec.onConnectionRefused);
  const options = {
    // Node's 300 s default would cut a long push or stream; head and idle limits still apply.
    requestTimeout: 0,
    headersTimeout: spec.timeouts.headerMs,
    keepAliveTimeout: spec.timeouts.keepAliveMs,
    connectionsCheckingInterval: Math.min(1000, spec.timeouts.headerMs || 1000),
    noDelay: true,
    highWaterMark: STREAM_HIGH_WATER_MARK,
  };
  const handler = (req: IncomingMessage, res: ServerResponse) => table.oneAtATime(req, res, () => serveRequest(spec, table, req, res));
  const server = spec.tls === undefined ? createServer(options, handler) : createTlsServer(spec.tls, options, handler, spec.name, spec.log);
  // Counted on arrival, before anything reads the socket (for TLS, before the handshake), so that
  // handshakes in progress meet the caps as plain connections do; with TLS the table then tracks
  // the socket requests arrive on, the TLS socket, once its handshake is done.
  server.prependListener('connection', (socket: Socket) => table.accept(socket));
  if (spec.tls !== undefined) server.on('secureConnection', (socket: TLSSocket) => table.handOver(wrappedSocket(socket), socket));
  // CONNECT (forward-proxy tunnelling) is never proxied. No 'upgrade' listener: without one, Node
  // hands an upgrade request to the request handler as an ordinary request, where serveRequest
  // refuses it in the listener's own error format (upgradeRequested).
  server.on('connect', (_req: IncomingMessage, socket: Socket) => refuseRaw(socket, 405, 'Method Not Allowed'));
  // A listener that serves upgrades takes them here, with a response of its own on the socket so
  // that a refusal is answered as any request's is.
  if (spec.upgrade !== undefined) {
    server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
      const res = new ServerResponse(req);
      res.assignSocket(socket);
      const upgrade = { head, onDrain: (drain: () => void) => table.upgraded(socket, drain) };
      table.oneAtATime(req, res, () => serveRequest(spec, table, req, res, upgrade));
    });
  }

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
    connections: () => table.size,
    markDraining: () => void (table.draining = true),
    close: (graceMs) => table.drain(server, graceMs, spec.timeouts.headerMs),
    cut: (deadlineMs) => table.cut(server, deadlineMs),
  };
}

/**
 * One request, in the listener: the form every request must have (else refused and recorded,
 * the connection closed), /healthz, then the handler, whose promise the table keeps until it
 * settles. A handler that throws synchronously takes one request down, never the listener.
 */
function serveRequest(spec: ListenerSpec, table: ConnectionTable, req: IncomingMessage, res: ServerResponse, upgrade?: UpgradeContext): void {
  if (table.draining) res.setHeader('connection', 'close');
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
  // A listener without an upgrade handler serves none. A 404 in the route's error format (never a
  // 400) is what makes a client fall back to plain HTTP: Codex, offered a WebSocket, does on a 404
  // and gives up its turn on a 400. The connection closes: after an upgrade request, bytes that
  // follow may be the other protocol's.
  if (upgrade !== undefined && spec.upgrade !== undefined) {
    const serveUpgrade = spec.upgrade;
    return serveHandler(spec, table, req, res, () => serveUpgrade(req, res, upgrade));
  }
  if (upgradeRequested(req.headers.connection, req.headers.upgrade)) {
    res.setHeader('connection', 'close');
    spec.refuse(req, res, { error: ERRORS.upgradeNotServed, closeAfter: true });
    return;
  }
  if ((req.url === '/healthz' || (spec.rootIsHealth === true && req.url === '/')) && (req.method === 'GET' || req.method === 'HEAD')) {
    answerHealth(req, res, table.draining ? 'draining' : spec.notReady?.());
    return;
  }
  serveHandler(spec, table, req, res, () => spec.handle(req, res));
}

/** Runs a handler, its promise kept by the table; one that throws synchronously takes its request down, never the listener. */
function serveHandler(spec: ListenerSpec, table: ConnectionTable, req: IncomingMessage, res: ServerResponse, handle: () => void | Promise<void>): void {
  try {
    table.serving(handle());
  } catch (err) {
    spec.log({ event: 'handler_error', listener: spec.name, error: (err as Error)?.name ?? 'Error', detail: String((err as Error)?.message ?? err) });
    if (!res.headersSent) spec.refuse(req, res, { error: ERRORS.internal });
    else res.destroy();
  }
}

/** /healthz (and `/` where it stands for it): 200 while serving, 503 saying why when draining or not ready. */
function answerHealth(req: IncomingMessage, res: ServerResponse, unready: string | undefined): void {
  const body = `${unready ?? 'ok'}\n`;
  res.writeHead(unready === undefined ? 200 : 503, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
  res.end(req.method === 'HEAD' ? undefined : body);
}

const LISTENER_NAMES: Readonly<Record<string, string>> = { 'git-auth-listen': 'git', 'model-gateway-listen': 'model gateway', 'metrics-listen': 'metrics' };

/**
 * Pure: why an address cannot be listened on, naming the flag that set it and what to type
 * instead: another address, or `off` (every listener may be switched off).
 */
export function listenErrorMessage(flag: string, address: ListenAddress, code: string): string {
  const given = `--${flag} ${address.host === undefined ? `:${address.port}` : formatAddress(address.host, address.port)}`;
  const instead = `use a free address with --${flag} HOST:PORT, or --${flag} off to run without the ${LISTENER_NAMES[flag] ?? flag} listener`;
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
 * Pure: whether a request asks to switch protocols, as Node's parser (llhttp) reads it: an
 * Upgrade header, and `upgrade` among the Connection tokens. An Upgrade header that Connection
 * does not name is only a hop-by-hop header, dropped like the others (headers.ts).
 */
export function upgradeRequested(connection: string | undefined, upgrade: string | undefined): boolean {
  return upgrade !== undefined && connectionNamed(connection).has('upgrade');
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
