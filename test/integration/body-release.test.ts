// A model call's request body is released once the upstream's answer has begun (it can no longer
// be sent again), so a long stream does not keep up to --max-request-body of it alive. Checked on
// what the BUILT gateway holds: while streams are open it writes a heap snapshot (which begins
// with a full collection), and no buffer of the body's size may be in it.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { request, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { largeArrayBuffers, takeHeapSnapshot } from '../support/heap-snapshot.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { startProxy, type ProxyProcess } from '../support/proxy-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const BODY_BYTES = 6 * 1024 * 1024;
let pki: TestPki;
let upstream: ModelUpstream;
let proxy: ProxyProcess;
let dir: string;

before(async () => {
  pki = makeTestPki();
  // Every call is answered with the first event of a stream, then held open.
  const held: ServerResponse[] = [];
  upstream = await startModelUpstream(pki, '/v1', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n');
    held.push(res);
  });
  dir = mkdtempSync(join(tmpdir(), 'test-body-release-'));
  proxy = await startProxy({
    env: { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-test', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile, NODE_OPTIONS: '--heapsnapshot-signal=SIGUSR2' },
    args: ['--model-gateway-listen', '127.0.0.1:0'],
    listeners: ['model'],
    cwd: dir, // the gateway writes its heap snapshots here
  });
});

after(async () => {
  await proxy?.stop();
  await upstream?.close();
  pki?.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

test('a model call\'s request body is released once the answer has begun: no body-sized buffer is held while its stream is open', async () => {
  const payload = Buffer.concat([Buffer.from('{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]'), Buffer.alloc(BODY_BYTES, 0x20), Buffer.from('}')]);
  const clients = [];
  for (let i = 0; i < 3; i++) {
    const req = request({ host: '127.0.0.1', port: proxy.ports.model!, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json', 'content-length': payload.length }, agent: false });
    req.end(payload);
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    assert.equal(res.statusCode, 200);
    await once(res, 'data'); // relaying: the stream is open
    clients.push(req);
  }
  const held = largeArrayBuffers(await takeHeapSnapshot(dir, () => proxy.signal('SIGUSR2')), BODY_BYTES);
  for (const c of clients) c.destroy();
  assert.equal(held, 0, `${held} buffer(s) of the body's size still reachable in the gateway while its streams are open`);
});
