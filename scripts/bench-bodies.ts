// `npm run bench:bodies`: what does the gateway keep of a call's request body while its stream
// is open? A body (up to --max-request-body, 32 MiB) is needed only until the upstream's answer
// begins. N streams (BENCH_BODY_STREAMS, 16) are opened with a small body, then N more with a
// BENCH_BODY_MIB (31) MiB whitespace-padded body each (JSON whitespace: no tokens billed), and
// held open. The measure is the gateway's RSS while each set is open, after a full collection
// (the heap snapshot taken on SIGUSR2 with --heapsnapshot-signal begins with one): memory held
// outside the JS heap, such as a TLS socket's write buffer kept for the life of a pooled upstream
// connection, shows only there. The goal: RSS with the large bodies within 100 MiB of RSS with
// the small ones. The buffers of at least the body's size still reachable in the heap are
// counted too (the body itself kept, SECURITY rule 52). A benchmark: it prints pass or miss and
// exits 0 either way. Loopback only; every loop is bounded. The snapshot is written to a
// temporary directory.
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { request, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { largeArrayBuffers, takeHeapSnapshot } from '../test/support/heap-snapshot.ts';
import { startProxy } from '../test/support/proxy-process.ts';
import { makeTestPki } from '../test/support/tls.ts';
import { rssBytes } from './bench/procs.ts';

const STREAMS = Number(process.env.BENCH_BODY_STREAMS ?? 16);
const BODY_MIB = Number(process.env.BENCH_BODY_MIB ?? 31);
const MiB = 1024 * 1024;
/** The goal: RSS with the large bodies at most this much above RSS with small ones. */
const GOAL_MIB = 100;

function body(padBytes: number): Buffer {
  const head = '{"model":"gpt-bench","stream":true,"messages":[{"role":"user","content":"hi"}]';
  return Buffer.concat([Buffer.from(head), Buffer.alloc(padBytes, 0x20), Buffer.from('}')]);
}

async function main(): Promise<void> {
  const pki = makeTestPki();
  const dir = mkdtempSync(join(tmpdir(), 'bench-bodies-'));
  process.chdir(dir); // where the gateway writes its heap snapshots
  const held: ServerResponse[] = [];
  // The upstream reads each call whole, answers with the first event of a stream, and holds it.
  const upstream: Server = createServer({ key: pki.keyPem, cert: pki.certPem, keepAlive: true }, (req, res) => {
    req.resume();
    req.once('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-bench","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n');
      held.push(res);
    });
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  const proxy = await startProxy({
    env: {
      UPSTREAM_BASE_URL: `https://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`,
      UPSTREAM_API_KEY: 'sk-bench',
      UPSTREAM_ALLOWED_MODELS: 'gpt-bench',
      UPSTREAM_CA_FILE: pki.caFile,
      NODE_OPTIONS: '--heapsnapshot-signal=SIGUSR2',
    },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off'],
    listeners: ['model'],
  });
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
    for (const res of held.splice(0)) res.end();
    return { rssOpen, rssCollected, reachable };
  };
  try {
    await open(body(0)).then((close) => close()); // warm up
    const small = await measure(body(0));
    const large = await measure(body(BODY_MIB * MiB));
    console.log(`${STREAMS} streams held open, each after a request body of the size named; gateway dist/proxy.js`);
    for (const [name, m, size] of [['~90 B body', small, '1 MiB'], [`${BODY_MIB} MiB body`, large, `${BODY_MIB} MiB`]] as const) {
      console.log(
        `${name.padEnd(14)} RSS ${(m.rssCollected / MiB).toFixed(0).padStart(5)} MiB after a full collection (${(m.rssOpen / MiB).toFixed(0)} MiB before it)   buffers of >= ${size} reachable: ${m.reachable}`,
      );
    }
    const grown = (large.rssCollected - small.rssCollected) / MiB;
    console.log(`goal: RSS with ${BODY_MIB} MiB bodies within ${GOAL_MIB} MiB of RSS with small ones: ${grown.toFixed(0)} MiB more: ${grown <= GOAL_MIB ? 'pass' : 'miss'}`);
  } finally {
    await proxy.stop();
    upstream.closeAllConnections();
    upstream.close();
    pki.cleanup();
    process.chdir(tmpdir());
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
