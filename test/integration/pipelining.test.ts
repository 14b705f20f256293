// Pipelined requests on one client connection, against the proxy, on both listeners: a
// request is not sent upstream before the one ahead of it on the same connection has finished,
// and a client that disconnects cancels everything it had queued. Before, each pipelined request
// opened its own upstream connection at once, and those queued behind the first outlived the
// client by minutes (Node never closes a response still queued behind another).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { startBothListeners, type BothListeners } from '../support/both-listeners.ts';
import { send } from '../support/http-client.ts';
import type { ModelUpstream } from '../support/model-upstream.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import type { TestUpstream } from '../support/upstream.ts';

const CRLF = '\r\n';
const BURST = 40;
let gitUpstream: TestUpstream;
let modelUpstream: ModelUpstream;
let proxy: ProxyProcess;
let both: BothListeners<TestUpstream> | undefined;

before(async () => {
  // pipelined_dropped is a debug line: written with --log-level debug.
  both = await startBothListeners({ args: ['--log-level', 'debug'] });
  ({ gitUpstream, modelUpstream, proxy } = both);
});

after(() => both?.close());

const gitRequest = () => [`GET /${gitUpstream.hostKey}/org/repo.git/info/refs?service=git-upload-pack HTTP/1.1`, 'Host: proxy', '', ''].join(CRLF);
const modelBody = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] });
const modelRequest = () => ['POST /v1/chat/completions HTTP/1.1', 'Host: proxy', 'Content-Type: application/json', `Content-Length: ${Buffer.byteLength(modelBody)}`, '', modelBody].join(CRLF);

test(`pipelining, git listener: ${BURST} pipelined requests reach the upstream one at a time, and a client that leaves cancels all it had queued (no upstream connection left)`, async () => {
  let heldSocket: Socket | undefined;
  let arrived!: () => void;
  const first = new Promise<void>((resolve) => (arrived = resolve));
  gitUpstream.handle((req) => {
    heldSocket = req.socket; // never answered: the first request stays in progress
    arrived();
  });
  const before = gitUpstream.requests.length;
  try {
    const client = connect(proxy.ports.git!, '127.0.0.1');
    client.write(Array.from({ length: BURST }, gitRequest).join(''));
    await first;
    // A canary on another connection, answered by the default handler once released below: by
    // the time it has been answered, any pipelined request the proxy had started is upstream too.
    gitUpstream.handle(undefined);
    assert.equal((await send(proxy.ports.git!, 'GET', `/${gitUpstream.hostKey}/org/repo.git/info/refs?service=git-upload-pack`)).status, 200);
    assert.equal(gitUpstream.requests.length, before + 2, 'only the first pipelined request (and the canary) reached the upstream');
    const closed = once(heldSocket!, 'close');
    client.destroy();
    // The client left: its request in progress is torn down upstream, and nothing queued follows.
    const record = await proxy.waitForRecord((r) => r.event === 'pipelined_dropped' && r.listener === 'git');
    assert.equal(record.requests, BURST - 1);
    await closed;
    assert.equal((await send(proxy.ports.git!, 'GET', `/${gitUpstream.hostKey}/org/repo.git/info/refs?service=git-upload-pack`)).status, 200);
    assert.equal(gitUpstream.requests.length, before + 3, 'no queued request was sent after the client left');
  } finally {
    gitUpstream.handle(undefined);
  }
});

test(`pipelining, model listener: ${BURST} pipelined model calls are sent one at a time, and a client that leaves cancels all it had queued`, async () => {
  let arrived!: () => void;
  const first = new Promise<void>((resolve) => (arrived = resolve));
  let heldSocket: Socket | undefined;
  modelUpstream.script((req) => {
    heldSocket = req.socket; // never answered
    arrived();
  });
  const before = modelUpstream.requests.length;
  const client = connect(proxy.ports.model!, '127.0.0.1');
  client.write(Array.from({ length: BURST }, modelRequest).join(''));
  await first;
  const canary = await send(proxy.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json' }, body: modelBody });
  assert.equal(canary.status, 200);
  assert.equal(modelUpstream.requests.length, before + 2, 'only the first pipelined call (and the canary) reached the upstream');
  const closed = once(heldSocket!, 'close');
  client.destroy();
  const record = await proxy.waitForRecord((r) => r.event === 'pipelined_dropped' && r.listener === 'model');
  assert.equal(record.requests, BURST - 1);
  await closed; // the call in progress was torn down upstream
  assert.equal((await send(proxy.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json' }, body: modelBody })).status, 200);
  assert.equal(modelUpstream.requests.length, before + 3, 'no queued call was sent after the client left');
});

test('pipelining: pipelined requests are answered in order, each once the one ahead has finished', async () => {
  const client = connect(proxy.ports.git!, '127.0.0.1');
  const chunks: Buffer[] = [];
  client.on('data', (c: Buffer) => chunks.push(c));
  const closed = once(client, 'close');
  const last = [`GET /healthz HTTP/1.1`, 'Host: proxy', 'Connection: close', '', ''].join(CRLF);
  client.write(gitRequest() + gitRequest() + last);
  await closed;
  const statuses = [...Buffer.concat(chunks).toString('latin1').matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
  assert.deepEqual(statuses, [200, 200, 200]);
});
