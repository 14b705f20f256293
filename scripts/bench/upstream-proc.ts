// The bench's upstreams, in their own process: an HTTPS git host (ref advertisement, pack upload
// checked byte for byte) and an HTTPS OpenAI-style model API (a 1 KB completion, or an SSE stream
// paced as the request asks, each chunk stamped with the shared monotonic clock), which also
// serves Anthropic's Messages API (one stream, an event per write) and OpenAI's Responses API,
// over HTTP and in its WebSocket mode (one frame per event, test/support/ws-wire.ts's framing).
// Both refuse any request without exactly the expected credential, so nothing can pass without it.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { acceptOf, frame, FrameSplitter, OP } from '../../test/support/ws-wire.ts';
import { encodeSse } from '../../test/support/responses-upstream.ts';
import { writeStream } from '../../test/support/https-fake.ts';
import { serve } from './ipc.ts';
import {
  messagesEvents,
  messagesRequestBody,
  CHAT_CONTENT_BYTES,
  chatAnswer,
  GIT_REPO_PATH,
  MODEL,
  parseStreamParams,
  PatternCheck,
  patternBlock,
  refAdvertisement,
  REFS_QUERY,
  responsesEvents,
  responsesTurn,
  sseContentChunk,
  sseFinalChunks,
} from './shared.ts';

interface StartArgs {
  keyPem: string;
  certPem: string;
  token: string;
  seed: string;
}

const stats = { tlsConnections: 0, refused: 0, refs: 0, packs: 0, packBad: 0, chats: 0, chatBad: 0, messages: 0, responses: 0, socketTurns: 0, streamsOpen: 0, streamsStarted: 0, chunks: 0 };
const servers: Server[] = [];
let opts: StartArgs;
let base: Buffer;
let answer: Buffer;
let refs: Buffer;

function authorized(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.headers.authorization === `Bearer ${opts.token}`) return true;
  stats.refused++;
  res.writeHead(401, { 'content-type': 'text/plain', 'content-length': 13 });
  res.end('unauthorized\n');
  req.resume();
  return false;
}

function gitHandler(req: IncomingMessage, res: ServerResponse): void {
  if (!authorized(req, res)) return;
  if (req.method === 'GET' && req.url === `${GIT_REPO_PATH}/info/refs${REFS_QUERY}`) {
    stats.refs++;
    res.writeHead(200, { 'content-type': 'application/x-git-upload-pack-advertisement', 'cache-control': 'no-cache', 'content-length': refs.length });
    res.end(refs);
    return;
  }
  if (req.method === 'POST' && req.url === `${GIT_REPO_PATH}/git-receive-pack`) {
    stats.packs++;
    const check = new PatternCheck(base);
    req.on('data', (c: Buffer) => check.update(c));
    req.on('end', () => {
      if (!check.ok) stats.packBad++;
      const body = JSON.stringify({ bytes: check.bytes, ok: check.ok });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
    return;
  }
  res.writeHead(404, { 'content-length': 0 });
  res.end();
  req.resume();
}

/** One write per event, each once the previous one is flushed, as the API streams them. */
const MESSAGES_WRITES = messagesEvents().map((e) => encodeSse([e]));
const MESSAGES_BODY_BYTES = messagesRequestBody().length;

/** Anthropic's Messages API: the key in x-api-key, one stream per request. */
function messagesHandler(req: IncomingMessage, res: ServerResponse): void {
  if (req.headers['x-api-key'] !== opts.token || req.headers.authorization !== undefined) {
    stats.refused++;
    res.writeHead(401, { 'content-type': 'application/json', 'content-length': 2 });
    res.end('{}');
    req.resume();
    return;
  }
  let bytes = 0;
  req.on('data', (c: Buffer) => (bytes += c.length));
  req.on('end', () => {
    if (bytes !== MESSAGES_BODY_BYTES) return bad(res);
    stats.messages++;
    writeStream(res, { 'content-type': 'text/event-stream; charset=utf-8', 'request-id': 'req_bench' }, MESSAGES_WRITES);
  });
}

const RESPONSES = responsesTurn();
const RESPONSES_EVENTS = responsesEvents();
/** The Responses stream over HTTP: one write per event. */
const RESPONSES_WRITES = RESPONSES_EVENTS.map((e) => encodeSse([e]));
/** And over a WebSocket: one frame per event, written at once. */
const RESPONSES_FRAMES = Buffer.concat(RESPONSES_EVENTS.map((e) => frame({ opcode: OP.text, payload: JSON.stringify(e.data) })));

/** `POST /v1/responses`, streamed: the body must be the scenario's turn, byte for byte. */
function responsesHandler(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (!Buffer.concat(chunks).equals(RESPONSES.http)) return bad(res);
    stats.responses++;
    writeStream(res, { 'content-type': 'text/event-stream; charset=utf-8', 'x-request-id': 'req_bench' }, RESPONSES_WRITES);
  });
}

/** WebSocket mode on /v1/responses: the credential at the upgrade; each message must be the scenario's turn. */
function responsesSocket(req: IncomingMessage, socket: Socket): void {
  const key = req.headers['sec-websocket-key'];
  if (req.url !== '/v1/responses' || req.headers.authorization !== `Bearer ${opts.token}` || typeof key !== 'string') {
    stats.refused++;
    socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    return;
  }
  socket.setNoDelay(true);
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptOf(key)}\r\n\r\n`);
  const splitter = new FrameSplitter();
  let parts: Buffer[] = [];
  socket.on('error', () => {});
  socket.on('data', (chunk: Buffer) => {
    for (const f of splitter.push(chunk)) {
      if (f.opcode === OP.close) return void socket.end(frame({ opcode: OP.close, payload: f.payload.subarray(0, 2) }));
      if (f.opcode === OP.ping) socket.write(frame({ opcode: OP.pong, payload: f.payload }));
      if (f.opcode !== OP.text && f.opcode !== OP.cont) continue;
      if (!f.masked) stats.chatBad++;
      parts.push(f.payload);
      if (!f.fin) continue;
      const message = Buffer.concat(parts);
      parts = [];
      if (!message.equals(RESPONSES.socket)) {
        stats.chatBad++;
        socket.destroy();
        return;
      }
      stats.socketTurns++;
      socket.write(RESPONSES_FRAMES);
    }
  });
}

function modelHandler(req: IncomingMessage, res: ServerResponse): void {
  if (req.method === 'POST' && req.url === '/v1/messages') return messagesHandler(req, res);
  if (!authorized(req, res)) return;
  if (req.method === 'POST' && req.url === '/v1/responses') return responsesHandler(req, res);
  if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
    res.writeHead(404, { 'content-length': 0 });
    res.end();
    req.resume();
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let body: { model?: string; stream?: boolean; messages?: { content?: string }[] };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      body = {};
    }
    const last = body.messages?.[body.messages.length - 1]?.content ?? '';
    if (body.model !== MODEL) return bad(res);
    if (!body.stream) {
      if (last.length !== CHAT_CONTENT_BYTES) return bad(res);
      stats.chats++;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length, 'x-request-id': 'req_bench' });
      res.end(answer);
      return;
    }
    const pace = parseStreamParams(last);
    if (!pace) return bad(res);
    stream(res, pace.intervalMs, pace.durationMs);
  });
}

function bad(res: ServerResponse): void {
  stats.chatBad++;
  res.writeHead(400, { 'content-type': 'application/json', 'content-length': 2 });
  res.end('{}');
}

/** Streams running now, each with the function that ends it cleanly (stop, usage, [DONE]). */
const active = new Set<() => void>();

/**
 * Chunk 0 at once, then one every intervalMs until durationMs has passed or endStreams is
 * called; then stop, usage, [DONE].
 */
function stream(res: ServerResponse, intervalMs: number, durationMs: number): void {
  stats.streamsOpen++;
  stats.streamsStarted++;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-request-id': 'req_bench' });
  const started = performance.now();
  let i = 0;
  res.write(sseContentChunk(i++));
  stats.chunks++;
  const finish = () => {
    clearInterval(timer);
    active.delete(finish);
    res.end(sseFinalChunks(i));
  };
  const timer = setInterval(() => {
    if (performance.now() - started >= durationMs) return finish();
    res.write(sseContentChunk(i++));
    stats.chunks++;
  }, intervalMs);
  active.add(finish);
  res.once('close', () => {
    clearInterval(timer);
    active.delete(finish);
    stats.streamsOpen--;
  });
}

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<number> {
  const server = createServer({ key: opts.keyPem, cert: opts.certPem, keepAlive: true, noDelay: true }, handler);
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 125_000;
  server.requestTimeout = 0;
  server.on('secureConnection', () => stats.tlsConnections++);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, resolve));
  return (server.address() as AddressInfo).port;
}

serve({
  async start(args: StartArgs) {
    opts = args;
    base = patternBlock(args.seed);
    answer = chatAnswer();
    refs = refAdvertisement();
    const modelPort = await listen(modelHandler);
    servers.at(-1)!.on('upgrade', responsesSocket);
    return { gitPort: await listen(gitHandler), modelPort };
  },
  newModelServer: () => listen(modelHandler),
  stats: () => stats,
  /** Ends every running stream now, cleanly; returns how many. */
  endStreams() {
    const all = [...active];
    for (const end of all) end();
    return all.length;
  },
  async close() {
    for (const s of servers) s.closeAllConnections();
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  },
});
