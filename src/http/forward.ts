// The upstream leg, shared by both listeners: open an HTTPS request on a keep-alive agent, stream
// the body into it, relay the response back, and report how it went. Which headers cross is the
// caller's (headers.ts), the credential's too: opaque until here, read as the request is written.
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type ClientRequestArgs, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import { Agent, request as httpsRequest } from 'node:https';
import { isIP, type Socket } from 'node:net';
import { createSecureContext } from 'node:tls';
import { pipeline, type Duplex } from 'node:stream';
import { classifyUpstreamError, UpstreamError, type UpstreamFailure } from './errors.ts';
import { withCredential, type CredentialHeaders } from './headers.ts';
import { STREAM_HIGH_WATER_MARK } from './sockets.ts';
import { watchBodyIdle } from './body-idle.ts';
import { writeInSlices } from './slices.ts';
import { openTunnel, tunnelRouteForUrl, type Egress, type TunnelRoute } from './tunnel.ts';

export interface UpstreamAgentOptions {
  /** PEM text of extra CA certificates; replaces the public roots for this upstream. */
  readonly ca: string | undefined;
  /** Only ever true through the explicit per-host opt-in. */
  readonly tlsInsecureSkipVerify: boolean;
  /** How long a pooled connection may sit unused before we close it (POOL_IDLE_MS). */
  readonly poolIdleMs?: number;
  /** An in-cluster model server its operator opted in over plain HTTP (no TLS, no CA). */
  readonly plainHttp?: boolean;
  /** Through the egress proxy (HTTPS_PROXY, unless NO_PROXY names the upstream): its TLS runs inside a CONNECT tunnel. */
  readonly tunnel?: TunnelRoute;
}

/**
 * A pooled connection unused for this long is closed by us. Below the keep-alive timeouts of
 * the servers behind the upstreams we serve (Node's 5 s default, nginx's 75 s, the providers'
 * load balancers), so that we, not the upstream, end an idle connection: an upstream that closes
 * it just as we reuse it resets a request that may or may not have arrived. A server's own
 * `Keep-Alive: timeout=N` hint, when shorter, wins (Node closes 1 s before it).
 */
const POOL_IDLE_MS = 4000;

/**
 * The keep-alive pool, with two rules Node's Agent lacks: an idle timeout for free sockets
 * (keepSocketAlive, the documented hook), and a free socket whose upstream sent its FIN (it is
 * closing the connection) is destroyed at once, so the pool never hands it to the next request.
 * The Node 22, 24 and 26 releases tested do the second themselves (a free socket that reads
 * anything is destroyed before its 'end'); the listener keeps it where Node does not.
 */
function pooled<TBase extends new (...args: any[]) => HttpAgent>(Base: TBase) {
  return class UpstreamPool extends Base {
  idleMs = POOL_IDLE_MS;
  private readonly free = new WeakSet<Socket>();
  private readonly watched = new WeakSet<Socket>();

  override keepSocketAlive(socket: Socket): boolean {
    // Node returns whether the socket may be kept (false when the server's hint is too short);
    // @types/node declares void.
    if (!(super.keepSocketAlive(socket) as unknown as boolean)) return false;
    // super applied the server's Keep-Alive hint, if any, as the socket timeout (0: none).
    const hinted = socket.timeout ?? 0;
    socket.setTimeout(hinted > 0 ? Math.min(hinted, this.idleMs) : this.idleMs);
    this.free.add(socket);
    if (!this.watched.has(socket)) {
      this.watched.add(socket);
      socket.on('end', () => {
        if (this.free.has(socket)) socket.destroy();
      });
    }
    return true;
  }

  override reuseSocket(socket: Socket, request: ClientRequest): void {
    this.free.delete(socket);
    // The request's own timers (openUpstream) take over from the pool's idle timeout.
    socket.setTimeout(0);
    super.reuseSocket(socket, request);
  }
  };
}

/** The pools: HTTPS for every upstream but an in-cluster model server its operator opted in over plain HTTP. */
const HttpsUpstreamPool = pooled(Agent);
const HttpUpstreamPool = pooled(HttpAgent);

/**
 * The HTTPS pool of an upstream reached through the egress proxy: each new connection is a CONNECT
 * tunnel (tunnel.ts) with the upstream's TLS inside it (Agent's own createConnection, given the
 * tunnel's socket: the same servername, trust store, verification and session reuse as a direct
 * connection). Connections are pooled and reused per upstream like any other.
 */
class TunnelledUpstreamPool extends HttpsUpstreamPool {
  constructor(
    private readonly route: TunnelRoute,
    options: ConstructorParameters<typeof Agent>[0],
  ) {
    super(options);
  }

  override createConnection(options: ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
    // The CONNECT target is the host and port the request was opened with: the registry's, never request input.
    openTunnel(this.route, String(options.host), Number(options.port), (err, tunnel) => {
      if (err !== null) return callback!(err, undefined as unknown as Duplex);
      callback!(null, super.createConnection({ ...options, socket: tunnel } as ClientRequestArgs)!);
    });
    return undefined;
  }
}

/**
 * One keep-alive pool per upstream: TLS sessions and sockets are reused across requests. The
 * TLS context (trust store) is built once here, not for every new connection, and it keeps the
 * CA text out of the key the agent computes for each request.
 */
export function createUpstreamAgent(options: UpstreamAgentOptions): HttpAgent {
  // highWaterMark reaches the TLS socket (Node >= 20.1), though @types/node's AgentOptions omits it.
  const common = { keepAlive: true, scheduling: 'lifo' as const, maxFreeSockets: 64, noDelay: true, highWaterMark: STREAM_HIGH_WATER_MARK };
  const tls = { ...common, secureContext: createSecureContext(options.ca === undefined ? {} : { ca: options.ca }), rejectUnauthorized: !options.tlsInsecureSkipVerify };
  const pool = options.plainHttp ? new HttpUpstreamPool(common) : options.tunnel ? new TunnelledUpstreamPool(options.tunnel, tls) : new HttpsUpstreamPool(tls);
  pool.idleMs = options.poolIdleMs ?? POOL_IDLE_MS;
  return pool;
}

/**
 * An agent of its own for one https: fetch of the proxy's (a credential, a key set) through the
 * egress proxy, unless NO_PROXY names the host; its trust store `ca`, or the system's. Undefined
 * when the fetch goes direct or is not https. The caller destroys it with the fetch.
 */
export function tunnelAgentFor(url: URL, egress: Egress | undefined, ca?: string): HttpAgent | undefined {
  const tunnel = tunnelRouteForUrl(egress, url);
  return tunnel === undefined ? undefined : createUpstreamAgent({ ca, tlsInsecureSkipVerify: false, tunnel });
}

export interface UpstreamTarget {
  readonly agent: HttpAgent;
  /** Plain HTTP (an in-cluster model server the operator opted in); HTTPS otherwise. */
  readonly plainHttp?: boolean;
  readonly hostname: string;
  readonly port: number;
  readonly method: string;
  readonly path: string;
  /** Everything but the framing and the credential: Content-Length and Transfer-Encoding are the core's (bodyFraming). */
  readonly headers: OutgoingHttpHeaders;
  /** The credential's headers, opaque until openUpstream writes them, each value checked for CR/LF. */
  readonly credential?: CredentialHeaders;
}

/**
 * What an upstream request carries: no body, bytes already in hand (the gateway's checked JSON),
 * or the client's body streamed through (a git push) as the client's own framing delimits it.
 */
export type ForwardBody = null | Buffer | IncomingMessage;

const FRAMING_HEADERS: ReadonlySet<string> = new Set(['content-length', 'transfer-encoding']);

/**
 * Pure: the upstream headers with the framing set from what is actually sent, never from what a
 * client announced (RFC 9112 section 6: a message's framing belongs to its sender, and a proxy
 * is the sender of the request it forwards). Whatever framing `headers` carries is dropped
 * first, in any letter case. No body: no framing header at all (a GET that announced a body the
 * proxy does not send would make the upstream read the proxy's next request on that pooled
 * connection as that body). Bytes in hand: their exact length. A streamed client body: the length
 * Node's parser holds the client to, or chunked (left to Node) when the client sent it chunked;
 * a client request with neither carries an empty body.
 */
export function bodyFraming(headers: OutgoingHttpHeaders, body: ForwardBody): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const name of Object.keys(headers)) {
    if (!FRAMING_HEADERS.has(name.toLowerCase())) out[name] = headers[name];
  }
  if (body === null) return out;
  if (Buffer.isBuffer(body)) {
    out['content-length'] = body.length;
    return out;
  }
  if (body.headers['transfer-encoding'] !== undefined) return out; // Node frames it chunked
  out['content-length'] = body.headers['content-length'] ?? '0';
  return out;
}

export interface UpstreamTimeouts {
  /** TCP connect plus TLS handshake. */
  readonly connectMs: number;
  /** Until the response head, no byte moving on the upstream socket for this long. */
  readonly responseMs: number;
  /** After the response head, no byte moving for this long (a stalled body or stream). */
  readonly idleMs: number;
  /** No byte of the client's request body for this long while we read it (body-idle.ts); 0: off. */
  readonly bodyIdleMs: number;
}

/** Per-request accounting, filled in as bytes move. */
export interface Exchange {
  bytesIn: number;
  bytesOut: number;
  /** Set once, by whichever side failed first; `shutdown`: a forced shutdown cut the client's connection. */
  failure: UpstreamFailure | 'client_aborted' | 'shutdown' | undefined;
  /**
   * The request went out on a connection to the upstream that was up (a pooled one, or a new one
   * once its TCP connect and TLS handshake were done, through the egress tunnel where there is
   * one): from then on a byte of it may have reached the upstream. Never set for a connect
   * refused, a name that did not resolve, a failed handshake, a tunnel refused or a connect timeout.
   */
  reached: boolean;
}

export function newExchange(): Exchange {
  return { bytesIn: 0, bytesOut: 0, failure: undefined, reached: false };
}

export interface UpstreamCall {
  readonly request: ClientRequest;
  /** Resolves with the response head; rejects with an UpstreamError. */
  readonly response: Promise<IncomingMessage>;
}

/**
 * A reset on a reused keep-alive socket: the upstream may have closed it just as we wrote to
 * it. It does not prove the request never arrived (an upstream may read it whole and then
 * reset), so only a request that changes nothing may be sent again on it: the git proxy's ref
 * discovery. A POST never is, on either listener; the client (every SDK, agent and git retries
 * connection errors itself) decides. The pool's idle timeout and FIN rule make the race rare.
 */
export function staleSocketReset(kind: UpstreamFailure, request: ClientRequest): boolean {
  return kind === 'reset' && request.reusedSocket;
}

/**
 * Sends a request upstream. A streamed body is piped only once the TLS connection is up, so
 * that a refused connect, a bad certificate or a connect timeout can still be answered with a
 * proper 502/504 instead of a reset of the client's upload.
 */
export function openUpstream(
  target: UpstreamTarget,
  timeouts: UpstreamTimeouts,
  body: ForwardBody,
  exchange: Exchange,
): UpstreamCall {
  const send = target.plainHttp ? httpRequest : httpsRequest;
  const request = send({
    agent: target.agent,
    host: target.hostname,
    port: target.port,
    ...(target.plainHttp ? {} : { servername: isIP(target.hostname) ? undefined : target.hostname }),
    method: target.method,
    path: target.path,
    headers: withCredential(bodyFraming(target.headers, body), target.credential),
  });
  // Every failure is recorded where it is detected, before anything is destroyed, so that the
  // close events that follow (which look alike on both sides) cannot misattribute it.
  const fail = (kind: UpstreamFailure) => {
    exchange.failure ??= kind;
    request.destroy(new UpstreamError(kind));
  };
  // One socket inactivity timer, re-armed with the body's limit once the head has arrived. Set
  // even when 0 (off), so that no timeout the socket had in the pool applies to this request.
  let phase: 'response_timeout' | 'idle_timeout' = 'response_timeout';
  request.on('timeout', () => fail(phase));
  request.setTimeout(timeouts.responseMs);

  // Bytes in hand are written now, in slices (writeInSlices). No closure below holds `body`
  // itself: the listeners of a long stream share one closure context, and a large body
  // referenced there would live as long.
  let stream: IncomingMessage | null = body !== null && !Buffer.isBuffer(body) ? body : null;
  if (stream === null) {
    if (body === null) request.end();
    else writeInSlices(request, body as Buffer, (n) => (exchange.bytesIn += n));
  }
  const sendBody = () => {
    if (stream === null) return;
    const source = stream;
    stream = null;
    source.on('data', (chunk: Buffer) => (exchange.bytesIn += chunk.length));
    // A client that stops sending its body cuts the upstream request with it (the caller answers 408).
    watchBodyIdle(source, timeouts.bodyIdleMs, () => fail('body_timeout'));
    // On failure pipeline destroys both sides; who broke first is already recorded.
    pipeline(source, request, () => {});
  };
  // A pooled connection is already up. Only a new one gets a connect timer (TCP plus TLS), which
  // ends when it is up: its TLS handshake done, or for plain HTTP its TCP connect.
  let connectTimer: NodeJS.Timeout | undefined;
  const connected = () => {
    clearTimeout(connectTimer);
    exchange.reached = true;
    sendBody();
  };
  request.once('socket', (socket) => {
    if (request.reusedSocket) return connected();
    if (timeouts.connectMs > 0) connectTimer = setTimeout(fail, timeouts.connectMs, 'connect_timeout');
    socket.once(target.plainHttp ? 'connect' : 'secureConnect', connected);
  });

  const response = new Promise<IncomingMessage>((resolve, reject) => {
    request.once('response', (res) => {
      clearTimeout(connectTimer);
      phase = 'idle_timeout';
      request.setTimeout(timeouts.idleMs);
      resolve(res);
    });
    request.on('error', (err) => {
      clearTimeout(connectTimer);
      const wrapped = err instanceof UpstreamError ? err : new UpstreamError(classifyUpstreamError(err), { cause: err });
      exchange.failure ??= wrapped.kind;
      reject(wrapped);
    });
  });
  return { request, response };
}

export interface RelayOptions {
  /** Sees every chunk as it is relayed (a copy for inspection; it must not keep the Buffer). */
  readonly onChunk?: (chunk: Buffer) => void;
  /** Send the response head at once, before the first body byte (streams). */
  readonly flushHead?: boolean;
  /**
   * Asked when the upstream body has ended: false makes the end a broken connection (failure
   * `truncated`), for a stream that ended without its protocol's end event.
   */
  readonly endIsClean?: () => boolean;
  /** Rewrites the body on its way (redaction): what to relay for each chunk, and at the end. */
  readonly rewrite?: { push(chunk: Buffer): Buffer; end(): Buffer };
}

/**
 * Relays an upstream response. Once the head is sent, an upstream failure destroys the client
 * connection: a truncated body must look broken, never like a clean end.
 */
export function relayResponse(res: ServerResponse, upstream: IncomingMessage, headers: readonly string[], exchange: Exchange, options: RelayOptions = {}): Promise<boolean> {
  // A client already gone would never emit the close this waits for.
  if (res.destroyed) {
    exchange.failure ??= 'client_aborted';
    upstream.destroy();
    return Promise.resolve(false);
  }
  res.writeHead(upstream.statusCode ?? 502, headers as string[]);
  if (options.flushHead) res.flushHeaders();
  const { onChunk, endIsClean, rewrite } = options;
  upstream.on('data', (chunk: Buffer) => {
    exchange.bytesOut += chunk.length;
    onChunk?.(chunk);
  });
  // pipe(), not pipeline(): its AbortController per call stood out in every response's profile; its failure paths are here.
  return new Promise((resolve) => {
    const broken = (kind: UpstreamFailure) => {
      exchange.failure ??= kind;
      res.destroy(); // a truncated body must reach the client as a broken connection
      resolve(false);
    };
    upstream.once('error', (err) => broken(classifyUpstreamError(err)));
    upstream.once('close', () => {
      if (!upstream.complete) broken('reset');
    });
    // The end is ours: only a clean end ends cleanly; else what came (and `tail`) goes out, then the connection closes unfinished.
    const endBody = (tail: Buffer | undefined) => {
      if (endIsClean === undefined || endIsClean()) return void res.end(tail); // the last bytes and the end in one write
      if (tail !== undefined) res.write(tail);
      exchange.failure ??= 'truncated';
      if (res.socket) res.socket.end();
      else res.destroy();
      resolve(false);
    };
    res.once('close', () => {
      if (res.writableFinished) return resolve(true);
      upstream.destroy(); // the client went away: stop reading (abortUpstreamOnClientClose frees the socket)
      resolve(false);
    });
    if (rewrite === undefined) {
      upstream.once('end', () => endBody(undefined));
      upstream.pipe(res, { end: false });
      return;
    }
    // A rewrite's output goes from the upstream's own 'data', with pipe()'s backpressure (a Transform is a hop a chunk); a throw cuts.
    const rewriteRefused = () => {
      upstream.destroy();
      broken('protocol');
    };
    let waiting = false;
    upstream.on('data', (chunk: Buffer) => {
      let out: Buffer;
      try {
        out = rewrite.push(chunk);
      } catch {
        return rewriteRefused();
      }
      if (out.length === 0 || res.write(out) || waiting) return;
      waiting = true;
      upstream.pause();
      res.once('drain', () => {
        waiting = false;
        upstream.resume();
      });
    });
    upstream.once('end', () => {
      let tail: Buffer;
      try {
        tail = rewrite.end();
      } catch {
        return rewriteRefused();
      }
      endBody(tail.length > 0 ? tail : undefined);
    });
  });
}
