// Listener timeouts: a slow request head is cut, a slow body is not.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { statusOf } from '../support/http-client.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { startUpstream, type TestUpstream } from '../support/upstream.ts';

let pki: TestPki;
let upstream: TestUpstream;
let proxy: ProxyProcess;

before(async () => {
  pki = makeTestPki();
  upstream = await startUpstream(pki);
  proxy = await startServe({
    env: { GIT_HOST_A: upstream.hostKey, GIT_HOST_A_TOKEN: `tok_${randomBytes(8).toString('hex')}`, NODE_EXTRA_CA_CERTS: pki.caFile },
    args: ['--git-auth-listen', '127.0.0.1:0', '--header-timeout', '500ms'],
  });
});

after(async () => {
  await proxy?.stop();
  await upstream?.close();
  pki?.cleanup();
});

/** A connection that sends half a request head and nothing more; resolves with what the proxy wrote before it closed it. */
function unfinishedHead(): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const socket = connect(proxy.ports.git!, '127.0.0.1');
    let out = '';
    socket.setEncoding('latin1').on('data', (s: string) => (out += s));
    socket.on('error', reject);
    socket.on('close', () => resolve(out));
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n'); // and nothing more
  });
}

test('a client that never finishes its request head is answered 408 and disconnected (header timeout)', async () => {
  assert.equal(statusOf(await unfinishedHead()), 408);
});

test('a slow request body is not cut by the header timeout: a trickled push lands complete', async () => {
  const parts = 6;
  const req = request({ host: '127.0.0.1', port: proxy.ports.git, method: 'POST', path: `/${upstream.hostKey}/o/r.git/git-receive-pack` });
  const response = new Promise<{ status: number; text: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (s: string) => (text += s)).on('end', () => resolve({ status: res.statusCode!, text }));
    });
    req.on('error', reject);
  });
  const write = (i: number) => new Promise<void>((resolve, reject) => req.write(Buffer.alloc(1024, i), (err) => (err ? reject(err) : resolve())));
  for (let i = 0; i < parts / 2; i++) await write(i);
  // The push is in its body. A head begun after it is cut by the header timeout: the proxy's
  // timeout check has run, past the timeout, over both connections; the push's must go on.
  assert.equal(statusOf(await unfinishedHead()), 408, 'the header timeout fired while the push was in its body');
  for (let i = parts / 2; i < parts; i++) await write(i);
  req.end();
  const r = await response;
  assert.equal(r.status, 200);
  assert.equal((JSON.parse(r.text) as { bytes: number }).bytes, parts * 1024);
});
