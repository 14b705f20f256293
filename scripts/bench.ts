// `npm run bench`: what the proxy adds, measured against going direct to the same local
// upstream in the same run, the two alternating so that machine noise hits both alike.
// Prints a table and writes bench-results/bench.json. Loopback only; bounded in time.
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { completionJson, sseEvent, chunk, startModelUpstream, type ModelHandler } from '../test/support/model-upstream.ts';
import { ROOT, startProxy } from '../test/support/proxy-process.ts';
import { makeTestPki } from '../test/support/tls.ts';
import { startUpstream } from '../test/support/upstream.ts';

const MiB = 1024 * 1024;
const KEY = `sk-bench-${randomBytes(12).toString('hex')}`;
const MODEL = 'bench-model';
const CALLS = Number(process.env.BENCH_CALLS ?? 2000);
const STREAMS = Number(process.env.BENCH_STREAMS ?? 500);
const PUSH_MIB = Number(process.env.BENCH_PUSH_MIB ?? 256);

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
const sortNum = (a: number[]) => [...a].sort((x, y) => x - y);
const ms = (ns: bigint) => Number(ns) / 1e6;

/** One request; resolves with time to first body byte and total time, in ms. */
function timed(req: ClientRequest, body: Buffer | undefined): Promise<{ ttfb: number; total: number; status: number }> {
  const t0 = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    req.on('error', reject);
    req.on('response', (res: IncomingMessage) => {
      let ttfb: number | undefined;
      res.on('data', () => (ttfb ??= ms(process.hrtime.bigint() - t0)));
      res.on('end', () => resolve({ ttfb: ttfb ?? 0, total: ms(process.hrtime.bigint() - t0), status: res.statusCode ?? 0 }));
    });
    req.end(body);
  });
}

/** Streams `mib` MiB of incompressible data with backpressure; resolves with seconds taken. */
function pushBody(req: ClientRequest, mib: number): Promise<{ seconds: number; ok: boolean }> {
  const block = randomBytes(MiB);
  const hash = createHash('sha256');
  const t0 = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (s: string) => (text += s));
      res.on('end', () => {
        const got = JSON.parse(text) as { sha256: string };
        resolve({ seconds: ms(process.hrtime.bigint() - t0) / 1000, ok: got.sha256 === hash.digest('hex') });
      });
    });
    let i = 0;
    const write = () => {
      while (i < mib) {
        block.writeUInt32BE(i++, 0);
        hash.update(block);
        if (i === mib) return void req.end(block);
        if (!req.write(block)) return void req.once('drain', write);
      }
    };
    write();
  });
}

async function main(): Promise<void> {
  const pki = makeTestPki();
  const answer = completionJson(MODEL).replace('Hello from the fake upstream.', 'x'.repeat(700)); // about 1 KB
  const bench: ModelHandler = (_req, res, recorded) => {
    if ((JSON.parse(recorded.body.toString()) as { stream?: boolean }).stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sseEvent(chunk(MODEL, { content: 'first' })));
      res.end(sseEvent('[DONE]'));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
    res.end(answer);
  };
  const modelUp = await startModelUpstream(pki, '/v1', bench);
  const gitUp = await startUpstream(pki);
  const proxy = await startProxy({
    env: { GIT_HOST_A: gitUp.hostKey, GIT_HOST_A_TOKEN: KEY, NODE_EXTRA_CA_CERTS: pki.caFile, UPSTREAM_BASE_URL: modelUp.baseUrl, UPSTREAM_API_KEY: KEY, UPSTREAM_ALLOWED_MODELS: MODEL },
    args: ['--git-auth-listen', '127.0.0.1:0', '--model-gateway-listen', '127.0.0.1:0'],
    listeners: ['git', 'model'],
  });
  const httpsAgent = new HttpsAgent({ keepAlive: true, ca: pki.caPem, maxSockets: 1 });
  const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
  const results: Record<string, unknown> = {};
  const rows: string[][] = [];

  try {
    // Model call: non-streamed, 30 KB request body, about 1 KB answer, sequential.
    const body = Buffer.from(JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'y'.repeat(30 * 1024) }] }));
    const direct = () => timed(httpsRequest({ host: '127.0.0.1', port: modelUp.port, method: 'POST', path: '/v1/chat/completions', agent: httpsAgent, headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` } }), body);
    const proxied = () => timed(httpRequest({ host: '127.0.0.1', port: proxy.ports.model, method: 'POST', path: '/v1/chat/completions', agent: httpAgent, headers: { 'content-type': 'application/json' } }), body);
    for (let i = 0; i < 200; i++) {
      await direct(); // warm-up: connections, TLS sessions, JIT
      await proxied();
    }
    const d: number[] = [];
    const p: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      d.push((await direct()).total);
      p.push((await proxied()).total);
    }
    const [ds, ps] = [sortNum(d), sortNum(p)];
    const call = { direct_p50_ms: percentile(ds, 50), direct_p99_ms: percentile(ds, 99), proxy_p50_ms: percentile(ps, 50), proxy_p99_ms: percentile(ps, 99), calls: CALLS };
    results.model_call = { ...call, added_p50_ms: call.proxy_p50_ms - call.direct_p50_ms, added_p99_ms: call.proxy_p99_ms - call.direct_p99_ms };
    rows.push(['model call, 30 KB body, p50 (ms)', call.direct_p50_ms.toFixed(3), call.proxy_p50_ms.toFixed(3), `+${(call.proxy_p50_ms - call.direct_p50_ms).toFixed(3)}`]);
    rows.push(['model call, 30 KB body, p99 (ms)', call.direct_p99_ms.toFixed(3), call.proxy_p99_ms.toFixed(3), `+${(call.proxy_p99_ms - call.direct_p99_ms).toFixed(3)}`]);

    // Stream: time to first byte.
    const sbody = Buffer.from(JSON.stringify({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'hi' }] }));
    const sd: number[] = [];
    const sp: number[] = [];
    for (let i = 0; i < STREAMS; i++) {
      sd.push((await timed(httpsRequest({ host: '127.0.0.1', port: modelUp.port, method: 'POST', path: '/v1/chat/completions', agent: httpsAgent, headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` } }), sbody)).ttfb);
      sp.push((await timed(httpRequest({ host: '127.0.0.1', port: proxy.ports.model, method: 'POST', path: '/v1/chat/completions', agent: httpAgent, headers: { 'content-type': 'application/json' } }), sbody)).ttfb);
    }
    const [sds, sps] = [sortNum(sd), sortNum(sp)];
    results.stream_ttfb = { direct_p50_ms: percentile(sds, 50), proxy_p50_ms: percentile(sps, 50), direct_p99_ms: percentile(sds, 99), proxy_p99_ms: percentile(sps, 99), streams: STREAMS };
    rows.push(['stream time to first byte, p50 (ms)', percentile(sds, 50).toFixed(3), percentile(sps, 50).toFixed(3), `+${(percentile(sps, 50) - percentile(sds, 50)).toFixed(3)}`]);
    rows.push(['stream time to first byte, p99 (ms)', percentile(sds, 99).toFixed(3), percentile(sps, 99).toFixed(3), `+${(percentile(sps, 99) - percentile(sds, 99)).toFixed(3)}`]);

    // Pack upload: PUSH_MIB MiB POST to git-receive-pack, direct then proxied, twice.
    const up = { direct: [] as number[], proxy: [] as number[] };
    for (let round = 0; round < 2; round++) {
      const a = await pushBody(httpsRequest({ host: '127.0.0.1', port: gitUp.port, method: 'POST', path: '/o/r.git/git-receive-pack', ca: pki.caPem, agent: false, headers: { authorization: `Bearer ${KEY}` } }), PUSH_MIB);
      const b = await pushBody(httpRequest({ host: '127.0.0.1', port: proxy.ports.git, method: 'POST', path: `/${gitUp.hostKey}/o/r.git/git-receive-pack`, agent: false }), PUSH_MIB);
      if (!a.ok || !b.ok) throw new Error('a pack upload arrived corrupted');
      up.direct.push(PUSH_MIB / a.seconds);
      up.proxy.push(PUSH_MIB / b.seconds);
    }
    const best = (xs: number[]) => Math.max(...xs);
    results.pack_upload = { mib: PUSH_MIB, direct_mib_s: best(up.direct), proxy_mib_s: best(up.proxy), ratio: best(up.proxy) / best(up.direct), proxy_peak_rss_mib: proxy.peakRssBytes() / MiB };
    rows.push([`pack upload ${PUSH_MIB} MiB (MiB/s, best of 2)`, best(up.direct).toFixed(0), best(up.proxy).toFixed(0), `x${(best(up.proxy) / best(up.direct)).toFixed(2)}`]);
    rows.push(['proxy peak RSS over the whole run (MiB)', '', (proxy.peakRssBytes() / MiB).toFixed(1), '']);
  } finally {
    httpsAgent.destroy();
    httpAgent.destroy();
    await proxy.stop();
    await Promise.all([modelUp.close(), gitUp.close()]);
    pki.cleanup();
  }

  const widths = [44, 10, 12, 10];
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' ');
  console.log(line(['scenario', 'direct', 'via proxy', 'added']));
  for (const r of rows) console.log(line(r));
  const outDir = join(ROOT, 'bench-results');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'bench.json'), `${JSON.stringify({ node: process.version, when: new Date().toISOString(), ...results }, null, 2)}\n`);
  console.log(`\nwritten: bench-results/bench.json (node ${process.version})`);
}

main().catch((err: unknown) => {
  console.error(`bench failed: ${(err as Error)?.stack ?? String(err)}`);
  process.exitCode = 1;
});
