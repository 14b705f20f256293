// A request body that stops arriving is cut on both listeners of the proxy
// (--body-timeout): after a complete head and one body byte, nothing more. The connection is
// answered 408 and closed, the request is recorded, and on the git listener the upstream request
// it had opened is cut with it. Before, such a connection was held for good (19,980 of them took
// every file descriptor).
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { startBothListeners, type BothListeners } from '../support/both-listeners.ts';
import { statusOf } from '../support/http-client.ts';
import type { ModelUpstream } from '../support/model-upstream.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import type { TestUpstream } from '../support/upstream.ts';

const CRLF = '\r\n';
let gitUpstream: TestUpstream;
let modelUpstream: ModelUpstream;
let proxy: ProxyProcess;
let both: BothListeners<TestUpstream> | undefined;

before(async () => {
  both = await startBothListeners({ args: ['--body-timeout', '300ms'] });
  ({ gitUpstream, modelUpstream, proxy } = both);
});

after(() => both?.close());

/** Sends a head announcing 100 body bytes and one byte of it; resolves with what was read when the proxy closed. */
function stall(port: number, requestLine: string, contentType: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.once('error', () => {});
    socket.once('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.write([requestLine, 'Host: proxy', `Content-Type: ${contentType}`, 'Content-Length: 100', '', '{'].join(CRLF));
  });
}

test('body timeout, git listener: a push body that stops arriving is answered 408, the connection closed, the upstream request cut, and the request recorded', async () => {
  const before = gitUpstream.requests.length;
  let upstreamClosed!: Promise<boolean>;
  gitUpstream.handle((req) => {
    req.resume();
    upstreamClosed = new Promise((resolve) => req.once('close', () => resolve(req.complete)));
  });
  try {
    const raw = await stall(proxy.ports.git!, `POST /${gitUpstream.hostKey}/org/repo.git/git-receive-pack HTTP/1.1`, 'application/x-git-receive-pack-request');
    assert.equal(statusOf(raw), 408, raw.split(CRLF)[0]);
    assert.match(raw, /stopped arriving/);
    const rec = await proxy.waitForRecord((r) => r.listener === 'git' && r.error === 'body_timeout');
    assert.equal(rec.status, 408);
    assert.equal(gitUpstream.requests.length, before + 1);
    assert.equal(await upstreamClosed, false, 'the upstream request was cut before its body was complete');
  } finally {
    gitUpstream.handle(undefined);
  }
});

test('body timeout, model listener: a request body that stops arriving is answered 408, the connection closed, nothing forwarded, and the request recorded', async () => {
  const before = modelUpstream.requests.length;
  const raw = await stall(proxy.ports.model!, 'POST /v1/chat/completions HTTP/1.1', 'application/json');
  assert.equal(statusOf(raw), 408, raw.split(CRLF)[0]);
  assert.match(raw, /body_timeout/);
  const rec = await proxy.waitForRecord((r) => r.listener === 'model' && r.error === 'body_timeout');
  assert.equal(rec.status, 408);
  assert.equal(modelUpstream.requests.length, before);
});
