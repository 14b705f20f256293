// The upstream leg, shared by both listeners: open an HTTPS request on a keep-alive agent,
// stream the body into it, relay the response back. Which headers cross is decided by the
// caller (headers.ts); this file only moves bytes and reports how it went.
import type { ClientRequest, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { Agent, request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { pipeline } from 'node:stream';
import { classifyUpstreamError, UpstreamError, type UpstreamFailure } from './errors.ts';

export interface AgentOptions {
  /** PEM text of extra CA certificates; replaces the public roots for this upstream. */
  readonly ca: string | undefined;
  /** Only ever true through the explicit per-host opt-in. */
  readonly tlsInsecureSkipVerify: boolean;
}

/** One keep-alive pool per upstream: TLS sessions and sockets are reused across requests. */
export function createUpstreamAgent(options: AgentOptions): Agent {
  return new Agent({
    keepAlive: true,
    scheduling: 'lifo',
    maxFreeSockets: 64,
    noDelay: true,
    ca: options.ca,
    rejectUnauthorized: !options.tlsInsecureSkipVerify,
  });
}

export interface UpstreamTarget {
  readonly agent: Agent;
  readonly hostname: string;
  readonly port: number;
  readonly method: string;
  readonly path: string;
  readonly headers: OutgoingHttpHeaders;
}

export interface UpstreamTimeouts {
  /** TCP connect plus TLS handshake. */
  readonly connectMs: number;
  /** Until the response head, no byte moving on the upstream socket for this long. */
  readonly responseMs: number;
  /** After the response head, no byte moving for this long (a stalled body or stream). */
  readonly idleMs: number;
}

/** Per-request accounting, filled in as bytes move. */
export interface Exchange {
  bytesIn: number;
  bytesOut: number;
  /** Set once, by whichever side failed first. */
  failure: UpstreamFailure | 'client_aborted' | undefined;
}

export function newExchange(): Exchange {
  return { bytesIn: 0, bytesOut: 0, failure: undefined };
}

export interface UpstreamCall {
  readonly request: ClientRequest;
  /** Resolves with the response head; rejects with an UpstreamError. */
  readonly response: Promise<IncomingMessage>;
}

/**
 * Sends a request upstream. A streamed body is piped only once the TLS connection is up, so
 * that a refused connect, a bad certificate or a connect timeout can still be answered with a
 * proper 502/504 instead of a reset of the client's upload.
 */
export function openUpstream(
  target: UpstreamTarget,
  timeouts: UpstreamTimeouts,
  body: IncomingMessage | Buffer | null,
  exchange: Exchange,
): UpstreamCall {
  const request = httpsRequest({
    agent: target.agent,
    host: target.hostname,
    port: target.port,
    servername: isIP(target.hostname) ? undefined : target.hostname,
    method: target.method,
    path: target.path,
    headers: target.headers,
  });
  // Every failure is recorded where it is detected, before anything is destroyed, so that the
  // close events that follow (which look alike on both sides) cannot misattribute it.
  const fail = (kind: UpstreamFailure) => {
    exchange.failure ??= kind;
    request.destroy(new UpstreamError(kind));
  };
  const connectTimer = timeouts.connectMs > 0 ? setTimeout(fail, timeouts.connectMs, 'connect_timeout') : undefined;
  // One socket inactivity timer, re-armed with the body's limit once the head has arrived.
  let phase: 'response_timeout' | 'idle_timeout' = 'response_timeout';
  request.on('timeout', () => fail(phase));
  if (timeouts.responseMs > 0) request.setTimeout(timeouts.responseMs);

  if (body === null || Buffer.isBuffer(body)) {
    exchange.bytesIn += body?.length ?? 0;
    request.once('socket', (socket) => {
      if (request.reusedSocket) clearTimeout(connectTimer);
      else socket.once('secureConnect', () => clearTimeout(connectTimer));
    });
    request.end(body ?? undefined);
  } else {
    const sendBody = () => {
      clearTimeout(connectTimer);
      body.on('data', (chunk: Buffer) => (exchange.bytesIn += chunk.length));
      // On failure pipeline destroys both sides; who broke first is already recorded.
      pipeline(body, request, () => {});
    };
    request.once('socket', (socket) => {
      if (request.reusedSocket) sendBody();
      else socket.once('secureConnect', sendBody);
    });
  }

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

/**
 * Relays an upstream response. Once the head is sent, an upstream failure destroys the client
 * connection: a truncated body must look broken, never like a clean end.
 */
export function relayResponse(
  res: ServerResponse,
  upstream: IncomingMessage,
  headers: readonly string[],
  exchange: Exchange,
  onChunk?: (chunk: Buffer) => void,
  flushHead = false,
): Promise<boolean> {
  res.writeHead(upstream.statusCode ?? 502, headers as string[]);
  if (flushHead) res.flushHeaders();
  upstream.on('data', (chunk: Buffer) => {
    exchange.bytesOut += chunk.length;
    onChunk?.(chunk);
  });
  upstream.once('error', (err) => (exchange.failure ??= classifyUpstreamError(err)));
  return new Promise((resolve) => pipeline(upstream, res, (err) => resolve(!err)));
}

/**
 * A client that goes away takes its upstream request with it, at once. `current` names the
 * request in flight (a retried call replaces it); `onGone` may cancel anything else pending.
 */
export function abortUpstreamOnClientClose(
  res: ServerResponse,
  current: () => ClientRequest | undefined,
  exchange: Exchange,
  onGone?: () => void,
): void {
  res.once('close', () => {
    if (res.writableFinished) return;
    exchange.failure ??= 'client_aborted';
    current()?.destroy();
    onGone?.();
  });
}
