// The model gateway's request handler, one for every wire protocol. A call reads as its steps,
// each consuming the previous one's result: authenticate the bot, receive the body, check what it
// asks for, admit it against the limits, prepare the upstream request with its credential, send
// it (retrying only while nothing reached the client), relay the answer. The handler records each
// step's result in the call, and ends it by what a step returned: endAnswered, endRefused,
// endAbandoned, or endFailed when a step threw. The per-call state is one GatewayCall
// (./call.ts); finish() charges, releases and records it exactly once, in the `finally`.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RevocationCheck } from '../auth/identity.ts';
import type { TokenVerifier } from '../auth/verifier.ts';
import { ERRORS } from '../http/errors.ts';
import type { UpstreamTimeouts } from '../http/forward.ts';
import type { HeldBodies } from '../http/held-bodies.ts';
import type { Refusal } from '../http/lifecycle.ts';
import type { LogSink } from '../http/log.ts';
import type { ListenerSpec } from '../http/server.ts';
import type { GatewayLogEvent } from './log-events.ts';
import type { LimitsStore } from '../limits/admission.ts';
import { admitCall } from './admit-call.ts';
import { sendWithRetries } from './attempts.ts';
import { authenticateBot } from './authenticate.ts';
import { receiveJsonBody } from './body.ts';
import { GatewayCall, type CallContext } from './call.ts';
import { checkCall } from './check-call.ts';
import type { PriceTable } from '../limits/prices.ts';
import { prepareUpstream } from './prepare-upstream.ts';
import type { WireProtocol } from './protocols/protocol.ts';
import { providersByModel, type Provider } from './providers.ts';
import type { ModelRequestRecord } from './record.ts';
import { relayAnswer, type RelayContext } from './relay.ts';
import type { SocketContext, SocketMetrics } from './socket-context.ts';
import { serveSocketUpgrade } from './socket-handshake.ts';
import type { RetryPolicy } from './retry.ts';
import { modelBody, modelsListBody, type GatewayRoute } from './route.ts';

export interface GatewayDeps {
  /** Called once per request, when it is over. */
  readonly record: (rec: ModelRequestRecord) => void;
  /** Told when an SSE relay starts and ends (for the streams-in-flight gauge). */
  readonly streams?: { opened(provider: string, model: string): void; closed(provider: string, model: string): void };
  /** Verifies bot tokens (src/auth/verifier.ts); undefined: network-policy mode. */
  readonly verifier: TokenVerifier | undefined;
  /** The providers, each serving its own models (./providers.ts). */
  readonly providers: readonly Provider[];
  /** The wire protocols served (./protocols/table.ts). */
  readonly protocols: readonly WireProtocol[];
  /** Provider-executed tool types allowed (--allow-hosted-tools). */
  readonly hostedTools: ReadonlySet<string>;
  readonly timeouts: UpstreamTimeouts;
  readonly retry: RetryPolicy;
  readonly maxBodyBytes: number;
  /** The process's count of request-body bytes held, under --max-held-request-bytes (shared by everything that holds bodies). */
  readonly heldBodies: HeldBodies;
  /** The deny list (--revocations): why a verified token is refused anyway, or undefined. */
  readonly revoked?: RevocationCheck;
  /** --limits: admission before a call is forwarded, its charge when it is over; undefined: none. */
  readonly limits?: LimitsStore;
  /** Prices, to charge a call against a money budget. */
  readonly prices?: PriceTable;
  readonly log: LogSink<GatewayLogEvent>;
  /** The jitter of retry waits (Math.random; a test may fix it). */
  readonly random?: () => number;
  /** Tracing (OTEL_EXPORTER_OTLP_*): each call's span and its attempts', from its record. */
  readonly trace?: CallContext['trace'];
  /** Told when a Responses WebSocket opens and closes, and of frames refused (responses-socket.ts). */
  readonly sockets?: SocketMetrics;
  /** How long a WebSocket peer has to answer a close frame (5 s unless a test says). */
  readonly socketCloseMs?: number;
}

/** Everything a call's steps read, built once from the dependencies. */
interface GatewayContext extends CallContext, RelayContext, SocketContext {
  readonly bodyIdleMs: number;
  readonly catalog: readonly Provider['config'][];
  readonly modelsBody: string;
}

function gatewayContext(deps: GatewayDeps): GatewayContext {
  const byModel = providersByModel(deps.providers);
  const catalog = deps.providers.map((p) => p.config);
  return {
    protocols: deps.protocols,
    prices: deps.prices,
    record: deps.record,
    log: deps.log,
    trace: deps.trace,
    streams: deps.streams,
    auth: { verifier: deps.verifier, revoked: deps.revoked },
    policy: { request: { allowedModels: new Set(byModel.keys()), hostedTools: deps.hostedTools }, byModel, protocols: deps.protocols, prices: deps.prices },
    send: { timeouts: deps.timeouts, retry: deps.retry, random: deps.random ?? Math.random },
    limits: deps.limits,
    maxBodyBytes: deps.maxBodyBytes,
    heldBodies: deps.heldBodies,
    bodyIdleMs: deps.timeouts.bodyIdleMs,
    catalog,
    modelsBody: modelsListBody(catalog),
    socketProvider: deps.providers.find((p) => p.config.websocket === true),
    sockets: deps.sockets,
    socketCloseMs: deps.socketCloseMs ?? SOCKET_CLOSE_MS,
  };
}

/** How long a WebSocket peer has to answer a close frame before its connection is cut. */
const SOCKET_CLOSE_MS = 5000;

const nowSec = () => Math.floor(Date.now() / 1000);

/** The gateway's handler: one call per request, finished exactly once. */
export function createGatewayHandler(deps: GatewayDeps): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const ctx = gatewayContext(deps);
  return async (req, res) => {
    const call = new GatewayCall(ctx, req, res);
    try {
      await runCall(ctx, call);
    } catch (err) {
      call.endFailed(err);
    } finally {
      call.finish();
    }
  };
}

/** The gateway's upgrades: the Responses API's WebSocket mode (responses-socket.ts); every other upgrade is answered 404. */
export function createGatewayUpgrade(deps: GatewayDeps): NonNullable<ListenerSpec['upgrade']> {
  const ctx = gatewayContext(deps);
  return (req, res, upgrade) => serveSocketUpgrade(ctx, req, res, upgrade);
}

/**
 * A request the listener refuses before any handler runs (HTTP version, missing Host, a GET with
 * a body, a handler that threw synchronously): answered in the gateway's error format and
 * recorded like every other refusal.
 */
export function refuseAtGateway(deps: Pick<GatewayDeps, 'protocols' | 'record' | 'log' | 'prices' | 'trace'>): (req: IncomingMessage, res: ServerResponse, refusal: Refusal) => void {
  return (req, res, refusal) => {
    const call = new GatewayCall(deps, req, res);
    call.endRefused(refusal);
    call.finish();
  };
}

/** The steps of one call. Each returns its result, which the handler records; a call that goes no further is ended here, and finish() follows in the caller. */
async function runCall(ctx: GatewayContext, call: GatewayCall): Promise<void> {
  const route = call.route;
  if (!route.ok) return call.endRefused({ error: route.error, ...(route.allow ? { allow: route.allow } : {}) });

  const who = await authenticateBot(call.req, ctx.auth, call.errorProtocol, nowSec());
  if (call.gone) return call.endAbandoned();
  if (!who.ok) return call.endRefused(who.refusal);
  call.identified(who.identity);
  if (route.kind !== 'protocol') return answerCatalog(call, route, ctx);

  // Held by the call before a byte is read: finish() gives the bytes back, whatever follows.
  const received = await receiveJsonBody(call.req, call.holdBody(ctx.heldBodies.open()), ctx.maxBodyBytes, ctx.bodyIdleMs);
  if (!received.ok) return 'gone' in received ? call.endAbandoned() : call.endRefused(received.refusal);
  const body = received.body;
  call.received(body);

  const checked = checkCall(body.bytes!, route.protocol, route.pathModel, ctx.policy);
  call.checked(checked);
  if (!checked.ok) return call.endRefused(checked.refusal);

  const admitted = await admitCall(ctx.limits, call.identity, checked, call.req.headers['anthropic-beta'], body.size, route.protocol, Date.now());
  // Held before anything else is looked at: finish() gives it back, whatever follows.
  if (admitted.ok) call.admitted(admitted);
  if (call.gone) return call.endAbandoned();
  if (!admitted.ok) {
    call.admitted(admitted); // the limit that refused, for the record
    return call.endRefused(admitted.refusal);
  }

  const shape = { protocol: route.protocol, route: route.route, query: route.query, pathModel: route.pathModel, model: checked.model, provider: checked.provider, requestId: call.requestId };
  const upstream = await prepareUpstream(shape, call.req.headers, body.bytes!, ctx.log, Date.now());
  if (call.gone) return call.endAbandoned();
  if (!upstream.ok) return call.endRefused(upstream.refusal);
  call.prepared(upstream.redactor);

  const sent = await sendWithRetries(call, upstream.target, body, route.protocol, ctx.send);
  if (!sent.ok) return 'gone' in sent ? call.endAbandoned() : call.endRefused(sent.refusal, sent.errorClass);
  call.relayed(await relayAnswer(call, sent.res, sent.exchange, upstream.redactor, route.protocol, ctx));
}

/** GET /v1/models and /v1/models/<id>: the allowlist, answered by the gateway itself. */
function answerCatalog(call: GatewayCall, route: Extract<GatewayRoute, { kind: 'models' | 'model' }>, ctx: GatewayContext): void {
  const body = route.kind === 'models' ? ctx.modelsBody : modelBody(route.id, ctx.catalog);
  if (body === undefined) return call.endRefused({ error: ERRORS.modelNotFound });
  call.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
  call.res.end(body);
  call.endAnswered(200);
}
