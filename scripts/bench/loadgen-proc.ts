// The load generator, in its own process so that it is not the proxy's event loop. The same
// node:http / node:https client code drives every path: direct to the HTTPS upstream (sending
// the credential itself), through the proxy, or through nginx (plain HTTP, no credential).
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { randomBytes } from 'node:crypto';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { encodeSse } from '../../test/support/responses-upstream.ts';
import { acceptOf, frame, FrameSplitter, OP, upgradeHead } from '../../test/support/ws-wire.ts';
import { serve } from './ipc.ts';
import { chatAnswer, chatRequestBody, GIT_REPO_PATH, messagesRequestBody, messagesStream, MiB, monoUs, patternBlock, PUSH_HEAD, refAdvertisement, REFS_QUERY, responsesEvents, responsesTurn, Samples, streamRequestBody } from './shared.ts';

export interface Target {
  /** 'direct', 'proxy' or 'nginx'. */
  name: string;
  scheme: 'http' | 'https';
  port: number;
  /** Path prefix: '' direct, '/<hostKey>' through a git proxy. */
  prefix: string;
  /** Added to every request: the credential, when going direct. */
  headers: Record<string, string>;
  /** CA certificate (PEM) for https targets. */
  ca?: string;
}

type AnyAgent = HttpAgent | HttpsAgent;

function makeAgent(t: Target, keepAlive: boolean, maxSockets = Infinity): AnyAgent {
  const o = { keepAlive, maxSockets, maxFreeSockets: 1024, scheduling: 'lifo' as const, keepAliveMsecs: 1000 };
  return t.scheme === 'https' ? new HttpsAgent({ ...o, ca: t.ca }) : new HttpAgent(o);
}

function open(t: Target, agent: AnyAgent | false, method: string, path: string, headers: Record<string, string | number>): ClientRequest {
  const o = { host: '127.0.0.1', port: t.port, method, path: t.prefix + path, agent, headers: { ...t.headers, ...headers }, ...(t.ca && agent === false ? { ca: t.ca } : {}) };
  return t.scheme === 'https' ? httpsRequest(o) : httpRequest(o);
}

class BenchError extends Error {}

/** Sends a request and reads the whole response; anything but 200 is an error with the details. */
function exchange(t: Target, agent: AnyAgent | false, method: string, path: string, headers: Record<string, string | number>, body?: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const req = open(t, agent, method, path, headers);
    req.on('error', (e) => reject(new BenchError(`${t.name} ${method} ${path}: ${e.message}`)));
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (e) => reject(new BenchError(`${t.name} ${method} ${path}: response ${e.message}`)));
      res.on('end', () => {
        const got = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
        if (res.statusCode !== 200) reject(new BenchError(`${t.name} ${method} ${path}: status ${res.statusCode}: ${got.subarray(0, 200).toString()}`));
        else resolve(got);
      });
    });
    req.end(body);
  });
}

// ---- the two small requests -----------------------------------------------------------------

const REFS = refAdvertisement();
const CHAT = chatRequestBody();
const ANSWER = chatAnswer();
const REFS_HEADERS = { accept: '*/*', 'user-agent': 'git/2.39.5', pragma: 'no-cache' };
const CHAT_HEADERS = { 'content-type': 'application/json', accept: 'application/json', 'user-agent': 'OpenAI/JS 4.77.0', 'content-length': CHAT.length };

async function getRefs(t: Target, agent: AnyAgent): Promise<void> {
  const body = await exchange(t, agent, 'GET', `${GIT_REPO_PATH}/info/refs${REFS_QUERY}`, REFS_HEADERS);
  if (!body.equals(REFS)) throw new BenchError(`${t.name}: ref advertisement differs (${body.length} bytes)`);
}
async function chat(t: Target, agent: AnyAgent): Promise<void> {
  const body = await exchange(t, agent, 'POST', '/v1/chat/completions', CHAT_HEADERS, CHAT);
  if (!body.equals(ANSWER)) throw new BenchError(`${t.name}: completion differs (${body.length} bytes)`);
}
/** A one-chunk stream; resolves with the time to its first body byte, in ms. */
const FIRST_BYTE_BODY = streamRequestBody(1, 0);
function streamFirstByte(t: Target, agent: AnyAgent): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const req = open(t, agent, 'POST', '/v1/chat/completions', { 'content-type': 'application/json', accept: 'text/event-stream', 'content-length': FIRST_BYTE_BODY.length });
    req.on('error', (e) => reject(new BenchError(`${t.name} stream: ${e.message}`)));
    req.on('response', (res: IncomingMessage) => {
      let first: number | undefined;
      res.on('data', () => (first ??= performance.now() - start));
      res.on('error', (e) => reject(new BenchError(`${t.name} stream: response ${e.message}`)));
      res.on('end', () => (res.statusCode === 200 && first !== undefined ? resolve(first) : reject(new BenchError(`${t.name} stream: status ${res.statusCode}`))));
    });
    req.end(FIRST_BYTE_BODY);
  });
}

/**
 * One Messages stream, read to its end and compared byte for byte with what the upstream sends;
 * resolves with the times to its first and to its last body byte, in ms.
 */
const MESSAGES_BODY = messagesRequestBody();
const MESSAGES_STREAM = messagesStream();
const MESSAGES_HEADERS = { 'content-type': 'application/json', accept: 'text/event-stream', 'anthropic-version': '2023-06-01', 'user-agent': 'claude-cli/2.1.330', 'content-length': MESSAGES_BODY.length };
const messagesCall = (t: Target, agent: AnyAgent): Promise<FirstLast> => streamedCall(t, agent, 'messages', '/v1/messages', MESSAGES_HEADERS, MESSAGES_BODY, MESSAGES_STREAM);

/**
 * A Responses turn over HTTP (`POST /v1/responses`, streamed), read to its end and compared byte
 * for byte; the times to its first and last body byte, in ms.
 */
const RESPONSES = responsesTurn();
const RESPONSES_STREAM = Buffer.from(encodeSse(responsesEvents()));
const RESPONSES_HEADERS = { 'content-type': 'application/json', accept: 'text/event-stream', 'user-agent': 'codex_exec/0.169.0', 'content-length': RESPONSES.http.length };
const responsesCall = (t: Target, agent: AnyAgent): Promise<FirstLast> => streamedCall(t, agent, 'responses', '/v1/responses', RESPONSES_HEADERS, RESPONSES.http, RESPONSES_STREAM);

/** A streamed POST read to its end and compared byte for byte with `expected`; the times to its first and last body byte, in ms. */
function streamedCall(t: Target, agent: AnyAgent, label: string, path: string, headers: Record<string, string | number>, body: Buffer | string, expected: Buffer): Promise<FirstLast> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const req = open(t, agent, 'POST', path, headers);
    req.on('error', (e) => reject(new BenchError(`${t.name} ${label}: ${e.message}`)));
    req.on('response', (res: IncomingMessage) => {
      let first: number | undefined;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => {
        first ??= performance.now() - start;
        chunks.push(c);
      });
      res.on('error', (e) => reject(new BenchError(`${t.name} ${label}: response ${e.message}`)));
      res.on('end', () => {
        const last = performance.now() - start;
        if (res.statusCode !== 200 || !Buffer.concat(chunks).equals(expected)) return reject(new BenchError(`${t.name} ${label}: status ${res.statusCode} or a stream that differs`));
        resolve({ first: first!, last });
      });
    });
    req.end(body);
  });
}

/** The same turn over a WebSocket: the events as the client must get them, one message each. */
const SOCKET_EVENTS = responsesEvents().map((e) => JSON.stringify(e.data));

/** One WebSocket per target, opened by its first turn and kept for the rest, as Codex keeps one for a session. */
class BenchSocket {
  readonly #splitter = new FrameSplitter();
  #parts: Buffer[] = [];
  #waiter: ((message: string | Error) => void) | undefined;
  readonly #queue: (string | Error)[] = [];

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      for (const f of this.#splitter.push(chunk)) {
        if (f.opcode === OP.close) this.#deliver(new BenchError(`closed with ${f.payload.length >= 2 ? f.payload.readUInt16BE(0) : 'no code'}`));
        if (f.opcode !== OP.text && f.opcode !== OP.cont) continue;
        this.#parts.push(f.payload);
        if (!f.fin) continue;
        this.#deliver(Buffer.concat(this.#parts).toString('utf8'));
        this.#parts = [];
      }
    });
    socket.on('error', (e) => this.#deliver(new BenchError(e.message)));
    socket.on('close', () => this.#deliver(new BenchError('the socket closed')));
  }

  #deliver(m: string | Error): void {
    const w = this.#waiter;
    this.#waiter = undefined;
    if (w) w(m);
    else this.#queue.push(m);
  }

  next(): Promise<string> {
    const m = this.#queue.shift();
    if (m !== undefined) return m instanceof Error ? Promise.reject(m) : Promise.resolve(m);
    return new Promise((resolve, reject) => (this.#waiter = (x) => (x instanceof Error ? reject(x) : resolve(x))));
  }

  send(bytes: Buffer): void {
    this.socket.write(frame({ opcode: OP.text, payload: bytes, mask: true }));
  }

  /** The upgrade on a fresh connection (TLS for the direct path), the target's headers with it. */
  static async open(t: Target): Promise<BenchSocket> {
    const socket = t.scheme === 'https' ? tlsConnect({ host: '127.0.0.1', port: t.port, ca: t.ca }) : netConnect(t.port, '127.0.0.1');
    socket.setNoDelay(true);
    await new Promise<void>((resolve, reject) => socket.once(t.scheme === 'https' ? 'secureConnect' : 'connect', resolve).once('error', reject));
    const key = randomBytes(16).toString('base64');
    socket.write(upgradeHead(`${t.prefix}/v1/responses`, `127.0.0.1:${t.port}`, key, { ...t.headers, 'User-Agent': 'codex_exec/0.169.0', 'OpenAI-Beta': 'responses_websockets=2026-02-06' }));
    let head = Buffer.alloc(0);
    const rest = await new Promise<Buffer>((resolve, reject) => {
      const onData = (c: Buffer) => {
        head = Buffer.concat([head, c]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        socket.off('data', onData);
        const status = head.subarray(0, end).toString('latin1');
        if (!status.startsWith('HTTP/1.1 101') || !status.includes(acceptOf(key))) return reject(new BenchError(`${t.name} socket: ${status.split('\r\n')[0]}`));
        resolve(head.subarray(end + 4));
      };
      socket.on('data', onData);
      socket.once('error', reject);
    });
    const opened = new BenchSocket(socket);
    if (rest.length > 0) socket.emit('data', rest);
    return opened;
  }
}

const benchSockets = new Map<string, Promise<BenchSocket>>();

/** A turn on the target's WebSocket: the times to its first event and to its last, in ms, every event checked. */
async function socketTurn(t: Target): Promise<FirstLast> {
  let opening = benchSockets.get(t.name);
  if (opening === undefined) benchSockets.set(t.name, (opening = BenchSocket.open(t)));
  const ws = await opening;
  const start = performance.now();
  ws.send(RESPONSES.socket);
  let first = 0;
  for (let i = 0; i < SOCKET_EVENTS.length; i++) {
    const event = await ws.next().catch((e: Error) => Promise.reject(new BenchError(`${t.name} socket: ${e.message}`)));
    if (i === 0) first = performance.now() - start;
    if (event !== SOCKET_EVENTS[i]) throw new BenchError(`${t.name} socket: event ${i} differs: ${event.slice(0, 120)}`);
  }
  return { first, last: performance.now() - start };
}

function closeBenchSockets(): void {
  for (const s of benchSockets.values()) void s.then((ws) => ws.socket.destroy(), () => {});
  benchSockets.clear();
}

/** What a streamed request can report instead of its total time: first and last byte, in ms. */
interface FirstLast {
  first: number;
  last: number;
}

/**
 * Request kinds. One that resolves with a number reports that instead of its total time; one
 * that resolves with FirstLast reports its last byte as the latency and its first byte apart.
 */
const KINDS = {
  refs: getRefs,
  chat,
  ttfb: streamFirstByte,
  messages: messagesCall,
  responses: responsesCall,
  socket: socketTurn,
} as const;
type Kind = keyof typeof KINDS;

// ---- scenarios ------------------------------------------------------------------------------

let patternBase: Buffer | undefined;

/** One pack upload, chunked like git's (its command list first), with backpressure; the upstream checks every byte. */
async function upload(a: { target: Target; mib: number; seed: string }): Promise<{ ms: number; bytes: number }> {
  patternBase ??= patternBlock(a.seed);
  const base = patternBase;
  const t0 = performance.now();
  const reply = await new Promise<Buffer>((resolve, reject) => {
    const req = open(a.target, false, 'POST', `${GIT_REPO_PATH}/git-receive-pack`, {
      'content-type': 'application/x-git-receive-pack-request',
      accept: 'application/x-git-receive-pack-result',
      'user-agent': 'git/2.39.5',
    });
    req.on('error', (e) => reject(new BenchError(`${a.target.name} upload: ${e.message}`)));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => (res.statusCode === 200 ? resolve(Buffer.concat(chunks)) : reject(new BenchError(`${a.target.name} upload: status ${res.statusCode}`))));
    });
    let i = 0;
    req.write(PUSH_HEAD);
    const write = () => {
      while (i < a.mib) {
        const block = Buffer.allocUnsafe(MiB);
        base.copy(block);
        block.writeUInt32BE(i++, 0);
        if (i === a.mib) return void req.end(block);
        if (!req.write(block)) return void req.once('drain', write);
      }
    };
    write();
  });
  const ms = performance.now() - t0;
  const got = JSON.parse(reply.toString()) as { bytes: number; ok: boolean };
  if (got.bytes !== a.mib * MiB || !got.ok) throw new BenchError(`${a.target.name} upload arrived wrong: ${got.bytes} bytes, content ${got.ok ? 'ok' : 'corrupt'}`);
  return { ms, bytes: got.bytes };
}

interface PerTarget {
  latencies: Float64Array;
  counts: number[];
  elapsedMs: number[];
}

/** `conns` loops, each sending its next request when the previous one is answered, for `ms`. */
async function closedSlice(t: Target, agent: AnyAgent, kind: Kind, conns: number, ms: number, lat: Samples | undefined): Promise<{ count: number; elapsed: number }> {
  const fn = KINDS[kind];
  const t0 = performance.now();
  const end = t0 + ms;
  let count = 0;
  let last = t0;
  const loop = async () => {
    while (performance.now() < end) {
      const s = performance.now();
      await fn(t, agent);
      last = performance.now();
      lat?.push(last - s);
      count++;
    }
  };
  await Promise.all(Array.from({ length: conns }, loop));
  return { count, elapsed: last - t0 };
}

/** Closed loop over `conns` keep-alive connections, targets alternating in slices of sliceMs. */
async function closedLoop(a: { targets: Target[]; kind: Kind; conns: number; sliceMs: number; rounds: number; warmupMs: number }): Promise<Record<string, PerTarget>> {
  const agents = a.targets.map((t) => makeAgent(t, true, a.conns));
  const lat = a.targets.map(() => new Samples());
  const out = a.targets.map(() => ({ counts: [] as number[], elapsedMs: [] as number[] }));
  try {
    for (let i = 0; i < a.targets.length; i++) await closedSlice(a.targets[i]!, agents[i]!, a.kind, a.conns, a.warmupMs, undefined);
    for (let r = 0; r < a.rounds; r++) {
      for (let i = 0; i < a.targets.length; i++) {
        const { count, elapsed } = await closedSlice(a.targets[i]!, agents[i]!, a.kind, a.conns, a.sliceMs, lat[i]);
        out[i]!.counts.push(count);
        out[i]!.elapsedMs.push(elapsed);
      }
    }
  } finally {
    for (const ag of agents) ag.destroy();
  }
  return Object.fromEntries(a.targets.map((t, i) => [t.name, { latencies: lat[i]!.values(), ...out[i]! }]));
}

/**
 * One request at a time, the targets taking turns request by request. `latencies` per target;
 * `firstByte` too for a kind that reports first and last byte.
 */
async function sequential(a: { targets: Target[]; kind: Kind; n: number; warmup: number }): Promise<Record<string, { latencies: Float64Array; firstByte?: Float64Array }>> {
  const fn: (t: Target, agent: AnyAgent) => Promise<void | number | FirstLast> = KINDS[a.kind];
  const agents = a.targets.map((t) => makeAgent(t, true, 1));
  const lat = a.targets.map(() => new Samples());
  const first = a.targets.map(() => new Samples());
  try {
    for (let k = 0; k < a.warmup + a.n; k++) {
      for (let i = 0; i < a.targets.length; i++) {
        const s = performance.now();
        const measured = await fn(a.targets[i]!, agents[i]!);
        if (k < a.warmup) continue;
        if (typeof measured === 'number') lat[i]!.push(measured);
        else if (measured) {
          lat[i]!.push(measured.last);
          first[i]!.push(measured.first);
        } else lat[i]!.push(performance.now() - s);
      }
    }
  } finally {
    for (const ag of agents) ag.destroy();
  }
  return Object.fromEntries(a.targets.map((t, i) => [t.name, { latencies: lat[i]!.values(), ...(first[i]!.length ? { firstByte: first[i]!.values() } : {}) }]));
}

/**
 * Open loop: requests are due every 1000/rate ms whatever happens to earlier ones, and each
 * latency counts from when its request was due (no coordinated omission). The send lag (due to
 * sent, the generator's own timer granularity) is reported separately.
 */
async function rateSlice(t: Target, agent: AnyAgent, kind: Kind, rate: number, ms: number, lat: Samples | undefined, lag: Samples | undefined): Promise<void> {
  const fn = KINDS[kind];
  const interval = 1000 / rate;
  const n = Math.round((ms * rate) / 1000);
  const t0 = performance.now() + 1;
  const inflight: Promise<void>[] = [];
  let failure: unknown;
  let k = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (k < n && t0 + k * interval <= now) {
        const due = t0 + k * interval;
        k++;
        lag?.push(now - due);
        inflight.push(
          fn(t, agent).then(
            () => lat?.push(performance.now() - due),
            (e: unknown) => void (failure ??= e),
          ),
        );
      }
      if (k >= n) return resolve();
      const wait = t0 + k * interval - performance.now();
      setTimeout(tick, Math.max(0, Math.floor(wait)));
    };
    tick();
  });
  await Promise.all(inflight);
  if (failure) throw failure;
}

async function openLoop(a: { targets: Target[]; kind: Kind; rate: number; sliceMs: number; rounds: number; warmupMs: number }): Promise<Record<string, { latencies: Float64Array; sendLag: Float64Array; requests: number; wallMs: number }>> {
  const agents = a.targets.map((t) => makeAgent(t, true));
  const lat = a.targets.map(() => new Samples());
  const lag = a.targets.map(() => new Samples());
  const wall = a.targets.map(() => 0);
  try {
    for (let i = 0; i < a.targets.length; i++) await rateSlice(a.targets[i]!, agents[i]!, a.kind, a.rate, a.warmupMs, undefined, undefined);
    for (let r = 0; r < a.rounds; r++) {
      for (let i = 0; i < a.targets.length; i++) {
        const s = performance.now();
        await rateSlice(a.targets[i]!, agents[i]!, a.kind, a.rate, a.sliceMs, lat[i], lag[i]);
        wall[i]! += performance.now() - s;
      }
    }
  } finally {
    for (const ag of agents) ag.destroy();
  }
  return Object.fromEntries(a.targets.map((t, i) => [t.name, { latencies: lat[i]!.values(), sendLag: lag[i]!.values(), requests: lat[i]!.length, wallMs: wall[i]! }]));
}

// ---- SSE streams --------------------------------------------------------------------------

interface StreamState {
  req: ClientRequest;
  chunks: number;
  done: boolean;
  failed: string | undefined;
  /** Still waiting for its first chunk when the ramp deadline passed: given up, not a failure. */
  abandoned?: boolean;
}

/**
 * Opens one stream and follows it: every content chunk's delay (arrival on the shared clock
 * minus the upstream's stamp) goes to `delays`; the chunk indexes must run 0, 1, 2, ... and the
 * stream must end with the announced count and [DONE].
 */
function followStream(t: Target, agent: AnyAgent, body: Buffer, delays: Samples | undefined, gate: { since: number }, onFirst: () => void, onEnd: (s: StreamState) => void): StreamState {
  const req = open(t, agent, 'POST', '/v1/chat/completions', { 'content-type': 'application/json', accept: 'text/event-stream', 'content-length': body.length });
  const st: StreamState = { req, chunks: 0, done: false, failed: undefined };
  let ended = false;
  const finish = (failed?: string) => {
    if (ended) return;
    ended = true;
    st.failed ??= failed;
    if (st.chunks === 0) onFirst();
    onEnd(st);
  };
  req.on('error', (e) => finish(`request: ${e.message}`));
  req.on('response', (res: IncomingMessage) => {
    if (res.statusCode !== 200 || !String(res.headers['content-type']).startsWith('text/event-stream')) {
      res.resume();
      return finish(`status ${res.statusCode} ${res.headers['content-type']}`);
    }
    let buf = '';
    let announced = -1;
    res.setEncoding('latin1');
    res.on('data', (s: string) => {
      const now = monoUs();
      buf += s;
      let idx: number;
      while ((idx = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, idx);
        buf = buf.slice(idx + 2);
        if (ev === 'data: [DONE]') {
          st.done = true;
          continue;
        }
        const ii = ev.lastIndexOf('"i":');
        if (ii >= 0) {
          const ti = ev.indexOf(',"t":', ii);
          const i = Number(ev.slice(ii + 4, ti));
          const stamp = Number(ev.slice(ti + 5, ev.length - 1));
          if (i !== st.chunks) st.failed ??= `chunk ${i} arrived where ${st.chunks} was due`;
          st.chunks++;
          if (stamp >= gate.since) delays?.push((now - stamp) / 1000);
          if (st.chunks === 1) onFirst();
          continue;
        }
        const ni = ev.lastIndexOf('"n":');
        if (ni >= 0) announced = Number(ev.slice(ni + 4, ev.length - 1));
      }
    });
    res.on('error', (e) => finish(`response: ${e.message}`));
    res.on('end', () => finish(!st.done ? 'no [DONE]' : announced !== st.chunks ? `${st.chunks} chunks, upstream sent ${announced}` : undefined));
    res.on('close', () => finish(st.done ? undefined : 'closed early'));
  });
  req.end(body);
  return st;
}

/**
 * Opens up to `count` streams, at most `concurrency` waiting for their first chunk at a time.
 * At `deadlineMs` it stops: streams still waiting for their first chunk are destroyed and
 * marked abandoned (an overloaded proxy must not turn the bench into an unbounded wait, nor its
 * header timeout into failures of the bench's own making). Returns the streams that opened.
 */
async function openMany(t: Target, agent: AnyAgent, count: number, concurrency: number, deadlineMs: number, body: Buffer, delays: Samples | undefined, gate: { since: number }, onEnd: (s: StreamState) => void): Promise<{ opened: StreamState[]; abandoned: number }> {
  const all: StreamState[] = [];
  let stopped = false;
  await new Promise<void>((resolve) => {
    let started = 0;
    let first = 0;
    const timer = setTimeout(resolve, deadlineMs);
    const next = () => {
      // Past the deadline nothing new starts (an abandoned stream's end would otherwise call this).
      if (stopped || started >= count) return;
      started++;
      all.push(
        followStream(t, agent, body, delays, gate, () => {
          if (++first === count) {
            clearTimeout(timer);
            resolve();
          } else next();
        }, (s) => void (s.abandoned || onEnd(s))),
      );
    };
    for (let i = 0; i < Math.min(concurrency, count); i++) next();
  });
  stopped = true;
  const opened: StreamState[] = [];
  let abandoned = 0;
  for (const s of all) {
    if (s.chunks > 0 || s.failed) opened.push(s);
    else {
      s.abandoned = true;
      s.req.destroy();
      abandoned++;
    }
  }
  return { opened, abandoned };
}

/**
 * `count` concurrent streams, each a chunk every intervalMs, measured in two calls: streamsStart
 * opens them all (the upstream keeps them going until the orchestrator has it end them all at
 * once), streamsFinish waits for their clean ends. Only chunks written once every stream is open
 * count: the delays of `count` concurrent streams, not of the ramp (where the TLS handshakes of
 * streams still opening compete with the chunks), however long the ramp takes. When the ramp
 * limit gave some up, the window starts ABANDON_SETTLE_MS after their teardown.
 */
let streaming: { target: Target; agent: AnyAgent; all: StreamState[]; delays: Samples; done: Promise<void>; failure: () => string | undefined } | undefined;

/** How long streamsStart waits after giving up streams at the ramp limit before the window starts. */
const ABANDON_SETTLE_MS = 1000;

async function streamsStart(a: { target: Target; count: number; intervalMs: number; concurrency: number; rampLimitMs: number }): Promise<{ openMs: number; opened: number; abandoned: number }> {
  const agent = makeAgent(a.target, false);
  const delays = new Samples();
  let ended = 0;
  let failure: string | undefined;
  let kept = Infinity;
  let allEnded!: () => void;
  const done = new Promise<void>((resolve) => (allEnded = resolve));
  const gate = { since: Infinity };
  const t0 = performance.now();
  const { opened, abandoned } = await openMany(a.target, agent, a.count, a.concurrency, a.rampLimitMs, streamRequestBody(a.intervalMs, 3_600_000), delays, gate, (s) => {
    if (s.failed) failure ??= s.failed;
    if (++ended === kept) allEnded();
  });
  kept = opened.length;
  if (ended === kept) allEnded();
  const openMs = performance.now() - t0;
  // The abandoned streams were destroyed just now: their teardown in the proxy and the upstream
  // must not fall into the measured window, which starts when this returns.
  if (abandoned > 0) await new Promise((res) => setTimeout(res, ABANDON_SETTLE_MS));
  gate.since = monoUs();
  streaming = { target: a.target, agent, all: opened, delays, done, failure: () => failure };
  if (failure) {
    streamsAbort();
    throw new BenchError(`${a.target.name} streams: ${failure}`);
  }
  return { openMs, opened: opened.length, abandoned };
}

/** Chunks received so far by the streams of streamsStart. */
function streamsProgress(): number {
  return (streaming?.all ?? []).reduce((n, s) => n + s.chunks, 0);
}

/** Destroys the streams of streamsStart (after a failure); the upstream is told separately. */
function streamsAbort(): void {
  for (const s of streaming?.all ?? []) s.req.destroy();
  streaming?.agent.destroy();
  streaming = undefined;
}

async function streamsFinish(a: { timeoutMs: number }): Promise<{ delays: Float64Array; chunks: number }> {
  const st = streaming;
  if (!st) throw new BenchError('streamsFinish without streamsStart');
  streaming = undefined;
  let timedOut = false;
  const guard = setTimeout(() => {
    timedOut = true;
    for (const s of st.all) s.req.destroy();
  }, a.timeoutMs);
  await st.done;
  clearTimeout(guard);
  st.agent.destroy();
  const failure = timedOut ? `streams still open ${a.timeoutMs} ms after the upstream ended them` : st.failure();
  if (failure) throw new BenchError(`${st.target.name} streams: ${failure}`);
  return { delays: st.delays.values(), chunks: st.all.reduce((n, s) => n + s.chunks, 0) };
}

let held: { agent: AnyAgent; all: StreamState[]; failures: string[] } | undefined;

/** Opens `count` long streams (a chunk every intervalMs) and keeps them open until closeStreams. */
async function openStreams(a: { target: Target; count: number; intervalMs: number; concurrency: number; rampLimitMs: number }): Promise<{ openMs: number; opened: number; abandoned: number }> {
  const agent = makeAgent(a.target, false);
  const failures: string[] = [];
  const t0 = performance.now();
  const { opened, abandoned } = await openMany(a.target, agent, a.count, a.concurrency, a.rampLimitMs, streamRequestBody(a.intervalMs, 3_600_000), undefined, { since: Infinity }, (s) => void (s.failed && failures.push(s.failed)));
  held = { agent, all: opened, failures };
  if (failures.length) {
    closeStreams();
    throw new BenchError(`${a.target.name} open streams: ${failures.length} failed, e.g. ${failures[0]}`);
  }
  return { openMs: performance.now() - t0, opened: opened.length, abandoned };
}
function streamsStatus(): { open: number; minChunks: number; chunks: number; failures: number } {
  const all = held?.all ?? [];
  let min = Infinity;
  let chunks = 0;
  for (const s of all) {
    min = Math.min(min, s.chunks);
    chunks += s.chunks;
  }
  return { open: all.filter((s) => !s.req.destroyed).length, minChunks: all.length ? min : 0, chunks, failures: held?.failures.length ?? 0 };
}
function closeStreams(): void {
  for (const s of held?.all ?? []) s.req.destroy();
  held?.agent.destroy();
  held = undefined;
}

serve({ upload, closedLoop, sequential, openLoop, streamsStart, streamsProgress, streamsFinish, streamsAbort, openStreams, streamsStatus, closeStreams, closeBenchSockets });
