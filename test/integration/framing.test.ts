// Request framing belongs to the forwarding core (src/http/forward.ts), never to the client: the
// rule both listeners share, checked on the bytes a real TLS upstream receives from openUpstream,
// the one function every upstream request goes through (the git proxy's routes today, the
// gateway's POSTs and the GET routes it will forward). The pure framing rules are
// test/unit/framing.test.ts.
import assert from 'node:assert/strict';
import { createServer, type TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { createUpstreamAgent, newExchange, openUpstream } from '../../src/http/forward.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

let pki: TestPki;
let heads: string[];
let server: ReturnType<typeof createServer>;
let port: number;

before(async () => {
  pki = makeTestPki();
  heads = [];
  // A raw TLS upstream: it records each request head exactly as it arrived and answers 204.
  server = createServer({ key: pki.keyPem, cert: pki.certPem }, (socket: TLSSocket) => {
    let buffered = '';
    socket.on('data', (c: Buffer) => {
      buffered += c.toString('latin1');
      let end: number;
      while ((end = buffered.indexOf('\r\n\r\n')) >= 0) {
        const head = buffered.slice(0, end);
        heads.push(head);
        const length = /\r\ncontent-length: *(\d+)/i.exec(head);
        buffered = buffered.slice(end + 4 + (length ? Number(length[1]) : 0));
        socket.write('HTTP/1.1 204 No Content\r\n\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

after(async () => {
  server.close();
  pki.cleanup();
});

async function send(method: string, headers: Record<string, string | number>, body: Buffer | null): Promise<string> {
  const agent = createUpstreamAgent({ ca: pki.caPem, tlsInsecureSkipVerify: false });
  try {
    const call = openUpstream({ agent, hostname: '127.0.0.1', port, method, path: '/listing', headers }, { connectMs: 5000, responseMs: 5000, idleMs: 5000, bodyIdleMs: 0 }, body, newExchange());
    const res = await call.response;
    res.resume();
    return heads.at(-1)!;
  } finally {
    agent.destroy();
  }
}

test('the forwarding core sends a bodiless GET with no framing header, whatever framing the caller passed (the gateway GET routes share it)', async () => {
  const head = await send('GET', { host: '127.0.0.1', 'content-length': '56', 'transfer-encoding': 'chunked', 'Content-Length': 9 }, null);
  assert.match(head, /^GET \/listing HTTP\/1\.1\r\n/);
  assert.doesNotMatch(head, /content-length|transfer-encoding/i);
});

test('the forwarding core frames a body in hand by its exact length, replacing any length the caller passed', async () => {
  const head = await send('POST', { host: '127.0.0.1', 'content-length': '999' }, Buffer.from('{"model":"m"}'));
  assert.match(head, /\r\ncontent-length: 13(\r\n|$)/i);
  assert.equal(head.match(/content-length/gi)!.length, 1);
  assert.doesNotMatch(head, /transfer-encoding/i);
});
