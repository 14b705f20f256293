// `npm run bench:bodies`: what does the gateway keep of a call's request body, and what do many
// large bodies at once cost it? Two scenarios (BENCH_BODIES_ONLY=hold or burst runs one).
//
// hold: a body (up to --max-request-body, 32 MiB) is needed only until the upstream's answer
// begins. N streams (BENCH_BODY_STREAMS, 16) are opened with a small body, then N more with a
// BENCH_BODY_MIB (31) MiB whitespace-padded body each (JSON whitespace: no tokens billed), and
// held open. The measure is the gateway's RSS while each set is open, after a full collection
// (the heap snapshot taken on SIGUSR2 with --heapsnapshot-signal begins with one): memory held
// outside the JS heap, such as a TLS socket's write buffer kept for the life of a pooled upstream
// connection, shows only there. The goal: RSS with the large bodies within 100 MiB of RSS with
// the small ones. The buffers of at least the body's size still reachable in the heap are
// counted too (the body itself kept, SECURITY rule 52).
//
// burst: BENCH_BURST_CALLS (40) calls sent at once, each with a body of exactly BENCH_BURST_MIB
// (32) MiB of text in messages (the largest --max-request-body admits by default; text, so that
// parsing it makes strings as a real conversation does; BENCH_BURST_TEXT=wide puts a character
// beyond Latin-1 in each message, the costlier case), to a fresh gateway with its default
// --max-held-request-bytes (BENCH_MAX_HELD sets the flag). The upstream reads each call whole
// and holds its answer until every call was either received by it or refused by the gateway, so
// that every admitted body is held at once, the worst moment. The measure: the gateway's peak
// RSS (VmHWM), how many calls were admitted and how many answered 503, and the peak above idle
// per admitted body. The goal: a peak within the Deployment's 768 MiB memory limit.
//
// A benchmark: it prints pass or miss and exits 0 either way. Loopback only; every loop is
// bounded. The snapshot is written to a temporary directory.
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { request, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { largeArrayBuffers, takeHeapSnapshot } from '../test/support/heap-snapshot.ts';
import { startProxy, type ProxyProcess } from '../test/support/proxy-process.ts';
import { makeTestPki, type TestPki } from '../test/support/tls.ts';
import { rssBytes } from './bench/procs.ts';

const STREAMS = Number(process.env.BENCH_BODY_STREAMS ?? 16);
const BODY_MIB = Number(process.env.BENCH_BODY_MIB ?? 31);
const BURST_CALLS = Number(process.env.BENCH_BURST_CALLS ?? 40);
const BURST_MIB = Number(process.env.BENCH_BURST_MIB ?? 32);
const MAX_HELD = process.env.BENCH_MAX_HELD;
/** ascii, or wide: each message's text also holds one character beyond Latin-1, so that V8 keeps it as a two-byte string (twice the bytes of its UTF-8). */
const BURST_TEXT = process.env.BENCH_BURST_TEXT ?? 'ascii';
const ONLY = process.env.BENCH_BODIES_ONLY;
const MiB = 1024 * 1024;
/** The goal of hold: RSS with the large bodies at most this much above RSS with small ones. */
const GOAL_MIB = 100;
/** The goal of burst: the Deployment's memory limit (deploy/base/deployment.yaml). */
const POD_LIMIT_MIB = 768;
/** How long burst waits for every call to be received upstream or refused. */
const BURST_DEADLINE_MS = 180_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function body(padBytes: number): Buffer {
  const head = '{"model":"gpt-bench","stream":true,"messages":[{"role":"user","content":"hi"}]';
  return Buffer.concat([Buffer.from(head), Buffer.alloc(padBytes, 0x20), Buffer.from('}')]);
}

/** A conversation of exactly `bytes` bytes: messages of up to 256 KiB of text each (ASCII, or opening with one U+2192 when `wide`). */
function conversation(bytes: number, wide: boolean): Buffer {
  const head = '{"model":"gpt-bench","stream":true,"messages":[';
  const sentence = 'The build failed in the integration suite; here is the whole log of the run again. ';
  // U+2192 is 3 bytes of UTF-8: one in a text makes V8 keep the whole decoded body, and the
  // message's string, as two bytes a character.
  const mark = wide ? '\u2192' : '';
  const markBytes = Buffer.byteLength(mark);
  const message = (text: number) => `{"role":"user","content":"${text >= markBytes ? mark : ''}${sentence.repeat(Math.ceil(text / sentence.length)).slice(0, text >= markBytes ? text - markBytes : text)}"}`;
  const framing = Buffer.byteLength(message(0));
  const parts: string[] = [];
  let left = bytes - head.length - 2; // the closing ]}
  while (left > 0) {
    const comma = parts.length > 0 ? 1 : 0;
    const text = Math.min(256 * 1024, left - framing - comma);
    if (text < 0) throw new Error(`cannot frame ${bytes} bytes`);
    parts.push(message(text));
    left -= text + framing + comma;
  }
  const out = Buffer.from(`${head}${parts.join(',')}]}`);
  if (out.length !== bytes) throw new Error(`conversation is ${out.length} bytes, not ${bytes}`);
  return out;
}

const FIRST_EVENT = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-bench","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n';

/**
 * The fake provider: it reads each call whole, then answers with the first event of a stream and
 * holds it open (`held`). While `holding`, it keeps its answers back until release().
 */
async function startUpstream(pki: TestPki) {
  const held: ServerResponse[] = [];
  let waiting: ServerResponse[] = [];
  let holding = false;
  let received = 0;
  const answer = (res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(FIRST_EVENT);
    held.push(res);
  };
  const server: Server = createServer({ key: pki.keyPem, cert: pki.certPem, keepAlive: true }, (req, res) => {
    req.resume();
    req.once('end', () => {
      received++;
      if (holding) waiting.push(res);
      else answer(res);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    baseUrl: `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    received: () => received,
    hold(): void {
      holding = true;
    },
    release(): void {
      holding = false;
      for (const res of waiting) answer(res);
      waiting = [];
    },
    endStreams(): void {
      for (const res of held.splice(0)) res.end();
    },
    close(): void {
      server.closeAllConnections();
      server.close();
    },
  };
}
type Upstream = Awaited<ReturnType<typeof startUpstream>>;

function gateway(upstream: Upstream, pki: TestPki, extraEnv: Record<string, string>, args: string[] = []): Promise<ProxyProcess> {
  return startProxy({
    env: { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-bench', UPSTREAM_ALLOWED_MODELS: 'gpt-bench', UPSTREAM_CA_FILE: pki.caFile, ...extraEnv },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off', ...args],
    listeners: ['model'],
  });
}

/** hold: the RSS of N open streams after small bodies, then after large ones. */
async function holdScenario(pki: TestPki, dir: string): Promise<void> {
  const upstream = await startUpstream(pki);
  const proxy = await gateway(upstream, pki, { NODE_OPTIONS: '--heapsnapshot-signal=SIGUSR2' });
  const port = proxy.ports.model!;
  const open = async (payload: Buffer): Promise<() => void> => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json', 'content-length': payload.length }, agent: false });
    req.end(payload);
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
    await once(res, 'data'); // the first event: the stream is open and relaying
    return () => req.destroy();
  };
  const measure = async (payload: Buffer) => {
    const closers: (() => void)[] = [];
    for (let i = 0; i < STREAMS; i++) closers.push(await open(payload));
    const rssOpen = rssBytes(proxy.pid);
    const reachable = largeArrayBuffers(await takeHeapSnapshot(dir, () => proxy.signal('SIGUSR2')), Math.max(payload.length, 1024 * 1024));
    const rssCollected = rssBytes(proxy.pid); // after the snapshot's full collection
    for (const close of closers) close();
    upstream.endStreams();
    return { rssOpen, rssCollected, reachable };
  };
  try {
    await open(body(0)).then((close) => close()); // warm up
    const small = await measure(body(0));
    const large = await measure(body(BODY_MIB * MiB));
    console.log(`hold: ${STREAMS} streams held open, each after a request body of the size named; gateway dist/proxy.js`);
    for (const [name, m, size] of [['~90 B body', small, '1 MiB'], [`${BODY_MIB} MiB body`, large, `${BODY_MIB} MiB`]] as const) {
      console.log(
        `${name.padEnd(14)} RSS ${(m.rssCollected / MiB).toFixed(0).padStart(5)} MiB after a full collection (${(m.rssOpen / MiB).toFixed(0)} MiB before it)   buffers of >= ${size} reachable: ${m.reachable}`,
      );
    }
    const grown = (large.rssCollected - small.rssCollected) / MiB;
    console.log(`goal: RSS with ${BODY_MIB} MiB bodies within ${GOAL_MIB} MiB of RSS with small ones: ${grown.toFixed(0)} MiB more: ${grown <= GOAL_MIB ? 'pass' : 'miss'}`);
  } finally {
    await proxy.stop();
    upstream.close();
  }
}

type BurstOutcome = { readonly status: number; readonly retryAfter?: string; readonly code?: string; readonly close?: () => void };

/** One call of the burst: 200 once its stream's first event is in, the proxy's own answer (503), or 0 when the connection broke first. */
function burstCall(port: number, payload: Buffer): Promise<BurstOutcome> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json', 'content-length': payload.length }, agent: false });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ status: 0, code: err.code ?? 'error' }));
    req.once('response', (res) => {
      const status = res.statusCode ?? 0;
      if (status === 200) return void res.once('data', () => resolve({ status, close: () => req.destroy() }));
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', () => resolve({ status }));
      res.once('end', () => {
        const code = /"code":"([^"]*)"/.exec(Buffer.concat(chunks).toString())?.[1];
        resolve({ status, retryAfter: res.headers['retry-after'], ...(code === undefined ? {} : { code }) });
      });
    });
    req.end(payload);
  });
}

/** burst: many maximum-size bodies at once, every admitted one held until all are in or refused. */
async function burstScenario(pki: TestPki): Promise<void> {
  const upstream = await startUpstream(pki);
  const cap = MAX_HELD === undefined ? [] : ['--max-held-request-bytes', MAX_HELD];
  const proxy = await gateway(upstream, pki, {}, cap);
  const port = proxy.ports.model!;
  const payload = conversation(BURST_MIB * MiB, BURST_TEXT === 'wide');
  try {
    (await burstCall(port, body(0))).close?.(); // warm up
    upstream.endStreams();
    await sleep(500);
    const idle = rssBytes(proxy.pid);
    upstream.hold();
    const before = upstream.received();
    const outcomes: BurstOutcome[] = [];
    const started = performance.now();
    const calls = Array.from({ length: BURST_CALLS }, () => burstCall(port, payload).then((o) => void outcomes.push(o)));
    // Every call is either in the upstream's hands (its body held until the answer begins) or answered.
    while (upstream.received() - before + outcomes.length < BURST_CALLS && performance.now() - started < BURST_DEADLINE_MS) await sleep(50);
    const settledMs = performance.now() - started;
    const peak = proxy.peakRssBytes();
    const heldAtOnce = upstream.received() - before;
    upstream.release();
    await Promise.race([Promise.all(calls), sleep(30_000)]);
    for (const o of outcomes) o.close?.();
    upstream.endStreams();
    const count = (f: (o: BurstOutcome) => boolean) => outcomes.filter(f).length;
    const refused = outcomes.filter((o) => o.status === 503);
    const others = outcomes.filter((o) => o.status !== 200 && o.status !== 503).map((o) => `${o.status}${o.code ? ` ${o.code}` : ''}`);
    const retryAfter = [...new Set(refused.map((o) => o.retryAfter ?? 'none'))].join(', ');
    const codes = [...new Set(refused.map((o) => o.code ?? 'none'))].join(', ');
    const perBody = heldAtOnce > 0 ? (peak - idle) / heldAtOnce : 0;
    console.log(`burst: ${BURST_CALLS} calls at once, each a ${BURST_MIB} MiB body of ${BURST_TEXT === 'wide' ? 'text beyond Latin-1' : 'ASCII text'} in messages, to a fresh gateway (--max-held-request-bytes ${MAX_HELD ?? 'default'}); the upstream held its answers until all ${BURST_CALLS} were received or refused (${(settledMs / 1000).toFixed(1)} s)`);
    console.log(`admitted ${count((o) => o.status === 200)} (bodies held at once: ${heldAtOnce}), 503: ${refused.length}${refused.length > 0 ? ` (code ${codes}, Retry-After ${retryAfter})` : ''}, other: ${others.length}${others.length > 0 ? ` (${others.join(', ')})` : ''}, unanswered: ${BURST_CALLS - outcomes.length}`);
    console.log(`gateway RSS idle ${(idle / MiB).toFixed(0)} MiB, peak ${(peak / MiB).toFixed(0)} MiB (VmHWM); peak above idle per body held: ${(perBody / MiB).toFixed(1)} MiB (${(perBody / payload.length).toFixed(2)} x its bytes)`);
    console.log(`goal: peak RSS within the Deployment's ${POD_LIMIT_MIB} MiB memory limit: ${peak / MiB <= POD_LIMIT_MIB ? 'pass' : 'miss'}`);
  } finally {
    await proxy.stop();
    upstream.close();
  }
}

async function main(): Promise<void> {
  const pki = makeTestPki();
  const dir = mkdtempSync(join(tmpdir(), 'bench-bodies-'));
  process.chdir(dir); // where the gateway writes its heap snapshots
  try {
    if (ONLY === undefined || ONLY === 'hold') await holdScenario(pki, dir);
    if (ONLY === undefined || ONLY === 'burst') await burstScenario(pki);
  } finally {
    pki.cleanup();
    process.chdir(tmpdir());
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
