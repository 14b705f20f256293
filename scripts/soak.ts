// `npm run soak`: minutes of mixed traffic against the BUILT bundle (dist/proxy.js), watching
// whether its resident memory and open descriptors stay flat and whether anything fails that
// should not. Everything runs on loopback:
//
//   - a real HTTPS git server (git http-backend behind a throwaway CA, demanding a bearer token)
//     with a few repositories, each seeded with an incompressible 2 MiB blob so clones move a
//     real pack;
//   - a fake OpenAI-compatible upstream that streams paced chunks, answers plain completions, and
//     on the client's request misbehaves: resets before the head, 429 (retried by the gateway, or
//     not), 500, a stalled head, a stream cut or stalled midway, a plain body cut midway;
//   - the proxy bundle with both listeners and the metrics listener, short upstream timeouts so
//     that stalls resolve in seconds;
//   - clients: real `git clone` + commit + `git push` loops, HTTP-level ref discovery, streamed
//     and plain chat completions from a few dozen workers, and clients that abort midway
//     (mid-stream, mid-upload, while the gateway waits to retry).
//
// The CLIENT picks each fault (it is written into the request's message), so the client knows
// what the outcome must be: every result is either a success, an expected fault outcome, or an
// UNEXPECTED failure (counted, the first ones kept with details).
//
// Every 15 s the proxy's VmRSS, /proc/<pid>/fd count and /metrics are sampled; one line is
// printed after warm-up and at each minute. At warm-up and at the end, traffic is paused until
// nothing is in flight and keep-alive connections have closed ("quiet" samples): those are the
// fair comparison for descriptors, which under load depend on how many requests happen to be in
// flight. The verdict (PASS/FAIL, exit 1 on FAIL) and all samples go to bench-results/soak.json.
//
// Environment: SOAK_MINUTES (default 10; fractions allowed, e.g. 0.5), SOAK_MODEL_WORKERS
// (default 24), SOAK_GIT_WORKERS (default 3), SOAK_REFS_WORKERS (default 2); SOAK_DEBUG=1 times
// each cleanup step. SOAK_QUICK=1 (what .ci/run uses): fewer workers, a 5 s warm-up, at least
// 10 s of traffic after the quiet baseline, a sample every 5 s. It judges correctness (every outcome, the counts the log and
// the metrics give) and the quiet descriptors; memory is told, not judged (its baseline falls
// while the heap still grows), and it is too short for a trend.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { Agent, get, request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { gitEnv, makeGitHome } from '../test/support/git-client.ts';
import { startGitServer, type GitServer } from '../test/support/git-server.ts';
import { chunk, completionJson, sseEvent, startModelUpstream, USAGE, type ModelRequest } from '../test/support/model-upstream.ts';
import { parseExposition, sumOf, type Sample } from '../test/support/prometheus.ts';
import { BUNDLE, ROOT, runProxyCommand, tcpSockets } from '../test/support/proxy-process.ts';
import { makeTestPki } from '../test/support/tls.ts';
import { judgeTrend, type Trend } from './memory-trend.ts';

// ---- configuration ------------------------------------------------------------------------

function envNumber(name: string, dflt: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return dflt;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max) {
    process.stderr.write(`soak: ${name}=${raw} is not a number between ${min} and ${max}\n`);
    process.exit(2);
  }
  return n;
}

const QUICK = process.env.SOAK_QUICK === '1';
const MINUTES = QUICK ? 0.25 : envNumber('SOAK_MINUTES', 10, 0.5, 240);
const DURATION_MS = Math.round(MINUTES * 60_000);
/**
 * The first sample after warm-up is the baseline: a third of the run, between 30 s and one
 * minute. Less is too early: the proxy's heap is still growing to its steady size under this
 * load (about 45 MiB idle to about 110 MiB, most of it in the first 15-30 s), and a baseline
 * taken then makes that growth look like a leak.
 */
const WARMUP_MS = QUICK ? 5_000 : Math.max(30_000, Math.min(60_000, Math.round(DURATION_MS / 3)));
/** At least this much traffic follows the baseline, so a short run (0.5 min) lasts about a minute. */
const MIN_AFTER_WARMUP_MS = QUICK ? 10_000 : 30_000;
const RUN_MS = Math.max(DURATION_MS, WARMUP_MS + MIN_AFTER_WARMUP_MS);
const SAMPLE_EVERY_MS = QUICK ? 5_000 : 15_000;
const PRINT_EVERY_MS = 60_000;
const MODEL_WORKERS = Math.round(envNumber('SOAK_MODEL_WORKERS', QUICK ? 8 : 24, 1, 500));
const GIT_WORKERS = Math.round(envNumber('SOAK_GIT_WORKERS', QUICK ? 1 : 3, 0, 50));
const REFS_WORKERS = Math.round(envNumber('SOAK_REFS_WORKERS', QUICK ? 1 : 2, 0, 50));
const REPOS = 3;
const SEED_BLOB_BYTES = 2 * 1024 * 1024;

/** Share of model requests that carry an injected upstream fault, and that abort on the client. */
const FAULT_SHARE = QUICK ? 0.2 : 0.05;
const ABORT_SHARE = 0.05;
/** Share of HTTP-level git requests that abort midway. */
const GIT_ABORT_SHARE = 0.05;
/** Streams: this many content chunks, this far apart. */
const STREAM_CHUNKS = 10;
const STREAM_PACE_MS = 20;

/**
 * The proxy's upstream timeouts: short, so that injected stalls end in seconds; not shorter, since
 * both listeners share them: the git server runs in this process, beside two dozen model workers
 * and the fake provider, and on a busy machine (a 4-minute run on 2 cores shared with other test
 * runs) 2 s sometimes passed between two bytes of a pack, a clone cut by the proxy's idle timeout.
 */
const UPSTREAM_TIMEOUT = '5s';
/** Any single HTTP exchange longer than this is a hang: an unexpected failure. */
const REQUEST_TIMEOUT_MS = 30_000;
/** Any git command longer than this is killed and counted as an unexpected failure. */
const GIT_TIMEOUT_MS = 90_000;
/** Pausing or stopping traffic waits at most this long for in-flight work to finish. */
const DRAIN_TIMEOUT_MS = 60_000;
/**
 * After traffic pauses and the client pools are closed, wait this long before a quiet sample:
 * the upstream servers (node:https defaults) close idle keep-alive sockets after 5 s, and only
 * then has the proxy's upstream pool nothing open.
 */
const QUIET_SETTLE_MS = 6_500;
/** At the end, descriptors above the baseline are looked at again, once a second, this long (see quiet()). */
const QUIET_RECHECK_MS = 15_000;
/** The descriptors of the proxy at each quiet sample, by kind. */
const quietFdKinds: Partial<Record<'quiet-baseline' | 'quiet-end', Record<string, number>>> = {};
/** The whole run must end by then, whatever happens. */
const HARD_DEADLINE_MS = RUN_MS + 5 * 60_000;

// Verdict thresholds.
//
// Memory: RSS of a V8 process under load is noisy. The heap grows lazily to a steady size,
// freed pages are not returned at once, and TLS and socket buffers come and go with the number
// of requests in flight: swings of several MiB between samples are normal and say nothing. A
// leak, however, scales with traffic: this soak runs thousands of requests a minute, so even
// 1 KiB retained per request is tens of MiB over ten minutes. Allowing 20% of the baseline or
// 15 MiB, whichever is larger, stays above the noise (20% of a ~60 MiB baseline is only ~12 MiB,
// within one GC cycle's swing, hence the floor) and far below what a per-request leak would add.
// The end-versus-baseline comparison alone would miss a slow leak that has not reached the
// threshold yet, so the trend after warm-up is judged too, against an allowance per minute
// (scripts/memory-trend.ts: the median slope of every pair of samples, a climb only beyond what
// their scatter could make of it; "rose at every one of the last 3 samples" failed an idle run
// whose RSS under load fell overall). A run with fewer than 20 samples under load after warm-up
// (five minutes) is too short for a trend: it is told, not judged.
const RSS_GROWTH_FRACTION = 0.2;
const RSS_GROWTH_FLOOR_BYTES = 15 * 1024 * 1024;
/** What RSS under load may rise per minute after warm-up: a leak of 1 KiB a request is several MiB a minute here. */
const RSS_TREND_ALLOWANCE_PER_MINUTE = 1024 * 1024;
/**
 * Descriptors: with nothing in flight and every keep-alive connection closed, the proxy should
 * hold exactly what it held at the quiet baseline (listeners, epoll, pipes, stdio). A small
 * margin allows for libuv/V8 internals that open lazily (e.g. a worker thread's eventfd).
 */
const FD_QUIET_MARGIN = 3;
/** What the descriptors under load may rise per minute after warm-up (they follow the requests in flight). */
const FD_TREND_ALLOWANCE_PER_MINUTE = 1;

const MODELS = ['soak-model-a', 'soak-model-b'];
const MiB = 1024 * 1024;

// ---- small helpers ------------------------------------------------------------------------

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;
const mib = (bytes: number) => (bytes / MiB).toFixed(1);

function clock(ms: number): string {
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

function procRss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? NaN) * 1024;
}
const procFds = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;
const TCP_STATES: Record<string, string> = { '01': 'established', '06': 'time_wait', '07': 'close', '08': 'close_wait', '09': 'last_ack', '0A': 'listen', '0B': 'closing', '04': 'fin_wait1', '05': 'fin_wait2' };

/**
 * What each open descriptor is (a TCP socket by its ports and state, another socket, a pipe,
 * anon_inode:[eventfd], a path), counted by kind: told when descriptors are not flat.
 */
function procFdKinds(pid: number): Record<string, number> {
  const kinds: Record<string, number> = {};
  const tcp = tcpSockets(pid);
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target: string;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue; // closed between the listing and the read
    }
    // A TCP socket by its ports and state (ports tell which server a connection is with).
    const socket = tcp.get(/^socket:\[(\d+)\]$/.exec(target)?.[1] ?? '');
    const kind = socket !== undefined ? `tcp ${socket.localPort}->${socket.remotePort} ${TCP_STATES[socket.state] ?? socket.state}` : target.replace(/\[\d+\]$/, '');
    kinds[kind] = (kinds[kind] ?? 0) + 1;
  }
  return kinds;
}

/** Live descendants of `root` from /proc, parents before children. */
function descendants(root: number): { pid: number; comm: string }[] {
  const children = new Map<number, { pid: number; comm: string }[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const [state, ppid] = stat.slice(close + 2).split(' ');
      if (state === 'Z') continue;
      const list = children.get(Number(ppid)) ?? [];
      list.push({ pid: Number(name), comm: stat.slice(stat.indexOf('(') + 1, close) });
      children.set(Number(ppid), list);
    } catch {
      // gone meanwhile
    }
  }
  const out: { pid: number; comm: string }[] = [];
  const walk = (pid: number) => {
    for (const c of children.get(pid) ?? []) {
      out.push(c);
      walk(c.pid);
    }
  };
  walk(root);
  return out;
}

class SoakAbort extends Error {}

// ---- cleanup (as in scripts/demo.ts: reverse order, idempotent, also on Ctrl-C) ------------

const CLEANUP_STEP_TIMEOUT_MS = 20_000;
const cleanupSteps: { what: string; step: () => void | Promise<void> }[] = [];
let cleanupRunning: Promise<void> | undefined;
const defer = (what: string, step: () => void | Promise<void>) => void cleanupSteps.push({ what, step });
function cleanup(): Promise<void> {
  cleanupRunning ??= (async () => {
    while (cleanupSteps.length > 0) {
      const { what, step } = cleanupSteps.pop()!;
      const t0 = performance.now();
      let timer: NodeJS.Timeout | undefined;
      try {
        // Bounded: a step that hangs is reported and left behind, the rest still run.
        await Promise.race([
          step(),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`still not done after ${CLEANUP_STEP_TIMEOUT_MS / 1000} s`)), CLEANUP_STEP_TIMEOUT_MS);
          }),
        ]);
      } catch (err) {
        process.stderr.write(`soak: cleanup step "${what}" failed: ${(err as Error).message}\n`);
      } finally {
        clearTimeout(timer);
      }
      if (process.env.SOAK_DEBUG) process.stderr.write(`soak: cleanup "${what}" took ${Math.round(performance.now() - t0)} ms\n`);
    }
  })();
  return cleanupRunning;
}

// ---- client-side bookkeeping --------------------------------------------------------------

type OpKind = 'clone' | 'push' | 'refs' | 'chat' | 'stream' | 'fault' | 'abort' | 'git-abort';
const OP_KINDS: OpKind[] = ['clone', 'push', 'refs', 'chat', 'stream', 'fault', 'abort', 'git-abort'];
interface Tally {
  /** A normal success (for chat: 200 with the right body; for faults: never). */
  ok: number;
  /** An injected fault with the expected outcome, or a client abort carried out. */
  expected: number;
  unexpected: number;
}
const tallies = new Map<OpKind, Tally>(OP_KINDS.map((k) => [k, { ok: 0, expected: 0, unexpected: 0 }]));
/** "fault kind -> outcome" counts, e.g. "reset -> 502". */
const faultOutcomes = new Map<string, number>();
const UNEXPECTED_KEPT = 40;
const unexpectedDetails: { atMs: number; kind: OpKind; detail: string }[] = [];
let unexpectedTotal = 0;
/** Model requests sent (all of them reach the gateway, aborted ones included). */
let modelRequestsSent = 0;

let startedAt = 0;
const elapsed = () => performance.now() - startedAt;

function ok(kind: OpKind): void {
  tallies.get(kind)!.ok++;
}
function expected(kind: OpKind, outcome?: string): void {
  tallies.get(kind)!.expected++;
  if (outcome) faultOutcomes.set(outcome, (faultOutcomes.get(outcome) ?? 0) + 1);
}
function unexpected(kind: OpKind, detail: string): void {
  tallies.get(kind)!.unexpected++;
  unexpectedTotal++;
  if (unexpectedDetails.length < UNEXPECTED_KEPT) unexpectedDetails.push({ atMs: Math.round(elapsed()), kind, detail: detail.slice(0, 600) });
  if (unexpectedTotal <= 5) process.stdout.write(`  ! unexpected ${kind} at ${clock(elapsed())}: ${detail.slice(0, 300).replace(/\n/g, ' | ')}\n`);
}

// ---- traffic control: run, pause until quiet, stop ----------------------------------------

let running = true;
let paused = false;
let inFlight = 0;
const resumeWaiters: (() => void)[] = [];

/** Waits while traffic is paused; false once the soak is stopping. */
async function gate(): Promise<boolean> {
  while (paused && running) await new Promise<void>((resolve) => resumeWaiters.push(resolve));
  return running;
}
function resume(): void {
  paused = false;
  for (const w of resumeWaiters.splice(0)) w();
}
/** Wraps one operation so that pauses can wait for it. */
async function tracked<T>(op: () => Promise<T>): Promise<T> {
  inFlight++;
  try {
    return await op();
  } finally {
    inFlight--;
  }
}
async function drainInFlight(): Promise<boolean> {
  const deadline = performance.now() + DRAIN_TIMEOUT_MS;
  while (inFlight > 0 && performance.now() < deadline) await sleep(100);
  return inFlight === 0;
}

// ---- HTTP client --------------------------------------------------------------------------

/** Client keep-alive pools (as bots and git would keep connections); replaced at each quiet point. */
const pools = { model: newPool(), git: newPool() };
function newPool(): Agent {
  return new Agent({ keepAlive: true, maxSockets: Infinity });
}
function resetPools(): void {
  pools.model.destroy();
  pools.git.destroy();
  pools.model = newPool();
  pools.git = newPool();
}

interface ExchangeResult {
  /** 0 when no response head arrived. */
  status: number;
  headers: IncomingHttpHeaders;
  /** The body as text (first 256 KiB). */
  body: string;
  /** The response ended cleanly (IncomingMessage.complete). */
  complete: boolean;
  error: string | undefined;
  timedOut: boolean;
  /** We destroyed the request on purpose (an abort scenario). */
  abortedByUs: boolean;
}

interface ExchangeOptions {
  port: number;
  method: string;
  path: string;
  headers: Record<string, string | number>;
  agent: Agent | false;
  body?: string | Buffer;
  /** Sent instead of a whole body: write these bytes, then abort this long after they were flushed. */
  partialBody?: { bytes: Buffer; abortAfterMs: number };
  /** Abort once this many body chunks have arrived. */
  abortAfterChunks?: number;
  /** Abort as soon as the response head arrives. */
  abortOnHead?: boolean;
  /** Abort this long after the request was flushed, whatever happened. */
  abortAfterMs?: number;
}

const MAX_KEPT_BODY = 256 * 1024;

function exchange(o: ExchangeOptions): Promise<ExchangeResult> {
  return new Promise((resolve) => {
    const result: ExchangeResult = { status: 0, headers: {}, body: '', complete: false, error: undefined, timedOut: false, abortedByUs: false };
    let done = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = () => {
      if (done) return;
      done = true;
      for (const t of timers) clearTimeout(t);
      // An answer can come before a partial upload was abandoned (git http-backend answers an
      // invalid upload-pack request at once): abandon it now, or its socket would stay open.
      if (!req.writableEnded) req.destroy();
      resolve(result);
    };
    const req = request({ host: '127.0.0.1', port: o.port, method: o.method, path: o.path, headers: o.headers, agent: o.agent });
    const abort = () => {
      if (done || result.complete) return;
      result.abortedByUs = true;
      req.destroy();
    };
    timers.push(
      setTimeout(() => {
        result.timedOut = true;
        req.destroy(new Error(`client timeout after ${REQUEST_TIMEOUT_MS} ms`));
      }, REQUEST_TIMEOUT_MS),
    );
    // Abort timers start once the bytes are handed to the kernel, never before: a timer that
    // fires before the connection is up (this process's own event loop can lag by tens of ms)
    // would abort a request the proxy never saw, and the request counts would not add up.
    const abortLater = (ms: number) => () => {
      if (!done) timers.push(setTimeout(abort, ms));
    };
    req.on('error', (err) => {
      result.error ??= err.message;
      // Without a response nothing else will come; with one, its 'close' finishes.
      if (result.status === 0) finish();
    });
    req.on('close', () => {
      // Fallback: if the response object never closes (it always should), do not hang.
      setImmediate(() => {
        if (result.status === 0 || result.abortedByUs) finish();
      });
    });
    req.on('response', (res: IncomingMessage) => {
      result.status = res.statusCode ?? 0;
      result.headers = res.headers;
      let chunks = 0;
      res.setEncoding('utf8');
      res.on('data', (s: string) => {
        if (result.body.length < MAX_KEPT_BODY) result.body += s;
        chunks++;
        if (o.abortAfterChunks !== undefined && chunks >= o.abortAfterChunks) abort();
      });
      res.on('error', (err) => (result.error ??= err.message));
      res.on('close', () => {
        result.complete = res.complete;
        finish();
      });
      if (o.abortOnHead) abort();
    });
    if (o.partialBody) {
      req.write(o.partialBody.bytes, abortLater(o.partialBody.abortAfterMs));
    } else if (o.abortAfterMs !== undefined) {
      req.end(o.body, abortLater(o.abortAfterMs));
    } else {
      req.end(o.body);
    }
  });
}

function describe(r: ExchangeResult): string {
  const bits = [`status ${r.status}`, r.complete ? 'complete' : 'incomplete'];
  if (r.error) bits.push(`error "${r.error}"`);
  if (r.timedOut) bits.push('TIMED OUT');
  if (r.body) bits.push(`body ${JSON.stringify(r.body.slice(0, 200))}`);
  return bits.join(', ');
}

// ---- the fake model upstream ---------------------------------------------------------------

type Fault = 'reset' | 'rate429' | 'rate429once' | 'error500' | 'stallHead' | 'cutStream' | 'stallStream' | 'cutPlain';
const FAULTS: { fault: Fault; stream: boolean }[] = [
  { fault: 'reset', stream: false },
  { fault: 'reset', stream: true },
  { fault: 'rate429', stream: true },
  { fault: 'rate429once', stream: false },
  { fault: 'rate429once', stream: true },
  { fault: 'error500', stream: false },
  { fault: 'stallHead', stream: true },
  { fault: 'cutStream', stream: true },
  { fault: 'stallStream', stream: true },
  { fault: 'cutPlain', stream: false },
];
/** Ids of rate429once requests already refused once (bounded: cleared if it ever gets large). */
const refusedOnce = new Set<string>();
/** The upstream's own safety net: a stalled answer is dropped after this, whatever happens. */
const UPSTREAM_STALL_MAX_MS = 10_000;

function streamEventsFor(model: string): string[] {
  const events = [sseEvent(chunk(model, { role: 'assistant', content: '' }))];
  for (let i = 0; i < STREAM_CHUNKS; i++) events.push(sseEvent(chunk(model, { content: `w${i} ` })));
  events.push(sseEvent(chunk(model, {}, 'stop')));
  events.push(sseEvent({ id: 'chatcmpl-soak', object: 'chat.completion.chunk', created: 1, model, choices: [], usage: USAGE }));
  events.push(sseEvent('[DONE]'));
  return events;
}

/** Writes events paced; `stopAfter` events then calls `then` (cut or stall) instead of ending. */
function pacedStream(res: ServerResponse, events: string[], stopAfter?: number, then?: () => void): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': `req_${randomUUID()}` });
  let i = 0;
  let timer: NodeJS.Timeout | undefined;
  res.once('close', () => clearTimeout(timer));
  const next = () => {
    if (res.destroyed) return;
    if (stopAfter !== undefined && i >= stopAfter) {
      then?.();
      return;
    }
    res.write(events[i++]);
    if (i < events.length) timer = setTimeout(next, STREAM_PACE_MS);
    else res.end();
  };
  next();
}

/** Holds an answer open until the proxy gives up (it closes), or our own safety net. */
function stall(res: ServerResponse): void {
  const timer = setTimeout(() => res.destroy(), UPSTREAM_STALL_MAX_MS);
  res.once('close', () => clearTimeout(timer));
}

function modelUpstreamHandler(req: IncomingMessage, res: ServerResponse, recorded: ModelRequest): void {
  let body: { model: string; stream?: boolean; messages?: { content?: string }[] };
  try {
    body = JSON.parse(recorded.body.toString()) as typeof body;
  } catch {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end('{"error":{"message":"bad json"}}');
    return;
  }
  // "soak <fault|ok> <id>"
  const [, fault = 'ok', id = ''] = (body.messages?.[0]?.content ?? '').split(' ');
  const model = body.model;
  const normal = () => {
    if (body.stream) return pacedStream(res, streamEventsFor(model));
    const text = completionJson(model);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'x-request-id': `req_${randomUUID()}` });
    res.end(text);
  };
  const tooMany = (retryAfterMs: number) => {
    const text = '{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded","param":null}}';
    res.writeHead(429, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'retry-after-ms': String(retryAfterMs) });
    res.end(text);
  };
  switch (fault as Fault | 'ok' | 'rate429slow') {
    case 'reset':
      req.socket.destroy();
      return;
    case 'rate429':
      return tooMany(20);
    case 'rate429slow':
      return tooMany(2_000);
    case 'rate429once':
      if (refusedOnce.delete(id)) return normal();
      if (refusedOnce.size > 10_000) refusedOnce.clear();
      refusedOnce.add(id);
      return tooMany(20);
    case 'error500': {
      const text = '{"error":{"message":"upstream exploded","type":"server_error","code":null,"param":null}}';
      res.writeHead(500, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    case 'stallHead':
      return stall(res);
    case 'cutStream':
      return pacedStream(res, streamEventsFor(model), 4, () => req.socket.destroy());
    case 'stallStream':
      return pacedStream(res, streamEventsFor(model), 3, () => stall(res));
    case 'cutPlain': {
      const text = completionJson(model);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.write(text.slice(0, Math.floor(text.length / 2)));
      setTimeout(() => req.socket.destroy(), 20);
      return;
    }
    default:
      return normal();
  }
}

// ---- model clients -------------------------------------------------------------------------

interface ModelEnv {
  port: number;
  tokens: string[];
}

function chatBody(stream: boolean, directive: string): string {
  return JSON.stringify({
    model: pick(MODELS),
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
    messages: [{ role: 'user', content: directive }],
  });
}

function chatHeaders(env: ModelEnv, body: string | number): Record<string, string | number> {
  return {
    'content-type': 'application/json',
    'content-length': typeof body === 'number' ? body : Buffer.byteLength(body),
    authorization: `Bearer ${pick(env.tokens)}`,
  };
}

function plainOk(r: ExchangeResult): boolean {
  if (r.status !== 200 || !r.complete) return false;
  try {
    const doc = JSON.parse(r.body) as { choices?: { message?: { content?: string } }[] };
    return doc.choices?.[0]?.message?.content === 'Hello from the fake upstream.';
  } catch {
    return false;
  }
}
function streamOk(r: ExchangeResult): boolean {
  return r.status === 200 && r.complete && r.body.includes('"usage"') && r.body.endsWith('data: [DONE]\n\n') && r.body.includes(`w${STREAM_CHUNKS - 1} `);
}

async function normalChat(env: ModelEnv, stream: boolean): Promise<void> {
  const body = chatBody(stream, `soak ok ${randomUUID()}`);
  modelRequestsSent++;
  const r = await exchange({ port: env.port, method: 'POST', path: '/v1/chat/completions', headers: chatHeaders(env, body), agent: pools.model, body });
  const kind: OpKind = stream ? 'stream' : 'chat';
  if (stream ? streamOk(r) : plainOk(r)) ok(kind);
  else unexpected(kind, `${stream ? 'streamed' : 'plain'} completion: ${describe(r)}`);
}

async function faultyChat(env: ModelEnv): Promise<void> {
  const { fault, stream } = pick(FAULTS);
  const body = chatBody(stream, `soak ${fault} ${randomUUID()}`);
  modelRequestsSent++;
  const r = await exchange({ port: env.port, method: 'POST', path: '/v1/chat/completions', headers: chatHeaders(env, body), agent: pools.model, body });
  let good: boolean;
  switch (fault) {
    case 'reset': // retried (a reset before any response), then 502
      good = r.status === 502 && r.complete;
      break;
    case 'rate429': // retried twice after 20 ms each, then the upstream's 429 is passed on
      good = r.status === 429 && r.complete;
      break;
    case 'rate429once': // the retry succeeds: the client never notices
      good = stream ? streamOk(r) : plainOk(r);
      break;
    case 'error500':
      good = r.status === 500 && r.complete;
      break;
    case 'stallHead': // --upstream-response-timeout, not retried
      good = r.status === 504 && r.complete;
      break;
    case 'cutStream':
    case 'stallStream': // the head was relayed at once: the client connection must break, never end cleanly
      good = r.status === 200 && !r.complete && !r.timedOut;
      break;
    case 'cutPlain':
      // A plain body's head goes out with its first relayed bytes, and the redactor holds back
      // the tail of what has arrived (a secret may span two chunks): a body cut before anything
      // was relayed reaches the client as a connection broken before any head (status 0), one
      // cut later as a 200 broken midway. Either way broken, never a clean end, never a hang.
      good = (r.status === 200 || (r.status === 0 && r.error !== undefined)) && !r.complete && !r.timedOut;
      break;
  }
  const outcome = `${fault}${stream ? '/stream' : ''} -> ${r.status}${r.complete ? '' : ' cut'}`;
  if (good) expected('fault', outcome);
  else unexpected('fault', `injected ${fault}${stream ? ' (stream)' : ''}: ${describe(r)}`);
}

async function abortingChat(env: ModelEnv): Promise<void> {
  const x = Math.random();
  modelRequestsSent++;
  let r: ExchangeResult;
  let what: string;
  if (x < 0.5) {
    // Mid-stream: leave after a few chunks.
    what = 'mid-stream';
    const body = chatBody(true, `soak ok ${randomUUID()}`);
    r = await exchange({ port: env.port, method: 'POST', path: '/v1/chat/completions', headers: chatHeaders(env, body), agent: pools.model, body, abortAfterChunks: 3 });
  } else if (x < 0.8) {
    // Mid-upload: declare a body, send part of it, leave.
    what = 'mid-upload';
    const body = chatBody(Math.random() < 0.5, `soak ok ${randomUUID()}`);
    const padded = Buffer.from(body.slice(0, -1) + `,"padding":"${'x'.repeat(4000)}"}`);
    r = await exchange({
      port: env.port,
      method: 'POST',
      path: '/v1/chat/completions',
      headers: chatHeaders(env, padded.length),
      agent: pools.model,
      partialBody: { bytes: padded.subarray(0, 1000), abortAfterMs: 30 },
    });
  } else {
    // While the gateway waits to retry a 429 (retry-after-ms 2000).
    what = 'during-retry-wait';
    const body = chatBody(Math.random() < 0.5, `soak rate429slow ${randomUUID()}`);
    r = await exchange({ port: env.port, method: 'POST', path: '/v1/chat/completions', headers: chatHeaders(env, body), agent: pools.model, body, abortAfterMs: 300 });
  }
  if (r.abortedByUs && !r.timedOut) expected('abort', `client abort ${what}`);
  else unexpected('abort', `client abort ${what} did not happen as planned: ${describe(r)}`);
}

async function modelWorker(env: ModelEnv): Promise<void> {
  while (await gate()) {
    const x = Math.random();
    await tracked(() => (x < FAULT_SHARE ? faultyChat(env) : x < FAULT_SHARE + ABORT_SHARE ? abortingChat(env) : normalChat(env, Math.random() < 0.5)));
    await sleep(20 + Math.random() * 80);
  }
}

// ---- git clients ---------------------------------------------------------------------------

interface GitEnvCtx {
  proxyPort: number;
  server: GitServer;
  repos: { name: string; bare: string }[];
  home: string;
  workRoot: string;
}

interface GitRun {
  code: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

function runGitBounded(args: string[], home: string, cwd?: string): Promise<GitRun> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { cwd, env: gitEnv(home), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout = (stdout + s).slice(-8192)));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr = (stderr + s).slice(-8192)));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, GIT_TIMEOUT_MS);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr, timedOut });
    });
  });
}

function bareRev(bare: string, ref: string, home: string): Promise<string> {
  return new Promise((resolve) => {
    execFile('git', ['--git-dir', bare, 'rev-parse', '--verify', '--quiet', ref], { env: gitEnv(home), encoding: 'utf8' }, (_err, stdout) => resolve(stdout.trim()));
  });
}

/** One iteration: fresh clone, commit on the worker's own branch, push (always a fast-forward). */
async function gitIteration(ctx: GitEnvCtx, k: number, iteration: number, branchExists: boolean): Promise<boolean> {
  const repo = ctx.repos[k % ctx.repos.length]!;
  const branch = `soak-w${k}`;
  const dir = mkdtempSync(join(ctx.workRoot, `w${k}-`));
  try {
    const clone = await runGitBounded(['clone', '--quiet', '--no-tags', `https://${ctx.server.hostKey}/${repo.name}`, dir], ctx.home);
    if (clone.code !== 0) {
      unexpected('clone', `git clone ${repo.name} exit ${clone.code}${clone.timedOut ? ' (timed out)' : ''}: ${clone.stderr.trim()}`);
      return branchExists;
    }
    if (!existsSync(join(dir, 'blob.bin'))) {
      unexpected('clone', `git clone ${repo.name} succeeded but blob.bin is missing`);
      return branchExists;
    }
    ok('clone');
    const local = async (args: string[]) => {
      const r = await runGitBounded(args, ctx.home, dir);
      if (r.code !== 0) throw new Error(`git ${args.join(' ')} exit ${r.code}: ${r.stderr.trim()}`);
      return r.stdout;
    };
    await local(['checkout', '--quiet', '-B', branch, ...(branchExists ? [`origin/${branch}`] : [])]);
    writeFileSync(join(dir, `worker-${k}.txt`), `iteration ${iteration} at ${new Date().toISOString()}\n`);
    await local(['add', `worker-${k}.txt`]);
    await local(['commit', '--quiet', '-m', `soak worker ${k} iteration ${iteration}`]);
    const head = (await local(['rev-parse', 'HEAD'])).trim();
    const push = await runGitBounded(['push', '--quiet', 'origin', branch], ctx.home, dir);
    if (push.code !== 0) {
      unexpected('push', `git push ${repo.name} ${branch} exit ${push.code}${push.timedOut ? ' (timed out)' : ''}: ${push.stderr.trim()}`);
      return branchExists;
    }
    const upstream = await bareRev(repo.bare, `refs/heads/${branch}`, ctx.home);
    if (upstream !== head) {
      unexpected('push', `git push ${repo.name} ${branch} reported success but the server has ${upstream || 'nothing'}, not ${head}`);
      return branchExists;
    }
    ok('push');
    return true;
  } catch (err) {
    // Local git steps (checkout, commit) never touch the proxy: a failure here is the soak's own.
    unexpected('push', `local git step failed: ${(err as Error).message}`);
    return branchExists;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function gitWorker(ctx: GitEnvCtx, k: number): Promise<void> {
  let branchExists = false;
  for (let iteration = 0; await gate(); iteration++) {
    branchExists = await tracked(() => gitIteration(ctx, k, iteration, branchExists));
    await sleep(200 + Math.random() * 300);
  }
}

/** HTTP-level git traffic: ref discovery, and now and then a request abandoned midway. */
async function refsWorker(ctx: GitEnvCtx): Promise<void> {
  while (await gate()) {
    await tracked(async () => {
      const repo = pick(ctx.repos);
      const base = `/${ctx.server.hostKey}/${repo.name}`;
      if (Math.random() >= GIT_ABORT_SHARE) {
        const v2 = Math.random() < 0.5;
        const r = await exchange({
          port: ctx.proxyPort,
          method: 'GET',
          path: `${base}/info/refs?service=git-upload-pack`,
          headers: { 'user-agent': 'git/2.39.5', ...(v2 ? { 'git-protocol': 'version=2' } : {}) },
          agent: pools.git,
        });
        const good = r.status === 200 && r.complete && r.headers['content-type'] === 'application/x-git-upload-pack-advertisement' && (v2 ? r.body.includes('version 2') : r.body.includes('refs/heads/main'));
        if (good) ok('refs');
        else unexpected('refs', `GET info/refs (${v2 ? 'v2' : 'v0'}): ${describe(r)}`);
        return;
      }
      // Abandoned uploads are chunked, as git sends any body that does not fit one buffer. With
      // a Content-Length, the test server's `git http-backend` (git 2.39) spins at 100% CPU
      // forever when its stdin ends early (it loops on read() returning 0 in
      // pipe_fixed_length) and never exits: a fixture problem, not the proxy's, but it would
      // burn a core and leave orphans behind.
      const x = Math.random();
      let r: ExchangeResult;
      let what: string;
      if (x < 0.4) {
        what = 'upload-pack mid-upload';
        r = await exchange({
          port: ctx.proxyPort,
          method: 'POST',
          path: `${base}/git-upload-pack`,
          headers: { 'content-type': 'application/x-git-upload-pack-request' },
          agent: pools.git,
          partialBody: { bytes: Buffer.from(`0032want ${'0'.repeat(40)}\n`), abortAfterMs: 50 },
        });
      } else if (x < 0.7) {
        what = 'receive-pack mid-upload';
        r = await exchange({
          port: ctx.proxyPort,
          method: 'POST',
          path: `${base}/git-receive-pack`,
          headers: { 'content-type': 'application/x-git-receive-pack-request' },
          agent: pools.git,
          partialBody: { bytes: randomBytes(2000), abortAfterMs: 50 },
        });
      } else {
        what = 'info/refs on head';
        r = await exchange({ port: ctx.proxyPort, method: 'GET', path: `${base}/info/refs?service=git-upload-pack`, headers: {}, agent: pools.git, abortOnHead: true });
      }
      // A refs answer can be complete before we get to abort it: fine either way.
      if ((r.abortedByUs || r.complete) && !r.timedOut) expected('git-abort', `client abort ${what}`);
      else unexpected('git-abort', `client abort ${what}: ${describe(r)}`);
    });
    await sleep(30 + Math.random() * 70);
  }
}

// ---- the proxy -----------------------------------------------------------------------------

interface Proxy {
  pid: number;
  ports: { git: number; model: number; metrics: number };
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  isRunning(): boolean;
  /** Request log lines seen, by listener; and the `error` field's values, by listener. */
  logCounts: Map<string, number>;
  logErrors: Map<string, number>;
  /** The last lines of output (for a crash report). */
  tail(): string;
  stop(): Promise<void>;
}

/**
 * Like test/support/proxy-process.ts startProxy, but for a long run: it must not keep every log
 * line (that would grow this process without bound), so it counts them and keeps a short tail.
 */
async function startSoakProxy(env: Record<string, string>, args: string[]): Promise<Proxy> {
  const child = spawn(process.execPath, [BUNDLE, ...args], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const logCounts = new Map<string, number>();
  const logErrors = new Map<string, number>();
  const tailLines: string[] = [];
  const keep = (line: string) => {
    tailLines.push(line.slice(0, 2000));
    if (tailLines.length > 60) tailLines.shift();
  };
  const ports: Record<string, number> = {};
  let pending = '';
  let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      exitInfo = { code, signal };
      resolve(exitInfo);
    }),
  );
  let announce: () => void = () => {};
  const allUp = new Promise<void>((resolve) => (announce = resolve));
  child.stderr.setEncoding('utf8').on('data', (s: string) => keep(`[stderr] ${s}`));
  child.stdout.setEncoding('utf8').on('data', (s: string) => {
    pending += s;
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      let rec: Record<string, unknown>;
      try {
        rec = JSON.parse(line) as Record<string, unknown>;
      } catch {
        keep(line);
        continue;
      }
      if (rec.event === 'request') {
        const listener = String(rec.listener);
        logCounts.set(listener, (logCounts.get(listener) ?? 0) + 1);
        if (rec.error != null) {
          const key = `${listener}:${String(rec.error)}`;
          logErrors.set(key, (logErrors.get(key) ?? 0) + 1);
        }
        if (rec.error != null) keep(line);
      } else {
        keep(line);
        if (rec.event === 'listening') {
          ports[String(rec.listener)] = Number(String(rec.address).split(':').pop());
          if (ports.git && ports.model && ports.metrics) announce();
        }
      }
    }
  });
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new SoakAbort('the proxy did not announce its listeners within 15 s')), 15_000).unref());
  const died = exited.then(({ code, signal }) => {
    throw new SoakAbort(`the proxy exited (${code ?? signal}) during start-up:\n${tailLines.join('\n')}`);
  });
  await Promise.race([allUp, timeout, died]);
  return {
    pid: child.pid!,
    ports: { git: ports.git!, model: ports.model!, metrics: ports.metrics! },
    exited,
    isRunning: () => exitInfo === undefined,
    logCounts,
    logErrors,
    tail: () => tailLines.join('\n'),
    async stop() {
      if (exitInfo) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

function scrape(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = get({ host: '127.0.0.1', port, path: '/metrics', agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (s: string) => (text += s));
      res.on('end', () => (res.statusCode === 200 ? resolve(text) : reject(new Error(`/metrics answered ${res.statusCode}`))));
      res.on('error', reject);
    });
    req.setTimeout(10_000, () => req.destroy(new Error('/metrics timed out')));
    req.on('error', reject);
  });
}

// ---- samples -------------------------------------------------------------------------------

interface MetricsSummary {
  gitByStatus: Record<string, number>;
  modelByStatus: Record<string, number>;
  interruptions: Record<string, number>;
  gitUpstreamErrors: Record<string, number>;
  retries: number;
  rateLimited: number;
  usageIncomplete: number;
  streamsInFlight: number;
  activeConnections: Record<string, number>;
  lagP99Ms: number;
  lagMaxMs: number;
  rssBytes: number;
  openFds: number;
  seriesOverflow: number;
  /** Absent from bundles older than these counters. */
  gitClientAborts: number;
  logLinesDropped: number;
}

function byLabel(samples: readonly Sample[], name: string, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples) if (s.name === name) out[s.labels[label] ?? ''] = (out[s.labels[label] ?? ''] ?? 0) + s.value;
  return out;
}

function summarize(samples: readonly Sample[]): MetricsSummary {
  return {
    gitByStatus: byLabel(samples, 'git_proxy_requests_total', 'status'),
    modelByStatus: byLabel(samples, 'model_gateway_requests_total', 'status'),
    interruptions: byLabel(samples, 'model_gateway_stream_interruptions_total', 'reason'),
    gitUpstreamErrors: byLabel(samples, 'git_proxy_upstream_errors_total', 'kind'),
    retries: sumOf(samples, 'model_gateway_retries_total'),
    rateLimited: sumOf(samples, 'model_gateway_upstream_rate_limited_total'),
    usageIncomplete: sumOf(samples, 'model_gateway_usage_incomplete_total'),
    streamsInFlight: sumOf(samples, 'model_gateway_streams_in_flight'),
    activeConnections: byLabel(samples, 'proxy_active_connections', 'listener'),
    lagP99Ms: sumOf(samples, 'nodejs_eventloop_lag_p99_seconds') * 1000,
    lagMaxMs: sumOf(samples, 'nodejs_eventloop_lag_max_seconds') * 1000,
    rssBytes: sumOf(samples, 'process_resident_memory_bytes'),
    openFds: sumOf(samples, 'process_open_fds'),
    seriesOverflow: sumOf(samples, 'proxy_metric_series_overflow_total'),
    gitClientAborts: sumOf(samples, 'git_proxy_client_aborts_total'),
    logLinesDropped: sumOf(samples, 'proxy_log_lines_dropped_total'),
  };
}

interface SoakSample {
  atMs: number;
  phase: 'start' | 'load' | 'quiet-baseline' | 'quiet-end';
  rssBytes: number;
  fds: number;
  inFlight: number;
  client: Record<OpKind, Tally>;
  unexpectedTotal: number;
  /** This (load-generating) process's own event loop lag p99 since the previous sample. */
  soakLagP99Ms: number;
  metrics: MetricsSummary | { error: string };
}

// monitorEventLoopDelay records the whole timer interval, resolution included (idle, it reads
// about `resolution` ms): subtract it to get the lag itself.
const SOAK_LAG_RESOLUTION_MS = 20;
const soakLag = monitorEventLoopDelay({ resolution: SOAK_LAG_RESOLUTION_MS });

async function takeSample(proxy: Proxy, phase: SoakSample['phase']): Promise<SoakSample> {
  const rssBytes = procRss(proxy.pid);
  const fds = procFds(proxy.pid);
  let metrics: SoakSample['metrics'];
  try {
    metrics = summarize(parseExposition(await scrape(proxy.ports.metrics)));
  } catch (err) {
    metrics = { error: (err as Error).message };
  }
  const soakLagP99Ms = Math.max(0, soakLag.percentile(99) / 1e6 - SOAK_LAG_RESOLUTION_MS);
  soakLag.reset();
  const client = Object.fromEntries(OP_KINDS.map((k) => [k, { ...tallies.get(k)! }])) as Record<OpKind, Tally>;
  return { atMs: Math.round(elapsed()), phase, rssBytes, fds, inFlight, client, unexpectedTotal, soakLagP99Ms, metrics };
}

const fmtCounts = (r: Record<string, number>) =>
  Object.entries(r)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}:${v}`)
    .join(' ') || '-';

function printLine(label: string, s: SoakSample, lagP99Ms: number | undefined): void {
  const c = s.client;
  const m = 'error' in s.metrics ? undefined : s.metrics;
  const lag = lagP99Ms === undefined ? 'n/a' : `${lagP99Ms.toFixed(1)}ms`;
  const parts = [
    `${clock(s.atMs).padStart(5)} ${label.padEnd(8)}`,
    `rss ${mib(s.rssBytes).padStart(6)} MiB`,
    `fds ${String(s.fds).padStart(4)}`,
    `lag p99 ${lag.padStart(7)}`,
    `| ok: clone ${c.clone.ok} push ${c.push.ok} refs ${c.refs.ok} chat ${c.chat.ok} stream ${c.stream.ok}`,
    `| expected: faults ${c.fault.expected} aborts ${c.abort.expected + c['git-abort'].expected}`,
    `| UNEXPECTED ${s.unexpectedTotal}`,
  ];
  if (m) {
    parts.push(
      `| proxy git ${fmtCounts(m.gitByStatus)} · model ${fmtCounts(m.modelByStatus)} · interrupted ${fmtCounts(m.interruptions)} · retries ${m.retries} · conns ${fmtCounts(m.activeConnections)} streams ${m.streamsInFlight}`,
    );
  } else if ('error' in s.metrics) parts.push(`| metrics: ${s.metrics.error}`);
  process.stdout.write(`${parts.join('  ')}\n`);
}

// ---- verdict -------------------------------------------------------------------------------

/** A trend as the verdict tells it: its rise over the window, the allowance, and the noise. */
function trendLine(t: Trend, show: (n: number) => string, samples: number): string {
  const scatter = t.judged ? `, the scatter's ±${show(t.noise)}` : '';
  return `${t.rise >= 0 ? '+' : ''}${show(t.rise)} over ${(t.spanMs / 60_000).toFixed(1)} min after warm-up (allowed +${show(t.allowed)}${scatter}; ${samples} samples)`;
}

interface Verdict {
  pass: boolean;
  reasons: string[];
  notes: string[];
}

function judge(samples: readonly SoakSample[], crash: string | undefined, proxy: Proxy, finalMetrics: MetricsSummary | undefined): Verdict {
  const reasons: string[] = [];
  const notes: string[] = [];
  if (crash) reasons.push(`the proxy crashed: ${crash}`);

  const load = samples.filter((s) => s.phase === 'load' && s.atMs >= WARMUP_MS - 1000);
  const baseline = load[0];
  const last = load[load.length - 1];
  const qBase = samples.find((s) => s.phase === 'quiet-baseline');
  const qEnd = samples.find((s) => s.phase === 'quiet-end');

  // Memory.
  const allowed = (base: number) => Math.max(base * RSS_GROWTH_FRACTION, RSS_GROWTH_FLOOR_BYTES);
  if (baseline && last && last !== baseline) {
    const growth = last.rssBytes - baseline.rssBytes;
    const line = `RSS under load ${mib(baseline.rssBytes)} -> ${mib(last.rssBytes)} MiB (${growth >= 0 ? '+' : ''}${mib(growth)}; allowed +${mib(allowed(baseline.rssBytes))})`;
    if (growth > allowed(baseline.rssBytes) && !QUICK) reasons.push(`memory not flat: ${line}`);
    else notes.push(line);
  } else reasons.push('not enough samples under load to judge memory');
  if (qBase && qEnd) {
    const growth = qEnd.rssBytes - qBase.rssBytes;
    const line = `RSS quiet ${mib(qBase.rssBytes)} -> ${mib(qEnd.rssBytes)} MiB (${growth >= 0 ? '+' : ''}${mib(growth)}; allowed +${mib(allowed(qBase.rssBytes))})`;
    // A quick run's baseline falls while the heap still grows to its steady size (the first
    // 15-30 s): its memory figures are told, not judged; the descriptors are.
    if (growth > allowed(qBase.rssBytes) && !QUICK) reasons.push(`memory not flat: ${line}`);
    else notes.push(line);
  }
  // Trend: every sample under load from the warm-up on, against an allowance per minute (see the
  // thresholds above). Under load the descriptors follow the requests in flight at the instant of
  // the sample (24 workers, each request a client and an upstream socket: a short run read 75,
  // 85, 90 while the quiet counts before and after were equal); the trend weighs that scatter, and
  // the quiet comparison below is the leak check.
  // The quiet pause just after warm-up lets the heap give memory back, and its regrowth to where
  // it was is no climb: RSS under load counts from its level at warm-up up (a 6-minute run: 126.3
  // MiB at warm-up, 104.6 after the pause, back to 126.2 at the end, read +9.3 MiB as a trend).
  const rssTrend = judgeTrend(load.map((s) => ({ atMs: s.atMs, value: s.rssBytes })), { allowancePerMinute: RSS_TREND_ALLOWANCE_PER_MINUTE, floor: baseline?.rssBytes });
  const fdTrend = judgeTrend(load.map((s) => ({ atMs: s.atMs, value: s.fds })), { allowancePerMinute: FD_TREND_ALLOWANCE_PER_MINUTE });
  const rssLine = trendLine(rssTrend, (n) => `${mib(n)} MiB`, load.length);
  const fdLine = trendLine(fdTrend, (n) => n.toFixed(1), load.length);
  if (QUICK) notes.push('SOAK_QUICK: too short for a trend; judged on the quiet samples and the outcomes');
  else if (!rssTrend.judged) notes.push(`too few samples under load after warm-up to judge a trend (${load.length}; at least 20, five minutes): RSS ${rssLine}`);
  else {
    if (rssTrend.climbing) reasons.push(`memory climbing: RSS under load ${rssLine}`);
    else notes.push(`RSS trend under load ${rssLine} (no climb)`);
    if (fdTrend.climbing) reasons.push(`descriptors climbing under load: ${fdLine}`);
    else notes.push(`open fds trend under load ${fdLine} (no climb)`);
  }

  // Descriptors.
  if (qBase && qEnd) {
    const line = `open fds quiet ${qBase.fds} -> ${qEnd.fds} (allowed +${FD_QUIET_MARGIN})`;
    const kinds = `by kind, baseline ${JSON.stringify(quietFdKinds['quiet-baseline'])}, end ${JSON.stringify(quietFdKinds['quiet-end'])}`;
    if (qEnd.fds > qBase.fds + FD_QUIET_MARGIN) reasons.push(`descriptors not flat: ${line}; ${kinds}`);
    else notes.push(qEnd.fds > qBase.fds ? `${line}; ${kinds}` : line);
  } else reasons.push('no quiet samples to judge descriptors');
  if (baseline && last) notes.push(`open fds under load ${baseline.fds} -> ${last.fds} (max ${Math.max(...load.map((s) => s.fds))})`);
  const qm = qEnd && !('error' in qEnd.metrics) ? qEnd.metrics : undefined;
  if (qm) {
    const conns = Object.values(qm.activeConnections).reduce((a, b) => a + b, 0);
    if (conns !== 0) reasons.push(`proxy_active_connections is ${conns} with no client connected (${fmtCounts(qm.activeConnections)})`);
    if (qm.streamsInFlight !== 0) reasons.push(`model_gateway_streams_in_flight is ${qm.streamsInFlight} with nothing in flight`);
  }

  // Failures.
  if (unexpectedTotal > 0) reasons.push(`${unexpectedTotal} unexpected failure(s) (details below and in soak.json)`);
  const scrapeErrors = samples.filter((s) => 'error' in s.metrics).length;
  if (scrapeErrors > 0) reasons.push(`${scrapeErrors} metrics scrape(s) failed`);

  // Consistency (notes only: the verdict's criteria are memory, descriptors and failures).
  if (finalMetrics) {
    const modelTotal = Object.values(finalMetrics.modelByStatus).reduce((a, b) => a + b, 0);
    const gitTotal = Object.values(finalMetrics.gitByStatus).reduce((a, b) => a + b, 0);
    const logModel = proxy.logCounts.get('model') ?? 0;
    const logGit = proxy.logCounts.get('git') ?? 0;
    const flag = (good: boolean) => (good ? 'ok' : 'MISMATCH');
    notes.push(`consistency: model requests sent ${modelRequestsSent}, counted by the proxy ${modelTotal}, logged ${logModel} (${flag(modelRequestsSent === modelTotal && modelTotal === logModel)}); git requests counted ${gitTotal}, logged ${logGit} (${flag(gitTotal === logGit)})`);
    if (finalMetrics.seriesOverflow > 0) notes.push(`metric series overflow: ${finalMetrics.seriesOverflow}`);
    if (finalMetrics.logLinesDropped > 0) notes.push(`the proxy dropped ${finalMetrics.logLinesDropped} log line(s) (proxy_log_lines_dropped_total): the logged counts above are short by that much`);
  }
  return { pass: reasons.length === 0, reasons, notes };
}

// ---- main ----------------------------------------------------------------------------------

function requireTool(command: string, args: string[], hint: string): void {
  try {
    execFileSync(command, args, { stdio: 'ignore' });
  } catch {
    throw new SoakAbort(`\`${command}\` is not available: ${hint}`);
  }
}

async function soak(): Promise<number> {
  requireTool('git', ['--version'], 'install git (the soak runs the real git client and git http-backend)');
  requireTool('openssl', ['version'], 'install openssl (the soak makes a throwaway CA with it)');
  if (!existsSync(BUNDLE)) throw new SoakAbort(`${BUNDLE} is missing: run \`npm run soak\` (it builds first) or \`node build.mjs\``);

  const print = (line: string) => process.stdout.write(`${line}\n`);
  // Which bundle this run measured (it is read once, at the proxy's start).
  let head = 'unknown';
  try {
    head = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    // not a git checkout
  }
  const bundleIdentity = { sha256: createHash('sha256').update(readFileSync(BUNDLE)).digest('hex'), bytes: statSync(BUNDLE).size, builtAt: statSync(BUNDLE).mtime.toISOString(), gitHead: head };
  const length = QUICK ? `${RUN_MS / 1000} s and at least ${MIN_AFTER_WARMUP_MS / 1000} s after the quiet baseline (SOAK_QUICK)` : RUN_MS === DURATION_MS ? `${MINUTES} min` : `${(RUN_MS / 60_000).toFixed(1)} min (${MINUTES} asked; at least ${MIN_AFTER_WARMUP_MS / 1000} s follow the warm-up)`;
  print(`soak: ${length} of mixed traffic against dist/proxy.js (warm-up ${WARMUP_MS / 1000} s; ${MODEL_WORKERS} model, ${GIT_WORKERS} git, ${REFS_WORKERS} refs workers)`);

  // Runs last: any git process this soak started that is still alive (a stuck clone or
  // http-backend) is reported
  // and killed by its pid, deepest first, so that nothing is left running or orphaned.
  defer('kill leftover child processes', () => {
    // Only git processes: tsx's own esbuild service is a child too, and not ours to kill.
    const left = descendants(process.pid).filter((p) => p.comm.startsWith('git'));
    if (left.length === 0) return;
    process.stderr.write(`soak: ${left.length} leftover child process(es), killing: ${left.map((p) => `${p.pid} ${p.comm}`).join(', ')}\n`);
    for (const p of left.reverse()) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
  const pki = makeTestPki();
  defer('remove the throwaway CA', () => pki.cleanup());

  // The git server and its repositories, each with a 2 MiB incompressible blob.
  const gitToken = `soak_${randomBytes(20).toString('hex')}`;
  const server = await startGitServer({ pki, auth: { type: 'bearer', token: gitToken } });
  defer('stop the git server', () => server.close());
  const workload = makeGitHome();
  defer('remove the workload HOME', () => workload.cleanup());
  const repos: GitEnvCtx['repos'] = [];
  for (let i = 0; i < REPOS; i++) {
    const name = `soak/repo${i}.git`;
    const bare = server.createBareRepo(name);
    const seed = mkdtempSync(join(tmpdir(), 'soak-seed-'));
    try {
      const g = (args: string[], cwd?: string) => execFileSync('git', args, { cwd, env: gitEnv(workload.home), stdio: ['ignore', 'pipe', 'pipe'] });
      g(['clone', '--quiet', bare, seed]);
      writeFileSync(join(seed, 'blob.bin'), randomBytes(SEED_BLOB_BYTES));
      g(['add', 'blob.bin'], seed);
      g(['commit', '--quiet', '-m', 'seed blob'], seed);
      g(['push', '--quiet', 'origin', 'main'], seed);
    } finally {
      rmSync(seed, { recursive: true, force: true });
    }
    repos.push({ name, bare });
  }

  // The model upstream.
  const upstream = await startModelUpstream(pki, '/v1', modelUpstreamHandler);
  defer('stop the model upstream', () => upstream.close());

  // The proxy.
  const apiKey = `sk-soak-${randomBytes(20).toString('hex')}`;
  const signingKey = randomBytes(32).toString('hex');
  const proxy = await startSoakProxy(
    {
      GIT_HOST_A: server.hostKey,
      GIT_HOST_A_TOKEN: gitToken,
      NODE_EXTRA_CA_CERTS: pki.caFile,
      UPSTREAM_BASE_URL: upstream.baseUrl,
      UPSTREAM_API_KEY: apiKey,
      UPSTREAM_ALLOWED_MODELS: MODELS.join(','),
      UPSTREAM_CA_FILE: pki.caFile,
      MODEL_PROXY_SIGNING_KEY: signingKey,
    },
    [
      '--git-auth-listen', '127.0.0.1:0',
      '--model-gateway-listen', '127.0.0.1:0',
      '--metrics-listen', '127.0.0.1:0',
      '--upstream-idle-timeout', UPSTREAM_TIMEOUT,
      '--upstream-response-timeout', UPSTREAM_TIMEOUT,
    ],
  );
  defer('stop the proxy', () => proxy.stop());
  print(`  bundle ${bundleIdentity.sha256.slice(0, 12)} (${bundleIdentity.bytes} bytes, built ${bundleIdentity.builtAt}, HEAD ${head})`);
  print(`  proxy pid ${proxy.pid}: git :${proxy.ports.git}, model :${proxy.ports.model}, metrics :${proxy.ports.metrics}; upstream timeouts ${UPSTREAM_TIMEOUT}`);
  // For the descriptors by kind, whose TCP sockets are named by their ports.
  print(`  upstreams: git server :${server.hostKey.split(':').pop()}, model upstream :${new URL(upstream.baseUrl).port}`);

  // The workload's git configuration, from the bundle itself, and bot tokens.
  const generated = await runProxyCommand(['git-config'], { GIT_AUTH_PROXY_HOST: `127.0.0.1:${proxy.ports.git}`, GIT_HOST_A: server.hostKey });
  if (generated.code !== 0) throw new SoakAbort(`proxy.js git-config failed: ${generated.stderr.trim()}`);
  const configFile = join(workload.home, 'git-auth-proxy.gitconfig');
  writeFileSync(configFile, generated.stdout);
  execFileSync('git', ['config', '--global', '--add', 'include.path', configFile], { env: gitEnv(workload.home) });
  const tokens: string[] = [];
  const ttl = `${Math.ceil(MINUTES) + 30}m`;
  for (let i = 0; i < 4; i++) {
    const minted = await runProxyCommand(['mint-token', '--instance-id', `soak-bot-${i}`, '--workflow', 'soak', '--run-id', `run-${i}`, '--ttl', ttl], { MODEL_PROXY_SIGNING_KEY: signingKey });
    if (minted.code !== 0) throw new SoakAbort(`mint-token failed: ${minted.stderr.trim()}`);
    tokens.push(minted.stdout.trim());
  }

  const workRoot = mkdtempSync(join(tmpdir(), 'soak-work-'));
  defer(`remove ${workRoot}`, () => rmSync(workRoot, { recursive: true, force: true }));
  const gitCtx: GitEnvCtx = { proxyPort: proxy.ports.git, server, repos, home: workload.home, workRoot };
  const modelEnv: ModelEnv = { port: proxy.ports.model, tokens };

  // A crash ends the run at once.
  let crash: string | undefined;
  let stopping = false;
  void proxy.exited.then(({ code, signal }) => {
    if (stopping) return;
    crash = `exit ${code ?? signal}; last output:\n${proxy.tail()}`;
    running = false;
    resume();
  });

  // Go.
  const samples: SoakSample[] = [];
  defer('stop the traffic', () => {
    running = false;
    resume();
    resetPools();
  });
  startedAt = performance.now();
  soakLag.enable();
  const idle = await takeSample(proxy, 'start');
  samples.push(idle);
  print(`  before traffic: proxy rss ${mib(idle.rssBytes)} MiB, fds ${idle.fds}`);
  const workers: Promise<void>[] = [];
  for (let i = 0; i < MODEL_WORKERS; i++) workers.push(modelWorker(modelEnv));
  for (let k = 0; k < GIT_WORKERS; k++) workers.push(gitWorker(gitCtx, k));
  for (let i = 0; i < REFS_WORKERS; i++) workers.push(refsWorker(gitCtx));
  const workersDone = Promise.allSettled(workers);
  print(`  traffic started; one line after warm-up and at each minute`);
  print(`  (lag p99 = the proxy's nodejs_eventloop_lag_p99_seconds, worst scrape of the period, beyond the 10 ms sampling interval: idle reads ~${idle.metrics && !('error' in idle.metrics) ? idle.metrics.lagP99Ms.toFixed(1) : '0'} ms)`);

  const quiet = async (phase: 'quiet-baseline' | 'quiet-end'): Promise<SoakSample> => {
    paused = true;
    const drained = await drainInFlight();
    if (!drained) unexpected('fault', `${inFlight} operation(s) still in flight ${DRAIN_TIMEOUT_MS / 1000} s after traffic paused (a hang)`);
    resetPools();
    await sleep(QUIET_SETTLE_MS);
    let s = await takeSample(proxy, phase);
    // The upstream fakes close idle keep-alive sockets on their own timers, which a loaded machine
    // runs late: descriptors still above the baseline are sampled again, once a second, for at
    // most QUIET_RECHECK_MS. A leak never comes back down, so the verdict below still sees it.
    const base = samples.find((q) => q.phase === 'quiet-baseline');
    for (let waited = 0; phase === 'quiet-end' && base && s.fds > base.fds + FD_QUIET_MARGIN && waited < QUIET_RECHECK_MS; waited += 1000) {
      await sleep(1000);
      s = await takeSample(proxy, phase);
    }
    quietFdKinds[phase] = procFdKinds(proxy.pid);
    samples.push(s);
    const m = 'error' in s.metrics ? undefined : s.metrics;
    print(`${clock(s.atMs).padStart(5)} ${phase === 'quiet-baseline' ? 'quiet' : 'quiet'.padEnd(5)}    rss ${mib(s.rssBytes).padStart(6)} MiB  fds ${String(s.fds).padStart(4)}  (traffic paused, nothing in flight, client pools closed${m ? `; proxy conns ${fmtCounts(m.activeConnections)}, streams ${m.streamsInFlight}` : ''})`);
    return s;
  };

  let nextSampleAt = SAMPLE_EVERY_MS;
  let warmedUp = false;
  let periodLag = 0;
  // Traffic runs until RUN_MS, and at least MIN_AFTER_WARMUP_MS after the quiet baseline ends
  // (draining the injected stalls may take seconds): the quiet comparison needs traffic between.
  let runUntil = RUN_MS;
  while (running && elapsed() < runUntil) {
    const due = Math.min(nextSampleAt, warmedUp ? Infinity : WARMUP_MS, runUntil);
    const wait = due - elapsed();
    // Sleep in short steps so that a crash is noticed quickly.
    if (wait > 0) {
      await sleep(Math.min(wait, 500));
      continue;
    }
    const atWarmup = !warmedUp && elapsed() >= WARMUP_MS;
    const s = await takeSample(proxy, 'load');
    samples.push(s);
    if (!('error' in s.metrics)) periodLag = Math.max(periodLag, s.metrics.lagP99Ms);
    const minuteMark = Math.floor(s.atMs / PRINT_EVERY_MS) > Math.floor((s.atMs - SAMPLE_EVERY_MS) / PRINT_EVERY_MS) && s.atMs >= PRINT_EVERY_MS - 1000;
    if (atWarmup || (warmedUp && minuteMark)) {
      printLine(atWarmup ? 'warm-up' : 'load', s, periodLag);
      periodLag = 0;
    }
    while (nextSampleAt <= elapsed() + 100) nextSampleAt += SAMPLE_EVERY_MS;
    // Keep the fixtures' own records from growing for the whole run.
    upstream.requests.splice(0);
    server.requests.splice(0);
    if (atWarmup) {
      warmedUp = true;
      await quiet('quiet-baseline');
      runUntil = Math.max(runUntil, elapsed() + MIN_AFTER_WARMUP_MS);
      resume();
      while (nextSampleAt <= elapsed() + 100) nextSampleAt += SAMPLE_EVERY_MS;
    }
  }

  // The end: a last sample under load (unless the last one was just taken), then quiet.
  if (!crash) {
    const lastLoad = samples.filter((s) => s.phase === 'load').pop();
    if (!lastLoad || elapsed() - lastLoad.atMs > 5000) {
      const s = await takeSample(proxy, 'load');
      samples.push(s);
      if (!('error' in s.metrics)) periodLag = Math.max(periodLag, s.metrics.lagP99Ms);
      printLine('end', s, periodLag);
    }
  }
  let qEnd: SoakSample | undefined;
  if (!crash) qEnd = await quiet('quiet-end');
  running = false;
  resume();
  await workersDone;

  let finalMetrics: MetricsSummary | undefined;
  if (qEnd && !('error' in qEnd.metrics)) finalMetrics = qEnd.metrics;
  const verdict = judge(samples, crash, proxy, finalMetrics);

  // Report.
  print('');
  print('client results (ok / expected / unexpected):');
  print(`  ${OP_KINDS.map((k) => `${k} ${tallies.get(k)!.ok}/${tallies.get(k)!.expected}/${tallies.get(k)!.unexpected}`).join('  ')}`);
  print(`  fault and abort outcomes: ${[...faultOutcomes].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k} ×${v}`).join(' · ')}`);
  if (finalMetrics) {
    print('proxy metrics at the end:');
    print(`  git_proxy_requests_total by status: ${fmtCounts(finalMetrics.gitByStatus)}; upstream errors: ${fmtCounts(finalMetrics.gitUpstreamErrors)}; client aborts ${finalMetrics.gitClientAborts}; log lines dropped ${finalMetrics.logLinesDropped}`);
    print(`  model_gateway_requests_total by status: ${fmtCounts(finalMetrics.modelByStatus)}; interruptions: ${fmtCounts(finalMetrics.interruptions)}; retries ${finalMetrics.retries}; rate limited ${finalMetrics.rateLimited}; usage incomplete ${finalMetrics.usageIncomplete}`);
  }
  print(`  access-log errors: ${[...proxy.logErrors].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k} ×${v}`).join(' · ') || 'none'}`);
  if (unexpectedDetails.length > 0) {
    print(`unexpected failures (first ${unexpectedDetails.length} of ${unexpectedTotal}):`);
    for (const u of unexpectedDetails) print(`  ${clock(u.atMs)} ${u.kind}: ${u.detail.replace(/\n/g, ' | ')}`);
  }
  for (const n of verdict.notes) print(`  ${n}`);
  print('');
  print(verdict.pass ? 'soak: PASS' : 'soak: FAIL');
  for (const r of verdict.reasons) print(`  - ${r}`);

  const outDir = join(ROOT, 'bench-results');
  mkdirSync(outDir, { recursive: true });
  const outFile = join(outDir, 'soak.json');
  writeFileSync(
    outFile,
    `${JSON.stringify(
      {
        finishedAt: new Date().toISOString(),
        bundle: bundleIdentity,
        config: {
          minutes: MINUTES,
          quick: QUICK,
          warmupMs: WARMUP_MS,
          sampleEveryMs: SAMPLE_EVERY_MS,
          modelWorkers: MODEL_WORKERS,
          gitWorkers: GIT_WORKERS,
          refsWorkers: REFS_WORKERS,
          faultShare: FAULT_SHARE,
          abortShare: ABORT_SHARE,
          upstreamTimeout: UPSTREAM_TIMEOUT,
          thresholds: { rssGrowthFraction: RSS_GROWTH_FRACTION, rssGrowthFloorBytes: RSS_GROWTH_FLOOR_BYTES, rssTrendAllowancePerMinute: RSS_TREND_ALLOWANCE_PER_MINUTE, fdQuietMargin: FD_QUIET_MARGIN, fdTrendAllowancePerMinute: FD_TREND_ALLOWANCE_PER_MINUTE },
          node: process.version,
        },
        verdict,
        client: Object.fromEntries(tallies),
        faultOutcomes: Object.fromEntries(faultOutcomes),
        modelRequestsSent,
        unexpectedTotal,
        unexpected: unexpectedDetails,
        accessLogErrors: Object.fromEntries(proxy.logErrors),
        accessLogRequests: Object.fromEntries(proxy.logCounts),
        crash: crash ?? null,
        samples,
      },
      null,
      2,
    )}\n`,
  );
  print(`  samples written to ${outFile}`);
  stopping = true;
  return verdict.pass ? 0 : 1;
}

async function main(): Promise<void> {
  let interrupted = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    process.stderr.write(`\nsoak: ${signal}, cleaning up\n`);
    void cleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let deadline: NodeJS.Timeout | undefined;
  try {
    process.exitCode = await Promise.race([
      soak(),
      new Promise<never>((_, reject) => {
        deadline = setTimeout(() => reject(new SoakAbort(`did not finish within ${HARD_DEADLINE_MS / 60_000} min`)), HARD_DEADLINE_MS);
      }),
    ]);
  } catch (err) {
    if (!interrupted) {
      const message = err instanceof SoakAbort ? err.message : `${(err as Error)?.message ?? String(err)}\n\n${(err as Error)?.stack ?? ''}`;
      process.stderr.write(`\nsoak FAILED: ${message}\n`);
      process.exitCode = 1;
    }
  } finally {
    clearTimeout(deadline);
    running = false;
    resume();
    await cleanup();
  }
  // Workers still sleeping or a straggling socket must not keep the process up.
  if (!interrupted) setTimeout(() => process.exit(), 2000).unref();
}

void main();
