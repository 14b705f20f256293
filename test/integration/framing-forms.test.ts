// Every framing a client can put on a bodiless request (a GET), on both listeners of the
// proxy, each with what the upstream received. The rule: a GET or HEAD that announces a body is
// refused with 400 before any handler runs (server.ts bodylessMethodError), and what the proxy
// forwards without a body carries no Content-Length or Transfer-Encoding (forward.ts
// bodyFraming), so no upstream can read the proxy's next request on a pooled connection as a body.
// The gateway forwards no GET today (its catalog is answered locally); the test of the forwarding
// core over a real TLS connection (test/integration/framing.test.ts) shows the same core rule for
// the GET routes it will forward.
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
  // The smuggled head below ends with the client's end of the connection; were that end not
  // to reach the parser, the unfinished head would still be cut after a second, not 30 s.
  both = await startBothListeners({ args: ['--header-timeout', '1s'] });
  ({ gitUpstream, modelUpstream, proxy } = both);
});

after(() => both?.close());

/**
 * Writes `text` on a fresh connection; everything read until the server closes (or 5 s, a guard
 * only). `endAfterFirstResponse`: once the first response has arrived whole, the client ends its
 * side, so that what it sent after that response is all the server will ever get.
 */
function exchange(port: number, text: string, endAfterFirstResponse = false): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(), 5000);
    const done = () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    };
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      if (endAfterFirstResponse && firstResponseWhole(Buffer.concat(chunks).toString('latin1'))) {
        endAfterFirstResponse = false;
        socket.end();
      }
    });
    socket.once('error', done);
    socket.once('close', done);
    socket.write(text);
  });
}

/**
 * Whether `raw` holds a whole first response: its head and the body its Content-Length announces.
 * The responses here all announce one; one that did not would never count as whole, and the test
 * would see the header timeout's 408 instead of the 400 it expects.
 */
function firstResponseWhole(raw: string): boolean {
  const headEnd = raw.indexOf(CRLF + CRLF);
  if (headEnd < 0) return false;
  const length = /\r\ncontent-length: *(\d+)\r\n/i.exec(raw.slice(0, headEnd + 2));
  return length !== null && raw.length >= headEnd + 4 + Number(length[1]);
}

const responses = (raw: string): number[] => [...raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

interface Listener {
  readonly name: 'git' | 'model';
  port(): number;
  readonly path: string;
  upstreamRequests(): number;
  /** The framing headers of the last request the upstream received. */
  lastFraming(): { 'content-length'?: string; 'transfer-encoding'?: string };
  /** The status of a well-formed GET on this path. */
  readonly okStatus: number;
  /** Whether that GET is forwarded (git) or answered by the proxy itself (the catalog). */
  readonly forwards: boolean;
}

const LISTENERS: Listener[] = [
  {
    name: 'git',
    port: () => proxy.ports.git!,
    get path() {
      return `/${gitUpstream.hostKey}/org/repo.git/info/refs?service=git-upload-pack`;
    },
    upstreamRequests: () => gitUpstream.requests.length,
    lastFraming: () => {
      const h = gitUpstream.requests.at(-1)!.headers;
      return { ...(h['content-length'] !== undefined && { 'content-length': h['content-length'] }), ...(h['transfer-encoding'] !== undefined && { 'transfer-encoding': h['transfer-encoding'] }) };
    },
    okStatus: 200,
    forwards: true,
  },
  {
    name: 'model',
    port: () => proxy.ports.model!,
    path: '/v1/models',
    upstreamRequests: () => modelUpstream.requests.length,
    lastFraming: () => ({}),
    okStatus: 200,
    forwards: false,
  },
];

const head = (l: Listener, extra: string[], close = true) => [`GET ${l.path} HTTP/1.1`, 'Host: proxy', ...(close ? ['Connection: close'] : []), ...extra].join(CRLF) + CRLF + CRLF;

for (const l of LISTENERS) {
  test(`framing form on a bodiless request, ${l.name} listener: Content-Length: N with N bytes is refused with 400 and the upstream receives nothing`, async () => {
    const before = l.upstreamRequests();
    const raw = await exchange(l.port(), head(l, ['Content-Length: 11']) + 'hello world');
    assert.equal(statusOf(raw), 400, raw.split(CRLF)[0]);
    assert.match(raw, /body_not_allowed|may not carry a body/);
    assert.match(raw, /\r\nconnection: close\r\n/i);
    assert.equal(l.upstreamRequests(), before);
  });

  test(`framing form on a bodiless request, ${l.name} listener: Content-Length: 0 is served and the upstream receives no framing header`, async () => {
    const before = l.upstreamRequests();
    const raw = await exchange(l.port(), head(l, ['Content-Length: 0']));
    assert.equal(statusOf(raw), l.okStatus, raw.split(CRLF)[0]);
    assert.equal(l.upstreamRequests(), before + (l.forwards ? 1 : 0));
    if (l.forwards) assert.deepEqual(l.lastFraming(), {});
  });

  test(`framing form on a bodiless request, ${l.name} listener: Transfer-Encoding: chunked is refused with 400 and the upstream receives nothing`, async () => {
    const before = l.upstreamRequests();
    const raw = await exchange(l.port(), head(l, ['Transfer-Encoding: chunked']) + `5${CRLF}hello${CRLF}0${CRLF}${CRLF}`);
    assert.equal(statusOf(raw), 400, raw.split(CRLF)[0]);
    assert.match(raw, /body_not_allowed|may not carry a body/);
    assert.equal(l.upstreamRequests(), before);
  });

  test(`framing form on a bodiless request, ${l.name} listener: Content-Length with Transfer-Encoding is refused with 400 by the parser and the upstream receives nothing`, async () => {
    const before = l.upstreamRequests();
    const raw = await exchange(l.port(), head(l, ['Content-Length: 5', 'Transfer-Encoding: chunked']) + `5${CRLF}hello${CRLF}0${CRLF}${CRLF}`);
    assert.equal(statusOf(raw), 400, raw.split(CRLF)[0]);
    assert.equal(l.upstreamRequests(), before);
  });

  test(`framing form on a bodiless request, ${l.name} listener: a body with no framing header on a keep-alive connection is read as the next request, judged on its own`, async () => {
    const before = l.upstreamRequests();
    // Keep-alive: the bytes after the head are, by the client's own framing, not a body. The
    // proxy reads them as the next request (here not one: the client ends the connection once
    // the GET is answered, and the parser refuses the unfinished head at that end and closes;
    // the header timeout would close it too, a second later).
    const raw = await exchange(l.port(), head(l, [], false) + 'POST /smuggled HTTP/1.1\r\nX: y\r\n', true);
    const seen = responses(raw);
    assert.deepEqual(seen, [l.okStatus, 400], raw.split(CRLF)[0]);
    assert.equal(l.upstreamRequests(), before + (l.forwards ? 1 : 0));
    if (l.forwards) assert.deepEqual(l.lastFraming(), {}, 'the forwarded GET announced no body');
    // And a complete request after it is served as a request of its own, by the proxy's rules.
    const twice = await exchange(l.port(), head(l, [], false) + head(l, []));
    assert.deepEqual(responses(twice), [l.okStatus, l.okStatus]);
    assert.equal(l.upstreamRequests(), before + (l.forwards ? 3 : 0));
    if (l.forwards) assert.deepEqual(l.lastFraming(), {});
  });
}
