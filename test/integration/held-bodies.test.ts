// The request-body bytes the process holds at once are capped (--max-held-request-bytes,
// SECURITY rule 100), through the gateway's handler in this process (the harness): calls past the
// cap are answered 503 with Retry-After, their body unread, and recorded; and whatever way a call
// ends, the bytes it held are given back, so the count returns to 0.
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { request } from 'node:http';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { HeldBodies } from '../../src/http/held-bodies.ts';
import { PROTOCOLS } from '../../src/gateway/protocols/table.ts';
import type { ModelRequestRecord } from '../../src/gateway/record.ts';
import { eventually } from '../support/eventually.ts';
import { startGatewayInProcess, TEST_MODEL, type InProcessListener } from '../support/harness.ts';
import { defaultCompletion, startModelUpstream, type ModelRequest, type ModelUpstream } from '../support/model-upstream.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const MiB = 1024 * 1024;
let pki: TestPki;
let upstream: ModelUpstream;

before(async () => {
  pki = makeTestPki();
  upstream = await startModelUpstream(pki);
});
after(async () => {
  await upstream.close();
  pki.cleanup();
});

/** A chat call of exactly `bytes` bytes (its one message padded with text). */
function chatBody(bytes: number): Buffer {
  const empty = JSON.stringify({ model: TEST_MODEL, messages: [{ role: 'user', content: '' }] });
  const body = JSON.stringify({ model: TEST_MODEL, messages: [{ role: 'user', content: 'x'.repeat(bytes - empty.length) }] });
  assert.equal(body.length, bytes);
  return Buffer.from(body);
}

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/**
 * POSTs `body` (with its length, or chunked in `chunks`) and resolves with the answer. A write
 * that fails once the answer is in (the gateway closes a refused call's connection without
 * reading the rest) is not the answer's concern.
 */
function post(port: number, body: Buffer, chunks?: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers = chunks === undefined ? { 'content-type': 'application/json', 'content-length': body.length } : { 'content-type': 'application/json' };
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers, agent: false });
    let answered = false;
    req.on('error', (err) => answered || reject(err));
    req.once('response', (res) => {
      answered = true;
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString() }));
      res.once('error', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString() }));
    });
    if (chunks === undefined) return void req.end(body);
    const size = Math.ceil(body.length / chunks);
    let at = 0;
    const next = (): void => {
      if (req.destroyed || answered) return;
      if (at >= body.length) return void req.end();
      const piece = body.subarray(at, at + size);
      at += piece.length;
      req.write(piece, next);
    };
    next();
  });
}

/** Upstream handlers that hold their answers back until `answerAll()`. */
function heldAnswers(count: number): { answerAll(): void } {
  const waiting: (() => void)[] = [];
  upstream.script(...Array.from({ length: count }, () => (req: IncomingMessage, res: ServerResponse, recorded: ModelRequest) => void waiting.push(() => defaultCompletion(req, res, recorded))));
  return {
    answerAll() {
      for (const answer of waiting.splice(0)) answer();
    },
  };
}

/** A raw client: a head announcing `length` body bytes, and `sent` of them (`{` and spaces); it leaves when told. */
function partialBody(port: number, length: number, sent: number): { readonly closed: Promise<string>; leave(): void } {
  const socket = connect(port, '127.0.0.1');
  const read: Buffer[] = [];
  socket.on('data', (c: Buffer) => read.push(c));
  socket.on('error', () => {});
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(Buffer.concat(read).toString('latin1'))));
  socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n${sent === 0 ? '' : '{'.padEnd(sent, ' ')}`);
  return { closed, leave: () => socket.destroy() };
}

const recordsWith = (gw: InProcessListener<ModelRequestRecord>, error: string | null) => gw.records.all.filter((r) => r.error === error);

test('request bodies held under one cap: 8 concurrent 1 MiB bodies past a 4 MiB cap: 4 are held until their answers begin, the others get 503 request_bodies_full with Retry-After before their body is read, and are recorded; the count returns to 0', async (t) => {
  const held = new HeldBodies(4 * MiB);
  const gw = await startGatewayInProcess({ baseUrl: upstream.baseUrl, pki, deps: { heldBodies: held, maxBodyBytes: MiB } });
  const upstreamBefore = upstream.requests.length;
  const answers = heldAnswers(4);
  try {
    const body = chatBody(MiB);
    const calls = Array.from({ length: 8 }, () => post(gw.port, body));
    // The admitted calls wait on the upstream, holding their bodies, while the others are refused.
    await eventually('4 calls at the upstream and 4 refused', () => upstream.requests.length - upstreamBefore === 4 && gw.records.all.length === 4, t.signal);
    assert.equal(held.held, 4 * MiB, 'the 4 admitted bodies are held until their answers begin');
    // One more, whose client sends its head and no byte of its body: refused all the same.
    const headOnly = partialBody(gw.port, MiB, 0);
    assert.match(await headOnly.closed, /^HTTP\/1\.1 503 [^]*\r\nretry-after: 1\r\n[^]*"code":"request_bodies_full"/i);
    for (const rec of gw.records.all) {
      assert.deepEqual([rec.status, rec.error, rec.bytes_in, rec.attempts], [503, 'request_bodies_full', 0, 0], 'refused unread, never sent');
    }
    assert.equal(gw.records.all.length, 5);
    answers.answerAll();
    const answered = await Promise.all(calls);
    assert.deepEqual(answered.map((a) => a.status).sort(), [200, 200, 200, 200, 503, 503, 503, 503]);
    for (const refused of answered.filter((a) => a.status === 503)) {
      assert.equal(refused.headers['retry-after'], '1');
      assert.equal(refused.headers.connection, 'close', 'the connection closes: the rest of the body is not read');
      const error = (JSON.parse(refused.body) as { error: { code: string; type: string; message: string } }).error;
      assert.deepEqual([error.code, error.type], ['request_bodies_full', 'server_error']);
      assert.match(error.message, /--max-held-request-bytes.*retry after the time Retry-After says/);
    }
    await gw.records.nth(9);
    assert.equal(recordsWith(gw, null).filter((r) => r.status === 200 && r.bytes_in === MiB).length, 4);
    assert.equal(held.held, 0);
  } finally {
    answers.answerAll();
    await gw.close();
  }
});

test('request bodies held under one cap: a chunked body is counted as it arrives and refused 503 at the chunk that passes the cap, its connection closed and the call recorded; the count returns to 0', async (t) => {
  const held = new HeldBodies(MiB + 512 * 1024);
  const gw = await startGatewayInProcess({ baseUrl: upstream.baseUrl, pki, deps: { heldBodies: held, maxBodyBytes: MiB } });
  const upstreamBefore = upstream.requests.length;
  const answers = heldAnswers(1);
  try {
    const first = post(gw.port, chatBody(MiB));
    await eventually('the first body held at the upstream', () => held.held === MiB && upstream.requests.length === upstreamBefore + 1, t.signal);
    const chunked = await post(gw.port, chatBody(768 * 1024), 24);
    assert.deepEqual([chunked.status, chunked.headers['retry-after'], chunked.headers.connection], [503, '1', 'close']);
    const refused = await gw.records.nth(1);
    assert.equal(refused.error, 'request_bodies_full');
    assert.ok(refused.bytes_in === 0 && refused.attempts === 0, 'never sent');
    assert.equal(held.held, MiB, 'the refused body gave back what it had taken; the held one keeps its own');
    answers.answerAll();
    assert.equal((await first).status, 200);
    await gw.records.nth(2);
    assert.equal(held.held, 0);
  } finally {
    answers.answerAll();
    await gw.close();
  }
});

test('request bodies held under one cap: the count returns to 0 after every ending: answered, refused after reading, refused before reading, client gone mid-body, body timeout, a step that threw', async (t) => {
  const held = new HeldBodies(8 * MiB);
  // Chat completions whose check throws (a bug): the call fails with 500 after its body was read.
  const throwing = PROTOCOLS.map((p) => (p.api === 'chat_completions' ? { ...p, checkRequest: () => { throw new Error('a step that threw'); } } : p));
  const gw = await startGatewayInProcess({ baseUrl: upstream.baseUrl, pki, deps: { heldBodies: held, maxBodyBytes: MiB } });
  const timing = await startGatewayInProcess({ baseUrl: upstream.baseUrl, pki, protocols: throwing, deps: { heldBodies: held, maxBodyBytes: MiB, timeouts: { connectMs: 5000, responseMs: 10_000, idleMs: 10_000, bodyIdleMs: 300 } } });
  const endings: [string, number, string | null][] = [];
  const ended = async (name: string, gateway: InProcessListener<ModelRequestRecord>, n: number) => {
    const rec = await gateway.records.nth(n);
    endings.push([name, rec.status, rec.error]);
    assert.equal(held.held, 0, `nothing held after: ${name}`);
  };
  try {
    assert.equal((await post(gw.port, chatBody(64 * 1024))).status, 200);
    await ended('answered', gw, 1);
    assert.equal((await post(gw.port, Buffer.from('{"model":'))).status, 400);
    await ended('refused after reading', gw, 2);
    assert.equal((await post(gw.port, chatBody(MiB + 1))).status, 413);
    await ended('refused before reading', gw, 3);

    const gone = partialBody(gw.port, 1000, 100);
    await eventually('the declared length held', () => held.held === 1000, t.signal);
    gone.leave();
    await ended('client gone mid-body', gw, 4);

    const stalled = partialBody(timing.port, 1000, 1);
    assert.match(await stalled.closed, /^HTTP\/1\.1 408 /);
    await ended('body timeout', timing, 1);
    assert.equal((await post(timing.port, chatBody(1024))).status, 500);
    await ended('a step that threw', timing, 2);
  } finally {
    await gw.close();
    await timing.close();
  }
  assert.deepEqual(endings, [
    ['answered', 200, null],
    ['refused after reading', 400, 'invalid_json'],
    ['refused before reading', 413, 'request_too_large'],
    ['client gone mid-body', 0, 'client_aborted'],
    ['body timeout', 408, 'body_timeout'],
    ['a step that threw', 500, 'internal'],
  ]);
});
