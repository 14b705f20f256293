// The WebSocket opening handshake (RFC 6455 section 4), both ways: a client's upgrade request
// checked and answered 101 by the listener, and the proxy's own upgrade request to an upstream,
// on the upstream's pool (its TLS settings, trust store and egress tunnel), its 101 checked.
//
// Nothing of the client's handshake crosses as it came: its Sec-WebSocket-Key is answered here, and
// the upstream gets a key of the proxy's own; no extension is offered to the upstream, and none
// offered by the client is accepted (the client's permessage-deflate offer goes unanswered, which
// RFC 7692 lets a server do), so no frame on either leg is compressed; no subprotocol either way.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { connectionNamed, assertHeaderValue } from './headers.ts';
import { openUpstream, type Exchange, type UpstreamTarget, type UpstreamTimeouts } from './forward.ts';
import { acceptFor, keyWellFormed, newKey } from './ws-frames.ts';

/** Why a client's upgrade request cannot be served as a WebSocket (undefined: it can). */
export type HandshakeProblem = 'not_websocket' | 'version' | 'key';

/**
 * Pure: the client's upgrade request checked: a GET asking for `websocket`, version 13 (the one
 * RFC 6455 defines), a key of 16 bytes in base64.
 */
export function handshakeProblem(method: string, headers: IncomingHttpHeaders): HandshakeProblem | undefined {
  if (method !== 'GET' || !connectionNamed(headers.upgrade).has('websocket')) return 'not_websocket';
  if (headers['sec-websocket-version'] !== '13') return 'version';
  if (!keyWellFormed(headers['sec-websocket-key'])) return 'key';
  return undefined;
}

/**
 * Pure: the 101 answer's head: the accept value for the client's key, and `extra` header pairs
 * (name, value, ...), each value checked for CR/LF.
 */
export function switchingProtocolsHead(key: string, extra: readonly string[]): string {
  const lines = ['HTTP/1.1 101 Switching Protocols', 'Upgrade: websocket', 'Connection: Upgrade', `Sec-WebSocket-Accept: ${acceptFor(key)}`];
  for (let i = 0; i + 1 < extra.length; i += 2) lines.push(`${extra[i]}: ${assertHeaderValue(extra[i]!, extra[i + 1]!)}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Response headers that belong to a handshake or a connection, never relayed from one leg to the other. */
const HANDSHAKE_HEADERS = /^(?:sec-websocket-.*|upgrade|connection|keep-alive|content-length|transfer-encoding)$/i;

/** Pure: header pairs without those of the handshake and the connection. */
export function withoutHandshakeHeaders(pairs: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < pairs.length; i += 2) if (!HANDSHAKE_HEADERS.test(pairs[i]!)) out.push(pairs[i]!, pairs[i + 1]!);
  return out;
}

/**
 * Pure: what is wrong with an upstream's 101 (undefined: nothing): RFC 6455 section 4.1 has the
 * client fail the connection when the accept value is not the one for its key, or when the server
 * names an extension or a subprotocol it did not ask for (this proxy asks for neither).
 */
export function upgradeAnswerProblem(headers: IncomingHttpHeaders, key: string): string | undefined {
  if (!connectionNamed(headers.upgrade).has('websocket') || !connectionNamed(headers.connection).has('upgrade')) return 'no websocket upgrade';
  if (headers['sec-websocket-accept'] !== acceptFor(key)) return 'wrong Sec-WebSocket-Accept';
  if (headers['sec-websocket-extensions'] !== undefined) return 'an extension nobody offered';
  if (headers['sec-websocket-protocol'] !== undefined) return 'a subprotocol nobody asked for';
  return undefined;
}

/** The upstream's answer to the upgrade: the connection switched, or an ordinary response (an error, a 404). */
export type UpgradeAnswer =
  | { readonly kind: 'upgraded'; readonly socket: Socket; readonly head: Buffer; readonly res: IncomingMessage }
  | { readonly kind: 'refused'; readonly problem: string }
  | { readonly kind: 'response'; readonly res: IncomingMessage };

/**
 * Opens the proxy's own WebSocket to an upstream: `target`'s request (its headers already the
 * allowed ones and the credential) as a GET asking to switch, with a key of the proxy's own. Sent
 * as any upstream request (forward.ts openUpstream: the connect and response timeouts, the failure
 * recorded in `exchange`); the answer is the switched socket, or the response when the upstream
 * does not switch. `request` is the upstream request, for the caller to cut if its client leaves.
 */
export function openUpstreamSocket(target: UpstreamTarget, timeouts: UpstreamTimeouts, exchange: Exchange): { request: ReturnType<typeof openUpstream>['request']; answer: Promise<UpgradeAnswer> } {
  const key = newKey();
  const headers = { ...target.headers, connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': key };
  const sent = openUpstream({ ...target, method: 'GET', headers }, timeouts, null, exchange);
  const upgraded = new Promise<UpgradeAnswer>((resolve) => {
    sent.request.once('upgrade', (res: IncomingMessage, socket: Socket, head: Buffer) => {
      // The upgraded socket is ours now: no timer of the request's may cut it.
      socket.setTimeout(0);
      const problem = upgradeAnswerProblem(res.headers, key);
      if (problem === undefined) return resolve({ kind: 'upgraded', socket, head, res });
      socket.destroy();
      exchange.failure ??= 'protocol';
      resolve({ kind: 'refused', problem });
    });
  });
  const answered = sent.response.then((res): UpgradeAnswer => ({ kind: 'response', res }));
  return { request: sent.request, answer: Promise.race([upgraded, answered]) };
}
