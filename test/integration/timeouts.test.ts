// Listener timeouts: a slow request head is cut, a slow body is not.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { statusOf } from '../support/http-client.ts';
import { startProxy, type ProxyProcess } from '../support/proxy-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { startUpstream, type TestUpstream } from '../support/upstream.ts';

let pki: TestPki;
let upstream: TestUpstream;
let proxy: ProxyProcess;

before(async () => {
  pki = makeTestPki();
  upstream = await startUpstream(pki);
  proxy = await startProxy({
    env: { GIT_HOST_A: upstream.hostKey, GIT_HOST_A_TOKEN: `tok_${randomBytes(8).toString('hex')}`, NODE_EXTRA_CA_CERTS: pki.caFile },
    args: ['--git-auth-listen', '127.0.0.1:0', '--header-timeout', '500ms'],
  });
});

after(async () => {
  await proxy?.stop();
  await upstream?.close();
  pki?.cleanup();
});

test('a client that never finishes its request head is answered 408 and disconnected (header timeout)', async () => {
  const raw = await new Promise<string>((resolve, reject) => {
    const socket = connect(proxy.ports.git!, '127.0.0.1');
    let out = '';
    socket.setEncoding('latin1').on('data', (s: string) => (out += s));
    socket.on('error', reject);
    socket.on('close', () => resolve(out));
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n'); // and nothing more
  });
  assert.equal(statusOf(raw), 408);
});

test('a slow request body is not cut by the header timeout: a trickled push lands complete', async () => {
  const parts = 6;
  const r = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: proxy.ports.git, method: 'POST', path: `/${upstream.hostKey}/o/r.git/git-receive-pack` }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (s: string) => (text += s)).on('end', () => resolve({ status: res.statusCode!, text }));
    });
    req.on('error', reject);
    let sent = 0;
    const next = () => {
      req.write(Buffer.alloc(1024, sent));
      if (++sent < parts) setTimeout(next, 250); // 1.5 s in all: three header timeouts
      else req.end();
    };
    next();
  });
  assert.equal(r.status, 200);
  assert.equal((JSON.parse(r.text) as { bytes: number }).bytes, parts * 1024);
});
