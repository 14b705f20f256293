// A 256 MiB push body streamed through the bundle: the upstream receives exactly what was sent
// and the proxy's memory does not grow with the body. Throughput is reported as a diagnostic;
// its ratio against going direct is `npm run bench`'s pack scenario (speed goals belong to the
// benchmark, not to assertions, and a direct upload here cost the suite a second 256 MiB over
// TLS, digested twice).
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { after, before, test } from 'node:test';
import { startProxy, type ProxyProcess } from '../support/proxy-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { startUpstream, type TestUpstream } from '../support/upstream.ts';

const MiB = 1024 * 1024;
const BODY_MIB = 256;
const TOKEN = `tok_${randomBytes(12).toString('hex')}`;

let pki: TestPki;
let upstream: TestUpstream;
let proxy: ProxyProcess;

before(async () => {
  pki = makeTestPki();
  upstream = await startUpstream(pki);
  proxy = await startProxy({ env: { GIT_HOST_A: upstream.hostKey, GIT_HOST_A_TOKEN: TOKEN, NODE_EXTRA_CA_CERTS: pki.caFile } });
});

after(async () => {
  await proxy?.stop();
  await upstream?.close();
  pki?.cleanup();
});

/** Streams BODY_MIB MiB (copies of a random block, each stamped with its index) with backpressure. */
function pump(req: ClientRequest): Promise<{ sha256: string; response: IncomingMessage; seconds: number }> {
  const block = randomBytes(MiB);
  const hash = createHash('sha256');
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    req.on('error', reject);
    req.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (c: Buffer) => chunks.push(c));
      response.on('end', () => {
        (response as IncomingMessage & { text?: string }).text = Buffer.concat(chunks).toString();
        resolve({ sha256: hash.digest('hex'), response, seconds: Number(process.hrtime.bigint() - started) / 1e9 });
      });
    });
    let i = 0;
    const write = () => {
      while (i < BODY_MIB) {
        // A copy each: a written buffer may still be queued, unsent, when write() returns (Node 24
        // holds it without a copy), so the block itself must not change after it was written.
        const chunk = Buffer.from(block);
        chunk.writeUInt32BE(i, 0);
        hash.update(chunk);
        i++;
        if (i === BODY_MIB) return void req.end(chunk);
        if (!req.write(chunk)) return void req.once('drain', write);
      }
    };
    write();
  });
}

test('a 256 MiB push body streams through intact while the proxy stays far below the body size in memory', async (t) => {
  const path = '/org/repo.git/git-receive-pack';
  const headers = { 'content-type': 'application/x-git-receive-pack-request' };
  // What the runtime itself takes before any body (49 MiB on Node 20, 62 MiB on Node 24 and 26):
  // the bound is on what the push adds to it.
  const atStart = proxy.peakRssBytes();

  const viaProxy = await pump(httpRequest({ host: '127.0.0.1', port: proxy.ports.git, method: 'POST', path: `/${upstream.hostKey}${path}`, headers }));

  assert.equal(viaProxy.response.statusCode, 200);
  assert.deepEqual(JSON.parse((viaProxy.response as IncomingMessage & { text: string }).text), { bytes: BODY_MIB * MiB, sha256: viaProxy.sha256 });
  assert.equal(upstream.requests.at(-1)?.headers.authorization, `Bearer ${TOKEN}`, 'the upstream got the credential');
  const peak = proxy.peakRssBytes();
  const grown = peak - atStart;
  t.diagnostic(`through the proxy ${(BODY_MIB / viaProxy.seconds).toFixed(0)} MiB/s, proxy peak RSS ${(peak / MiB).toFixed(1)} MiB, ${(grown / MiB).toFixed(1)} MiB above its ${(atStart / MiB).toFixed(1)} MiB at start`);
  assert.ok(atStart > 0, 'peak RSS was read');
  assert.ok(grown < 96 * MiB, `the proxy's peak RSS grew ${(grown / MiB).toFixed(1)} MiB during the push: it must stay far below the ${BODY_MIB} MiB body`);
});
