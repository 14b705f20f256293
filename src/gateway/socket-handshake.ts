// The handshake of a Responses API WebSocket (`GET /v1/responses` upgraded), Codex's own
// transport: an HTTP call (a GatewayCall, recorded with status 101 or its refusal). The bot
// authenticates as on HTTP, and a refusal is the HTTP status and body, before any upgrade. Then the
// gateway opens its own WebSocket to the provider, with the provider's key and the request's
// allowed headers only (prepare-upstream.ts), and answers the client's 101 once the provider's has
// come. A provider that does not switch (404) gets the client the 404 that makes it fall back to
// plain HTTP, as does a gateway whose providers speak no WebSocket mode (config.ts, `websocket`),
// or an upgrade of another path. The connection itself is responses-socket.ts's.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorForUpstream, ERRORS, type UpstreamError } from '../http/errors.ts';
import { newExchange, type Exchange } from '../http/forward.ts';
import type { Refusal } from '../http/lifecycle.ts';
import type { Redactor } from '../http/redactor.ts';
import type { UpgradeContext } from '../http/server.ts';
import { handshakeProblem, openUpstreamSocket, switchingProtocolsHead, withoutHandshakeHeaders, type UpgradeAnswer } from '../http/ws-upgrade.ts';
import { authenticateBot } from './authenticate.ts';
import { GatewayCall } from './call.ts';
import { prepareUpstream } from './prepare-upstream.ts';
import { responses } from './protocols/responses.ts';
import { relayAnswer, relayedHeaders } from './relay.ts';
import { ResponsesSocket } from './responses-socket.ts';
import type { OpenedSocket, SocketContext } from './socket-context.ts';

const RESPONSES_ROUTE = responses.routes[0]!;
const NO_BODY = Buffer.alloc(0);

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
    call.endFailed(err);
  } finally {
    call.finish();
  }
  if (opened === undefined) return;
  const connection = new ResponsesSocket(ctx, call, opened);
  upgrade.onDrain(() => connection.drain());
  await connection.run(upgrade.head);
}

function refuseUpgrade(call: GatewayCall, refusal: Refusal, errorClass?: string): undefined {
  call.endRefused({ ...refusal, closeAfter: true }, errorClass);
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

  const who = await authenticateBot(call.req, ctx.auth, responses, Math.floor(Date.now() / 1000));
  if (call.gone) return void call.endAbandoned();
  if (!who.ok) return refuseUpgrade(call, who.refusal);
  call.identified(who.identity);
  call.servedBy(provider);

  const shape = { protocol: responses, route: RESPONSES_ROUTE, query: '', pathModel: undefined, model: '', provider, requestId: call.requestId, method: 'GET' as const };
  const upstream = await prepareUpstream(shape, call.req.headers, NO_BODY, ctx.log, Date.now());
  if (call.gone) return void call.endAbandoned();
  if (!upstream.ok) return refuseUpgrade(call, upstream.refusal);

  const attempt = newExchange();
  call.attemptStarted(attempt);
  const sent = openUpstreamSocket(upstream.target, ctx.send.timeouts, attempt);
  call.attach(sent.request);
  let answer: UpgradeAnswer;
  try {
    answer = await sent.answer;
  } catch (err) {
    if (call.gone) return void call.endAbandoned();
    const failed = err as UpstreamError;
    return refuseUpgrade(call, { error: errorForUpstream(failed) }, failed.kind);
  }
  call.attach(undefined);
  if (answer.kind === 'refused') return refuseUpgrade(call, { error: ERRORS.upstreamProtocol, message: `the upstream's WebSocket handshake was not one RFC 6455 allows (${answer.problem})` }, 'upstream_bad_upgrade');
  const id = answer.res.headers['x-request-id'];
  call.upstreamAnswered(answer.res.statusCode ?? 502, typeof id === 'string' ? id.slice(0, 128) : undefined);
  if (answer.kind === 'response') return void (await upgradeRefused(ctx, call, answer.res, attempt, upstream.redactor));
  if (call.gone) {
    answer.socket.destroy();
    return void call.endAbandoned();
  }
  const relayed = withoutHandshakeHeaders(relayedHeaders(answer.res.rawHeaders, upstream.redactor));
  call.req.socket.write(switchingProtocolsHead(call.req.headers['sec-websocket-key']!, ['X-Client-Request-Id', call.requestId, ...relayed]));
  call.endAnswered(101);
  return { upstream: answer.socket, head: answer.head, redactor: upstream.redactor, provider };
}

/** The provider answered the upgrade without switching. */
async function upgradeRefused(ctx: SocketContext, call: GatewayCall, res: IncomingMessage, exchange: Exchange, redactor: Redactor): Promise<void> {
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
  call.relayed(await relayAnswer(call, res, exchange, redactor, responses, ctx));
}
