// A large body in hand reaches a real TLS upstream byte-exact through openUpstream's slices, also
// when the upstream reads slowly and every slice waits on backpressure; its Content-Length is the
// body's exact length and every byte is counted once.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { createUpstreamAgent, newExchange, openUpstream } from '../../src/http/forward.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const MiB = 1024 * 1024;
let pki: TestPki;
let server: Server;
let port: number;

before(async () => {
  pki = makeTestPki();
  // The upstream reads one buffered chunk every 2 ms (a slow reader: the gateway's writes fill
  // the socket and wait), then answers with the length it was announced, the bytes it received
  // and their SHA-256.
  server = createServer({ key: pki.keyPem, cert: pki.certPem }, (req, res) => {
    const hash = createHash('sha256');
    let received = 0;
    const reader = setInterval(() => {
      const chunk = req.read() as Buffer | null;
      if (chunk === null) return;
      received += chunk.length;
      hash.update(chunk);
    }, 2);
    req.once('end', () => {
      clearInterval(reader);
      res.end(JSON.stringify({ announced: req.headers['content-length'], received, sha256: hash.digest('hex') }));
    });
    req.once('close', () => clearInterval(reader));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

after(() => {
  server.close();
  pki.cleanup();
});

test('a body in hand is written upstream in slices with backpressure: 24 MiB reach a slowly reading upstream byte-exact (sha256), framed by its exact length', async () => {
  const agent = createUpstreamAgent({ ca: pki.caPem, tlsInsecureSkipVerify: false });
  try {
    const body = randomBytes(24 * MiB);
    const exchange = newExchange();
    const call = openUpstream({ agent, hostname: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { host: '127.0.0.1', 'content-length': '5' } }, { connectMs: 5000, responseMs: 30_000, idleMs: 30_000, bodyIdleMs: 0 }, body, exchange);
    let drains = 0;
    call.request.on('drain', () => drains++);
    const res = await call.response;
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    const got = JSON.parse(Buffer.concat(chunks).toString()) as { announced: string; received: number; sha256: string };
    assert.deepEqual(got, { announced: String(body.length), received: body.length, sha256: createHash('sha256').update(body).digest('hex') });
    assert.ok(drains > 0, 'the writes waited on the upstream (backpressure) and went on after each drain');
    assert.equal(exchange.bytesIn, body.length);
    assert.equal(exchange.failure, undefined);
  } finally {
    agent.destroy();
  }
});
