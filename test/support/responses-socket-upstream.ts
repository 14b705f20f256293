// A fake of OpenAI's Responses API in WebSocket mode (`GET /v1/responses` upgraded): what
// api.openai.com does with the socket, as far as a client can see it, and as the requests Codex
// 0.169 sends (test/fixtures/recorded-socket/) were answered when they were recorded:
//   - the client sends `response.create` messages, one at a time; each is answered with the
//     events the HTTP stream would carry (responses-upstream.ts builds them), one JSON text frame
//     per event, `type` first, no `event:` line and no `[DONE]`;
//   - `generate: false` (a warm-up) gets `response.created` and `response.completed` with no
//     output: the request's state is kept, nothing is generated;
//   - `previous_response_id` may name a response made on this connection only (the state is the
//     connection's, in memory); any other is the `error` event `previous_response_not_found`,
//     with the HTTP status the same request would have got, as OpenAI's wrapped errors carry it;
//   - a ping gets its pong; a close gets its close.
// Framing is test/support/ws-wire.ts's, not the proxy's. Every frame the client sent is kept, so a
// test can see that the gateway masks what it sends.
import type { IncomingHttpHeaders, IncomingMessage, Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { ModelRequest } from './https-fake.ts';
import { freshIds, usage, type SseEvent } from './responses-transcripts.ts';
import { transcriptFor, type ResponsesRequest } from './responses-upstream.ts';
import { acceptOf, closeBody, frame, FrameSplitter, OP, type ReadFrame } from './ws-wire.ts';

/** One client connection to the fake. */
export class FakeSocketConnection {
  readonly frames: ReadFrame[] = [];
  /** Response ids made on this connection (what previous_response_id may name). */
  readonly responses = new Set<string>();
  closedByClient: number | undefined;
  gone = false;
  readonly #splitter = new FrameSplitter();
  #fragments: Buffer[] = [];

  constructor(
    readonly socket: Socket,
    readonly headers: IncomingHttpHeaders,
    readonly url: string,
    private readonly onMessage: (conn: FakeSocketConnection, text: Buffer) => void,
  ) {
    socket.on('data', (chunk: Buffer) => this.#read(chunk));
    socket.on('error', () => {});
    socket.on('close', () => (this.gone = true));
  }

  #read(chunk: Buffer): void {
    for (const f of this.#splitter.push(chunk)) {
      this.frames.push(f);
      if (f.opcode === OP.ping) this.write(frame({ opcode: OP.pong, payload: f.payload }));
      else if (f.opcode === OP.close) {
        this.closedByClient = f.payload.length >= 2 ? f.payload.readUInt16BE(0) : 1005;
        this.write(frame({ opcode: OP.close, payload: f.payload.subarray(0, 2) }));
        this.socket.end();
      } else if (f.opcode === OP.text || f.opcode === OP.binary || f.opcode === OP.cont) {
        this.#fragments.push(f.payload);
        if (f.fin) {
          const whole = Buffer.concat(this.#fragments);
          this.#fragments = [];
          this.onMessage(this, whole);
        }
      }
    }
  }

  write(bytes: Buffer): void {
    if (!this.socket.destroyed) this.socket.write(bytes);
  }

  /** Each event as one text frame. */
  send(events: readonly SseEvent[]): void {
    for (const e of events) this.write(frame({ opcode: OP.text, payload: JSON.stringify(e.data) }));
  }

  /** A JSON event of the fake's own making. */
  sendEvent(event: Record<string, unknown>): void {
    this.write(frame({ opcode: OP.text, payload: JSON.stringify(event) }));
  }

  close(code = 1000): void {
    this.write(frame({ opcode: OP.close, payload: closeBody(code) }));
  }
}

/** What a scripted turn handler gets: the message, parsed, and its connection. */
export interface SocketTurn {
  readonly conn: FakeSocketConnection;
  readonly body: ResponsesRequest & Record<string, unknown>;
  readonly raw: Buffer;
  /** Answers as the fake would by default. */
  answer(): void;
}

export type SocketTurnHandler = (turn: SocketTurn) => void;

export interface ResponsesSocketFake {
  readonly connections: FakeSocketConnection[];
  /** Every client message, as a request record: method WS, the handshake's URL and headers, the message as body. */
  readonly requests: ModelRequest[];
  /** Handlers for the next messages, used once each, in order; then the default. */
  script(...handlers: SocketTurnHandler[]): void;
  /** Switches the upgrade off: the handshake is answered 404 (a provider without WebSocket mode). */
  refuseUpgrades(status?: number): void;
  /** From now on an upgrade is never answered (the connection stays open, silent). */
  hangUpgrades(): void;
}

/** The events of a warm-up (`generate: false`): the response made and completed, without output. */
export function warmupEvents(request: Record<string, unknown>, model: string, responseId: string): SseEvent[] {
  const response = (status: string, extra: Record<string, unknown>) => ({ id: responseId, object: 'response', created_at: Math.floor(Date.now() / 1000), status, model, output: [], previous_response_id: request.previous_response_id ?? null, store: request.store ?? true, usage: null, ...extra });
  return [
    { event: 'response.created', data: { type: 'response.created', sequence_number: 0, response: response('in_progress', {}) } },
    { event: 'response.completed', data: { type: 'response.completed', sequence_number: 1, response: response('completed', { usage: usage(1200, 0, 0, 0) }) } },
  ];
}

/** The `error` event OpenAI wraps an HTTP error in on the socket. */
export function errorEvent(status: number, code: string, message: string, param: string | null = null): Record<string, unknown> {
  return { type: 'error', status, error: { type: 'invalid_request_error', code, message, param } };
}

/** The default answer to one `response.create`. */
export function answerTurn(conn: FakeSocketConnection, body: ResponsesRequest & Record<string, unknown>): void {
  const previous = body.previous_response_id;
  if (typeof previous === 'string' && !conn.responses.has(previous)) {
    conn.sendEvent(errorEvent(400, 'previous_response_not_found', `Previous response with id '${previous}' not found.`, 'previous_response_id'));
    return;
  }
  const ids = freshIds();
  conn.responses.add(ids.response);
  conn.send(body.generate === false ? warmupEvents(body, body.model ?? 'unknown', ids.response) : transcriptFor(body, ids));
}

/** Serves WebSocket mode on `server`'s /v1/responses (its other requests are the server's). */
export function serveResponsesSocket(server: HttpServer | HttpsServer, requests: ModelRequest[] = []): ResponsesSocketFake {
  const connections: FakeSocketConnection[] = [];
  const queue: SocketTurnHandler[] = [];
  let refusal: number | undefined;
  let hanging = false;
  const onMessage = (conn: FakeSocketConnection, raw: Buffer) => {
    requests.push({ method: 'WS', url: conn.url, headers: conn.headers, body: raw });
    let body: ResponsesRequest & Record<string, unknown>;
    try {
      body = JSON.parse(raw.toString('utf8')) as ResponsesRequest & Record<string, unknown>;
    } catch {
      conn.sendEvent(errorEvent(400, 'invalid_json', 'We could not parse the JSON body of your request.'));
      return;
    }
    if (body.type !== 'response.create') {
      conn.sendEvent(errorEvent(400, 'unknown_event', `Unknown client event type '${String(body.type)}'.`));
      return;
    }
    const turn: SocketTurn = { conn, body, raw, answer: () => answerTurn(conn, body) };
    (queue.shift() ?? ((t: SocketTurn) => t.answer()))(turn);
  };
  server.on('upgrade', (req: IncomingMessage, socket: Socket) => {
    if (hanging) return void socket.on('error', () => {});
    const key = req.headers['sec-websocket-key'];
    if (refusal !== undefined || !/^\/v1\/responses(\?|$)/.test(req.url ?? '') || typeof key !== 'string') {
      const body = JSON.stringify({ error: { message: `Invalid URL (GET ${req.url})`, type: 'invalid_request_error', code: null, param: null } });
      socket.end(`HTTP/1.1 ${refusal ?? 404} Not Found\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      return;
    }
    socket.write(['HTTP/1.1 101 Switching Protocols', 'Upgrade: websocket', 'Connection: Upgrade', `Sec-WebSocket-Accept: ${acceptOf(key)}`, `x-request-id: req_${Math.random().toString(16).slice(2).padEnd(32, '0')}`, '', ''].join('\r\n'));
    connections.push(new FakeSocketConnection(socket, req.headers, req.url ?? '', onMessage));
  });
  return {
    connections,
    requests,
    script: (...handlers) => queue.push(...handlers),
    refuseUpgrades: (status = 404) => void (refusal = status),
    hangUpgrades: () => void (hanging = true),
  };
}
