// The fault matrix: every way an upstream or a client can fail mid-exchange, injected against
// the built bundle on both listeners (git proxy in front of the recording upstream, model
// gateway relaying a stream). Upstream faults: connection refused, reset before the head,
// reset mid-body, no answer (response timeout), stall mid-body (idle timeout), malformed HTTP
// from a raw TLS server. Client faults: an abandoned upload, leaving before the upstream
// answered (the upstream keeps the leg alive with 102s, so only the proxy's close handling can
// end it), leaving mid-download. Each fault is injected REPS times at once; for each attempt:
//   (a) what the client gets: a complete 502/504 while nothing had been sent, a broken
//       connection (never a clean end) once the response began;
//   (b) the upstream side saw its connection closed (event-driven: a 'close' listener);
//   (c) the access log line names the failure kind and the status;
// then, for the fault as a whole:
//   (d) the counter that operators alert on went up by exactly REPS;
//   (e) nothing leaked: the proxy's open descriptors and its client-connection gauge return to
//       what they were before. Upstream keep-alive pools are made equal on both sides of the
//       comparison by one successful warm-up request per pool (the pools hold at most one idle
//       socket each: every faulty exchange destroys its socket), so a single descriptor left
//       behind per fault shows up as a difference of REPS.
// Upstream timeouts are short so the matrix stays fast; retries are off so that no fault is
// hidden by a second attempt (gateway.test.ts shows that a reset before the head IS retried).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { request, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createServer as createTlsServer, type Server as TlsServer, type TLSSocket } from 'node:tls';
import { startBothListeners, type BothListeners } from '../support/both-listeners.ts';
import { eventually } from '../support/eventually.ts';
import { send } from '../support/http-client.ts';
import { chunk, sseEvent, type ModelUpstream } from '../support/model-upstream.ts';
import { parseExposition, sumOf, type Sample } from '../support/prometheus.ts';
import { startProxy, type LogRecord, type ProxyProcess } from '../support/proxy-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import type { TestUpstream } from '../support/upstream.ts';

const REPS = 5;
const MODEL = 'gpt-test';
// The response and idle timeouts are what some faults test, so they are short; the connect
// timeout is not (no fault here is a slow connect: a closed port is refused at once), so it keeps
// a margin that a loaded machine's TLS handshake cannot use up (at 300 ms it did, and a fault
// that answers at once was recorded 504). The proxies that only meet faults answering at once
// get long timeouts of every kind.
const FAULT_ARGS = [
  '--upstream-connect-timeout', '10s',
  '--upstream-response-timeout', '800ms',
  '--upstream-idle-timeout', '800ms',
  '--upstream-max-retries', '0',
];
const PROMPT_FAULT_ARGS = ['--upstream-connect-timeout', '10s', '--upstream-response-timeout', '10s', '--upstream-idle-timeout', '10s', '--upstream-max-retries', '0'];

let pki: TestPki;
let dir: string;
let gitUp: TestUpstream;
let modelUp: ModelUpstream;
let garbage: TlsServer;
let garbageReply = '';
const garbageSockets = new Set<TLSSocket>();
const garbageHeads: string[] = [];
let refusedKey: string;
let garbageKey: string;
/** git listener (gitUp, a closed port, the garbage server) and model gateway (modelUp). */
let proxy: ProxyProcess;
let both: BothListeners<TestUpstream> | undefined;
/** Model gateways whose only upstream refuses connections, or answers garbage. */
let gwRefused: ProxyProcess;
let gwGarbage: ProxyProcess;

// ---------------------------------------------------------------------------------------------
// Attempt ids and upstream-side signals

let seq = 0;
/** A unique id per attempt: in the git repository path, or the gateway's X-Client-Request-Id. */
const newId = () => `fx${++seq}-${randomBytes(3).toString('hex')}`;
const idIn = (text: string | undefined) => /fx\d+-[0-9a-f]{6}/.exec(text ?? '')?.[0] ?? 'no-id';

/** One-shot signals keyed by attempt id, which may fire before anyone waits for them. */
class Latches {
  private readonly m = new Map<string, { promise: Promise<void>; resolve: () => void }>();
  private entry(key: string) {
    let e = this.m.get(key);
    if (!e) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      e = { promise, resolve };
      this.m.set(key, e);
    }
    return e;
  }
  fire(key: string): void {
    this.entry(key).resolve();
  }
  wait(key: string): Promise<void> {
    return this.entry(key).promise;
  }
}
/** The upstream's socket of attempt <id> closed. */
const upstreamClosed = new Latches();
/** The upstream received the first bytes of attempt <id>'s request body. */
const bodyArrived = new Latches();
/** The upstream's request handler runs for attempt <id> (git: head received; model: whole body). */
const requestArrived = new Latches();

/** Guards an event-driven wait so that a missing event fails the test instead of hanging it. */
async function within<T>(p: Promise<T>, what: string, ms = 5000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`gave up after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([p, guard]);
  } finally {
    clearTimeout(timer);
  }
}

function listenTcp(server: { listen(port: number, host: string, cb: () => void): unknown; address(): unknown }): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

before(async () => {
  pki = makeTestPki();

  // Port 1: nothing listens there, and no listener on port 0 is ever given it (the ephemeral
  // range starts far above), unlike a port closed after use, which another test running at the
  // same time may be given ('other' instead of connect_refused, seen once).
  refusedKey = '127.0.0.1:1';

  // Speaks TLS, then answers any request head with garbage and keeps the socket open: only the
  // proxy can close it.
  garbage = createTlsServer({ key: pki.keyPem, cert: pki.certPem }, (socket) => {
    garbageSockets.add(socket);
    let head = '';
    socket.on('data', (c: Buffer) => {
      if (head.includes('\r\n\r\n')) return;
      head += c.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      garbageHeads.push(head);
      socket.once('close', () => upstreamClosed.fire(idIn(head)));
      socket.write(garbageReply);
    });
    socket.on('error', () => {});
    socket.once('close', () => garbageSockets.delete(socket));
  });
  garbageKey = `127.0.0.1:${await listenTcp(garbage)}`;

  dir = mkdtempSync(join(tmpdir(), 'faults-test-'));
  const hostsFile = join(dir, 'hosts.json');
  writeFileSync(hostsFile, JSON.stringify({ hosts: [refusedKey, garbageKey].map((host) => ({ host, auth: 'bearer', tokenEnv: 'OTHER_TOKEN' })) }));
  const gatewayEnv = (baseUrl: string) => ({
    UPSTREAM_BASE_URL: baseUrl,
    UPSTREAM_API_KEY: `sk-faults-${randomBytes(8).toString('hex')}`,
    UPSTREAM_ALLOWED_MODELS: MODEL,
    UPSTREAM_CA_FILE: pki.caFile,
  });
  const gatewayOnly = (baseUrl: string) =>
    startProxy({ env: gatewayEnv(baseUrl), args: ['--model-gateway-listen', '127.0.0.1:0', ...PROMPT_FAULT_ARGS], listeners: ['model'] });
  [both, gwRefused, gwGarbage] = await Promise.all([
    startBothListeners({
      pki,
      env: { OTHER_TOKEN: `tok_${randomBytes(8).toString('hex')}`, UPSTREAM_API_KEY: `sk-faults-${randomBytes(8).toString('hex')}` },
      args: ['--git-hosts', hostsFile, ...FAULT_ARGS],
      bundle: true, // its descriptors are counted (footprint)
    }),
    gatewayOnly(`https://${refusedKey}/v1`),
    gatewayOnly(`https://${garbageKey}/v1`),
  ]);
  ({ gitUpstream: gitUp, modelUpstream: modelUp, proxy } = both);
});

after(async () => {
  const exits = await Promise.all([both?.close(), ...[gwRefused, gwGarbage].map((p) => p?.stop())]);
  for (const s of garbageSockets) s.destroy();
  garbage?.close();
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
  for (const e of exits) assert.equal(e?.code, 0, 'each proxy exits 0 on SIGTERM after the faults');
});

// ---------------------------------------------------------------------------------------------
// Clients

type Outcome = 'clean end' | 'broken' | 'client left';
interface ClientResult {
  /** 0 when no response head arrived. */
  status: number;
  outcome: Outcome;
  body: string;
}

interface ExchangeOptions {
  headers?: OutgoingHttpHeaders;
  body?: string;
  /** Destroy the connection once the first body chunk arrived. */
  leaveAfterFirstChunk?: boolean;
  /** Destroy the connection when this resolves (e.g. the upstream has the request). */
  leaveWhen?: Promise<void>;
}

/** One request on a fresh connection (agent: false), optionally given up half-way. */
function exchange(port: number, method: string, path: string, opts: ExchangeOptions = {}): Promise<ClientResult> {
  return new Promise((resolve) => {
    let status = 0;
    let body = '';
    let settled = false;
    const done = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      resolve({ status, outcome, body });
    };
    const req = request({ host: '127.0.0.1', port, method, path, headers: opts.headers, agent: false }, (res) => {
      status = res.statusCode ?? 0;
      res.setEncoding('latin1');
      res.on('data', (s: string) => {
        body += s;
        if (opts.leaveAfterFirstChunk) {
          req.destroy();
          done('client left');
        }
      });
      res.on('end', () => done('clean end'));
      res.on('error', () => done('broken'));
      res.on('close', () => done(res.complete ? 'clean end' : 'broken'));
    });
    req.on('error', () => done('broken'));
    req.end(opts.body);
    void opts.leaveWhen?.then(() => {
      req.destroy();
      done('client left');
    });
  });
}

/**
 * Starts an upload that announces 10 MiB, sends 64 KiB, waits until `ready`, then destroys
 * the connection. `ready` is 'continue' (the server answered Expect: 100-continue, so its
 * request handler runs) or a promise (e.g. the upstream has the first bytes).
 */
async function abandonUpload(port: number, path: string, headers: OutgoingHttpHeaders, ready: 'continue' | Promise<void>): Promise<ClientResult> {
  let status = 0;
  const req = request({
    host: '127.0.0.1',
    port,
    method: 'POST',
    path,
    agent: false,
    headers: { ...headers, 'content-length': String(10 << 20), ...(ready === 'continue' ? { expect: '100-continue' } : {}) },
  });
  req.on('response', (res) => {
    status = res.statusCode ?? 0;
    res.resume();
  });
  req.on('error', () => {});
  if (ready === 'continue') {
    req.flushHeaders();
    await within(new Promise((r) => req.once('continue', r)), 'the 100 Continue');
  }
  await new Promise<void>((r) => req.write(Buffer.alloc(64 << 10, 0x30), () => r()));
  if (ready !== 'continue') await within(ready, 'the upstream to receive the first body bytes');
  req.destroy();
  return { status, outcome: 'client left', body: '' };
}

const INFO = 'info/refs?service=git-upload-pack';
const gitPath = (host: string, id: string, route: 'info-refs' | 'upload-pack' | 'receive-pack') =>
  `/${host}/fault/${id}.git/${route === 'info-refs' ? INFO : `git-${route}`}`;

const gitInfoRefs = (host: string, opts: (id: string) => ExchangeOptions = () => ({})) => (id: string) =>
  exchange(proxy.ports.git!, 'GET', gitPath(host, id, 'info-refs'), opts(id));
const gitUploadPack = (opts: { leaveAfterFirstChunk?: boolean } = {}) => (id: string) =>
  exchange(proxy.ports.git!, 'POST', gitPath(gitUp.hostKey, id, 'upload-pack'), {
    body: '0000',
    headers: { 'content-type': 'application/x-git-upload-pack-request' },
    ...opts,
  });

const CHAT_STREAM = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } });
const CHAT_PLAIN = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'think hard' }] });
const chat = (gw: () => ProxyProcess, body: string, opts: (id: string) => ExchangeOptions = () => ({})) => (id: string) =>
  exchange(gw().ports.model!, 'POST', '/v1/chat/completions', {
    body,
    headers: { 'content-type': 'application/json', 'x-client-request-id': id, 'x-instance-id': id },
    ...opts(id),
  });
const chatStream = (gw: () => ProxyProcess, opts: ExchangeOptions = {}) => chat(gw, CHAT_STREAM, () => opts);

// ---------------------------------------------------------------------------------------------
// Upstream behaviours, shared by the git upstream (attempt id in the URL) and the model
// upstream (attempt id in X-Client-Request-Id). Each first watches its socket for the close.

type Behaviour = (req: IncomingMessage, res: ServerResponse, id: string) => void;

const GIT_RESULT = { 'content-type': 'application/x-git-upload-pack-result' };
const SSE = { 'content-type': 'text/event-stream' };
const GIT_FIRST = `0008NAK\n${'a'.repeat(1000)}`;
const SSE_FIRST = sseEvent(chunk(MODEL, { role: 'assistant', content: 'partial' }));

const resetBeforeHead: Behaviour = (req) => req.socket.destroy();
const resetMidBody = (head: Record<string, string>, first: string): Behaviour => (req, res) => {
  res.writeHead(200, head);
  res.write(first, () => req.socket.destroy());
};
const stallBeforeHead: Behaviour = (req) => void req.resume();
const stallMidBody = (head: Record<string, string>, first: string): Behaviour => (req, res) => {
  req.resume();
  res.writeHead(200, head);
  res.write(first);
};
/** Keeps the body moving (so no idle timeout can fire) until the proxy closes the connection. */
const dripForever = (head: Record<string, string>, first: string, drip: string): Behaviour => (req, res) => {
  req.resume();
  res.writeHead(200, head);
  res.write(first);
  const timer = setInterval(() => res.write(drip), 100);
  req.socket.once('close', () => clearInterval(timer));
};
/**
 * Still preparing its answer: no response head, but a 102 Processing every 100 ms keeps bytes
 * moving, so the response timeout never fires and only the client's departure can end it.
 */
const thinkForever: Behaviour = (req, res) => {
  req.resume();
  const timer = setInterval(() => res.writeProcessing(), 100);
  req.socket.once('close', () => clearInterval(timer));
};
const swallowUpload: Behaviour = (req, _res, id) => {
  req.once('data', () => bodyArrived.fire(id));
  req.resume();
};

function onGitUpstream(b: Behaviour): () => void {
  return () =>
    gitUp.handle((req, res) => {
      const id = idIn(req.url);
      req.socket.once('close', () => upstreamClosed.fire(id));
      requestArrived.fire(id);
      b(req, res, id);
    });
}

function onModelUpstream(b: Behaviour): () => void {
  const h = (req: IncomingMessage, res: ServerResponse) => {
    const id = idIn(String(req.headers['x-client-request-id']));
    req.socket.once('close', () => upstreamClosed.fire(id));
    requestArrived.fire(id);
    b(req, res, id);
  };
  return () => modelUp.script(...Array<typeof h>(REPS).fill(h));
}

const answeringGarbage = (reply: string) => () => void (garbageReply = reply);

/** Did any upstream see a request of this attempt? */
const upstreamSaw = (id: string) =>
  gitUp.requests.some((r) => r.url.includes(id)) || modelUp.requests.some((r) => r.headers['x-client-request-id'] === id) || garbageHeads.some((h) => h.includes(id));

// ---------------------------------------------------------------------------------------------
// Measurements

async function scrape(p: ProxyProcess): Promise<Sample[]> {
  const r = await send(p.ports.metrics!, 'GET', '/metrics');
  assert.equal(r.status, 200);
  return parseExposition(r.body.toString());
}

interface Footprint {
  fds: number;
  connections: number;
}

async function footprint(p: ProxyProcess): Promise<Footprint> {
  // Descriptors first: the scrape below opens a connection of its own.
  const fds = readdirSync(`/proc/${p.pid}/fd`).length;
  const connections = sumOf(await scrape(p), 'proxy_active_connections');
  return { fds, connections };
}

/** What the descriptors are, for a failure message: `socket` 12, `anon_inode` 3, ... */
function describeFds(pid: number): string {
  const kinds = new Map<string, number>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target = 'gone';
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`).replace(/[:[].*$/, '');
    } catch {
      // closed while we looked
    }
    kinds.set(target, (kinds.get(target) ?? 0) + 1);
  }
  return [...kinds].map(([k, n]) => `${k} ${n}`).join(', ');
}

/** The proxy at rest: no client connection open, the descriptor count the same twice in a row. Bounded by the test's timeout (`signal`; see eventually). */
async function atRest(p: ProxyProcess, signal: AbortSignal): Promise<Footprint> {
  let previous: Footprint | undefined;
  let now: Footprint | undefined;
  const resting = async () => {
    previous = now;
    now = await footprint(p);
    return now.connections === 0 && previous?.fds === now.fds;
  };
  await eventually('the proxy at rest', resting, signal, 50, () => `${JSON.stringify(now)} (${describeFds(p.pid)})`);
  return now!;
}

/** Polls, bounded by the test's timeout (`signal`; see eventually), until the footprint is back at `before`; only the eventual value is asserted. */
async function assertSettlesTo(p: ProxyProcess, before: Footprint, signal: AbortSignal): Promise<void> {
  let now!: Footprint;
  try {
    await eventually('the footprint back where it was', async () => {
      now = await footprint(p);
      return now.fds === before.fds && now.connections === before.connections;
    }, signal, 50);
  } catch {
    // the assertion below says what differs
  }
  assert.deepEqual(now, before, `after ${REPS} faults the proxy holds ${now.fds - before.fds} more descriptors and ${now.connections - before.connections} more client connections (${describeFds(p.pid)})`);
}

/** One successful exchange per upstream pool of the process, so that each pool holds one idle socket. */
async function warmUp(p: ProxyProcess): Promise<void> {
  const once = async (what: string, run: () => Promise<number>) => {
    // A pooled socket that the upstream's keep-alive timer closes at the very moment it is
    // reused is the classic keep-alive race, not a fault under test: one more try.
    const status = await run();
    if (status !== 200) assert.equal(await run(), 200, `warm-up ${what}`);
  };
  if (p.ports.git) await once('git', async () => (await send(p.ports.git!, 'GET', `/${gitUp.hostKey}/warm/up.git/${INFO}`)).status);
  if (p === proxy) {
    const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'warm' }] });
    await once('model', async () => (await send(p.ports.model!, 'POST', '/v1/chat/completions', { body, headers: { 'content-type': 'application/json' } })).status);
  } else {
    await once('model', async () => (await send(p.ports.model!, 'GET', '/v1/models')).status);
  }
}

// ---------------------------------------------------------------------------------------------
// The matrix

type ClientSees = { status: 502 | 504; message: RegExp } | 'broken' | 'client left';
type Counter = [name: string, labels: Record<string, string>];

interface Fault {
  name: string;
  proxy: () => ProxyProcess;
  listener: 'git' | 'model';
  /** Installs the upstream behaviour for the REPS attempts. */
  arrange?: () => void;
  attempt: (id: string) => Promise<ClientResult>;
  client: ClientSees;
  /** 'closed': the upstream's socket was closed (b); 'never reached': no upstream saw the request. */
  upstream: 'closed' | 'never reached';
  log: { status: number; error: string; interrupted?: string | null };
  /** Goes up by exactly REPS. */
  counter: () => Counter;
  /** Must not move (e.g. a client abort is no upstream error). */
  unchanged?: () => Counter;
}

const UNREACHABLE = { status: 502 as const, message: /the upstream could not be reached/ };
const MALFORMED = { status: 502 as const, message: /the upstream sent a malformed HTTP response/ };
const TOO_SLOW = { status: 504 as const, message: /the upstream did not answer in time/ };

const gitErrors = (host: () => string, kind: string) => (): Counter => ['git_proxy_upstream_errors_total', { host: host(), kind }];
const gitUpHost = () => gitUp.hostKey;
const gwRequests = (status: string, model = MODEL) => (): Counter => ['model_gateway_requests_total', { model, status }];
const gwInterruptions = (reason: string) => (): Counter => ['model_gateway_stream_interruptions_total', { model: MODEL, reason }];

const FAULTS: Fault[] = [
  // ------------------------------------------------------------------ git proxy, upstream side
  {
    name: 'git: an upstream that refuses connections gets 502, logged connect_refused',
    proxy: () => proxy,
    listener: 'git',
    attempt: (id) => gitInfoRefs(refusedKey)(id),
    client: UNREACHABLE,
    upstream: 'never reached',
    log: { status: 502, error: 'connect_refused' },
    counter: gitErrors(() => refusedKey, 'connect_refused'),
  },
  {
    name: 'git: an upstream that resets before the response head gets 502, logged reset',
    proxy: () => proxy,
    listener: 'git',
    arrange: onGitUpstream(resetBeforeHead),
    attempt: gitUploadPack(),
    client: UNREACHABLE,
    upstream: 'closed',
    log: { status: 502, error: 'reset' },
    counter: gitErrors(gitUpHost, 'reset'),
  },
  {
    name: 'git: an upstream that resets mid-body breaks the client connection, logged reset',
    proxy: () => proxy,
    listener: 'git',
    arrange: onGitUpstream(resetMidBody(GIT_RESULT, GIT_FIRST)),
    attempt: gitUploadPack(),
    client: 'broken',
    upstream: 'closed',
    log: { status: 200, error: 'reset' },
    counter: gitErrors(gitUpHost, 'reset'),
  },
  {
    name: 'git: an upstream that never answers gets 504 and its connection closed, logged response_timeout',
    proxy: () => proxy,
    listener: 'git',
    arrange: onGitUpstream(stallBeforeHead),
    attempt: gitUploadPack(),
    client: TOO_SLOW,
    upstream: 'closed',
    log: { status: 504, error: 'response_timeout' },
    counter: gitErrors(gitUpHost, 'response_timeout'),
  },
  {
    name: 'git: an upstream that stalls mid-body is cut: broken client connection, logged idle_timeout',
    proxy: () => proxy,
    listener: 'git',
    arrange: onGitUpstream(stallMidBody(GIT_RESULT, GIT_FIRST)),
    attempt: gitUploadPack(),
    client: 'broken',
    upstream: 'closed',
    log: { status: 200, error: 'idle_timeout' },
    counter: gitErrors(gitUpHost, 'idle_timeout'),
  },
  {
    name: 'git: an upstream answering an invalid status line gets 502 upstream_protocol, logged protocol',
    proxy: () => proxy,
    listener: 'git',
    arrange: answeringGarbage('HTTP/1.1 abc\r\n\r\n'),
    attempt: (id) => gitInfoRefs(garbageKey)(id),
    client: MALFORMED,
    upstream: 'closed',
    log: { status: 502, error: 'protocol' },
    counter: gitErrors(() => garbageKey, 'protocol'),
  },
  {
    name: 'git: an upstream answering something that is not HTTP gets 502 upstream_protocol, logged protocol',
    proxy: () => proxy,
    listener: 'git',
    arrange: answeringGarbage('NOT HTTP\r\n\r\n'),
    attempt: (id) => gitInfoRefs(garbageKey)(id),
    client: MALFORMED,
    upstream: 'closed',
    log: { status: 502, error: 'protocol' },
    counter: gitErrors(() => garbageKey, 'protocol'),
  },
  // ------------------------------------------------------------------ git proxy, client side
  {
    name: 'git: a client that abandons a push mid-upload has the upstream upload closed, logged client_aborted with status 0',
    proxy: () => proxy,
    listener: 'git',
    arrange: onGitUpstream(swallowUpload),
    attempt: (id) =>
      abandonUpload(proxy.ports.git!, gitPath(gitUp.hostKey, id, 'receive-pack'), { 'content-type': 'application/x-git-receive-pack-request' }, bodyArrived.wait(id)),
    client: 'client left',
    upstream: 'closed',
    log: { status: 0, error: 'client_aborted' },
    counter: () => ['git_proxy_requests_total', { host: gitUp.hostKey, route: 'receive-pack', status: '0' }],
    unchanged: () => ['git_proxy_upstream_errors_total', { host: gitUp.hostKey }],
  },
  {
    // No request body and no response yet: only the proxy's close handler can end the upstream leg.
    name: 'git: a client that leaves before the upstream answered has the upstream request closed, logged client_aborted with status 0',
    proxy: () => proxy,
    listener: 'git',
    arrange: onGitUpstream(thinkForever),
    attempt: (id) => gitInfoRefs(gitUp.hostKey, (i) => ({ leaveWhen: requestArrived.wait(i) }))(id),
    client: 'client left',
    upstream: 'closed',
    log: { status: 0, error: 'client_aborted' },
    counter: () => ['git_proxy_requests_total', { host: gitUp.hostKey, route: 'info-refs', status: '0' }],
    unchanged: () => ['git_proxy_upstream_errors_total', { host: gitUp.hostKey }],
  },
  {
    name: 'git: a client that leaves mid-download has the upstream response closed, logged client_aborted',
    proxy: () => proxy,
    listener: 'git',
    arrange: onGitUpstream(dripForever(GIT_RESULT, GIT_FIRST, '0005a')),
    attempt: gitUploadPack({ leaveAfterFirstChunk: true }),
    client: 'client left',
    upstream: 'closed',
    log: { status: 200, error: 'client_aborted' },
    counter: () => ['git_proxy_requests_total', { host: gitUp.hostKey, route: 'upload-pack', status: '200' }],
    unchanged: () => ['git_proxy_upstream_errors_total', { host: gitUp.hostKey }],
  },
  // ------------------------------------------------------------------ model gateway, upstream side
  // A failure before the response head is a complete 502/504, not a stream interruption, even
  // when the request asked for a stream: `interrupted` is null and the status counter rises.
  {
    name: 'model: an upstream that refuses connections gets 502, logged connect_refused',
    proxy: () => gwRefused,
    listener: 'model',
    attempt: chatStream(() => gwRefused),
    client: UNREACHABLE,
    upstream: 'never reached',
    log: { status: 502, interrupted: null, error: 'connect_refused' },
    counter: gwRequests('502'),
  },
  {
    name: 'model: an upstream that resets before the response head gets 502 (retries off), logged reset',
    proxy: () => proxy,
    listener: 'model',
    arrange: onModelUpstream(resetBeforeHead),
    attempt: chatStream(() => proxy),
    client: UNREACHABLE,
    upstream: 'closed',
    log: { status: 502, interrupted: null, error: 'reset' },
    counter: gwRequests('502'),
  },
  {
    name: 'model: an upstream that resets mid-stream breaks the client stream, logged reset, interrupted upstream',
    proxy: () => proxy,
    listener: 'model',
    arrange: onModelUpstream(resetMidBody(SSE, SSE_FIRST)),
    attempt: chatStream(() => proxy),
    client: 'broken',
    upstream: 'closed',
    log: { status: 200, error: 'reset', interrupted: 'upstream' },
    counter: gwInterruptions('upstream'),
  },
  {
    name: 'model: an upstream that never answers gets 504 and its connection closed, logged response_timeout',
    proxy: () => proxy,
    listener: 'model',
    arrange: onModelUpstream(stallBeforeHead),
    attempt: chatStream(() => proxy),
    client: TOO_SLOW,
    upstream: 'closed',
    log: { status: 504, interrupted: null, error: 'response_timeout' },
    counter: gwRequests('504'),
  },
  {
    name: 'model: an upstream that stalls mid-stream is cut: broken client stream, logged idle_timeout, interrupted idle_timeout',
    proxy: () => proxy,
    listener: 'model',
    arrange: onModelUpstream(stallMidBody(SSE, SSE_FIRST)),
    attempt: chatStream(() => proxy),
    client: 'broken',
    upstream: 'closed',
    log: { status: 200, error: 'idle_timeout', interrupted: 'idle_timeout' },
    counter: gwInterruptions('idle_timeout'),
  },
  {
    name: 'model: an upstream answering an invalid status line gets 502 upstream_protocol, logged protocol',
    proxy: () => gwGarbage,
    listener: 'model',
    arrange: answeringGarbage('HTTP/1.1 abc\r\n\r\n'),
    attempt: chatStream(() => gwGarbage),
    client: MALFORMED,
    upstream: 'closed',
    log: { status: 502, interrupted: null, error: 'protocol' },
    counter: gwRequests('502'),
  },
  {
    name: 'model: an upstream answering something that is not HTTP gets 502 upstream_protocol, logged protocol',
    proxy: () => gwGarbage,
    listener: 'model',
    arrange: answeringGarbage('NOT HTTP\r\n\r\n'),
    attempt: chatStream(() => gwGarbage),
    client: MALFORMED,
    upstream: 'closed',
    log: { status: 502, interrupted: null, error: 'protocol' },
    counter: gwRequests('502'),
  },
  // ------------------------------------------------------------------ model gateway, client side
  {
    name: 'model: a client that abandons its request body is logged client_aborted with status 0 and never forwarded',
    proxy: () => proxy,
    listener: 'model',
    attempt: (id) => abandonUpload(proxy.ports.model!, '/v1/chat/completions', { 'content-type': 'application/json', 'x-client-request-id': id, 'x-instance-id': id }, 'continue'),
    client: 'client left',
    upstream: 'never reached',
    // The body never arrived, so neither did the model name: the series is model="none".
    log: { status: 0, error: 'client_aborted', interrupted: null },
    counter: gwRequests('0', 'none'),
  },
  {
    name: 'model: a client that leaves while the upstream is still thinking has the upstream request closed, logged client_aborted with status 0, interrupted client (as a stream cut by its client is)',
    proxy: () => proxy,
    listener: 'model',
    arrange: onModelUpstream(thinkForever),
    attempt: chat(() => proxy, CHAT_PLAIN, (id) => ({ leaveWhen: requestArrived.wait(id) })),
    client: 'client left',
    upstream: 'closed',
    log: { status: 0, error: 'client_aborted', interrupted: 'client' },
    counter: gwRequests('0'),
  },
  {
    name: 'model: a client that leaves mid-stream has the upstream stream closed, logged client_aborted, interrupted client',
    proxy: () => proxy,
    listener: 'model',
    arrange: onModelUpstream(dripForever(SSE, SSE_FIRST, ': still here\n\n')),
    attempt: chatStream(() => proxy, { leaveAfterFirstChunk: true }),
    client: 'client left',
    upstream: 'closed',
    log: { status: 200, error: 'client_aborted', interrupted: 'client' },
    counter: gwInterruptions('client'),
    unchanged: gwInterruptions('upstream'),
  },
];

function recordOf(p: ProxyProcess, f: Fault, id: string): Promise<LogRecord> {
  const match =
    f.listener === 'git'
      ? (r: LogRecord) => r.event === 'request' && r.listener === 'git' && String(r.path).includes(id)
      : // The identity headers are read first: even a request given up before its body is theirs.
        (r: LogRecord) => r.event === 'request' && r.listener === 'model' && r.instance_id === id;
  return within(p.waitForRecord(match, `the access log line of ${id}`), `the access log line of ${id}`);
}

async function oneAttempt(f: Fault, p: ProxyProcess, id: string): Promise<void> {
  const where = `${f.name} [${id}]`;
  const got = await within(f.attempt(id), `${where}: the client exchange to finish`, 10_000);

  // (a) what the client got
  if (typeof f.client === 'object') {
    assert.equal(got.status, f.client.status, `${where}: status`);
    assert.equal(got.outcome, 'clean end', `${where}: a proxy-made error is a complete response`);
    if (f.listener === 'model') {
      assert.match(JSON.parse(got.body).error.message as string, f.client.message, where);
    } else {
      assert.match(got.body, f.client.message, where);
    }
  } else if (f.client === 'broken') {
    assert.equal(got.status, 200, `${where}: the response had begun`);
    assert.equal(got.outcome, 'broken', `${where}: a truncated body must never look like a clean end`);
  } else {
    assert.equal(got.outcome, 'client left', where);
  }

  // (b) the upstream side
  if (f.upstream === 'closed') {
    await within(upstreamClosed.wait(id), `${where}: the upstream connection to close`);
  }

  // (c) the access log line
  const rec = await recordOf(p, f, id);
  assert.equal(rec.status, f.log.status, `${where}: logged status`);
  assert.equal(rec.error, f.log.error, `${where}: logged error`);
  if (f.log.interrupted !== undefined) assert.equal(rec.interrupted ?? null, f.log.interrupted, `${where}: logged interruption`);
  if (f.listener === 'model' && f.log.status === 200) assert.equal(rec.usage_complete, false, `${where}: usage is incomplete`);

  if (f.upstream === 'never reached') assert.equal(upstreamSaw(id), false, `${where}: no upstream saw the request`);
}

for (const f of FAULTS) {
  test(f.name, async (t) => {
    const p = f.proxy();
    await warmUp(p);
    const before = await atRest(p, t.signal);
    const samples = await scrape(p);
    const [name, labels] = f.counter();
    const counted = sumOf(samples, name, labels);
    const [stillName, stillLabels] = f.unchanged?.() ?? ['', {}];
    const still = f.unchanged ? sumOf(samples, stillName, stillLabels) : 0;

    try {
      f.arrange?.();
      await Promise.all(Array.from({ length: REPS }, () => oneAttempt(f, p, newId())));
    } finally {
      gitUp.handle(undefined);
    }

    // (d) the metrics say so
    const after = await scrape(p);
    assert.equal(sumOf(after, name, labels) - counted, REPS, `${name}${JSON.stringify(labels)} counts each of the ${REPS} faults`);
    if (f.unchanged) assert.equal(sumOf(after, stillName, stillLabels), still, `${stillName}${JSON.stringify(stillLabels)} does not move`);

    // (e) nothing leaked: same pools (one warm-up each), same descriptors, no client connection
    await warmUp(p);
    await assertSettlesTo(p, before, t.signal);
  });
}
