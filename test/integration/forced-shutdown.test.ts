// A second SIGTERM while model streams are open: the built bundle cuts every connection, and each
// call it cut is still recorded and charged (as cut by the shutdown) before the process exits.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { signBotToken } from '../../src/auth/jwt.ts';
import { chunk, sseEvent, startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { startProxy } from '../support/proxy-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const MODEL = 'gpt-test';
const SIGNING_KEY = Buffer.from(randomBytes(32).toString('hex'), 'utf8');
let pki: TestPki;
let upstream: ModelUpstream;
let dir: string;

before(async () => {
  pki = makeTestPki();
  // Every stream begins and then never ends: only the shutdown can end it.
  upstream = await startModelUpstream(pki, '/v1', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(sseEvent(chunk(MODEL, { role: 'assistant', content: 'Hel' })));
  });
  dir = mkdtempSync(join(tmpdir(), 'forced-shutdown-'));
  writeFileSync(join(dir, 'prices.json'), JSON.stringify({ providers: { openai: { [MODEL]: { input: 1, output: 1 } } } }));
  writeFileSync(join(dir, 'limits.json'), JSON.stringify({ perInstance: { concurrent: 4 }, perRun: { budgetUsd: 100 } }));
});
after(async () => {
  await upstream.close();
  rmSync(dir, { recursive: true, force: true });
  pki.cleanup();
});

/** Opens a stream and resolves once its first chunk arrived; `ended` says how it finished. */
function openStream(port: number, token: string): Promise<{ ended: Promise<string> }> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ model: MODEL, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] });
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', agent: false, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` } }, (res) => {
      const ended = new Promise<string>((done) => {
        res.on('end', () => done('end'));
        res.on('error', () => done('broken'));
        res.on('close', () => done('broken'));
      });
      res.once('data', () => resolve({ ended }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('a second SIGTERM with streams open: each cut call is recorded (interrupted: shutdown) and charged before the process exits 0', { timeout: 30_000 }, async () => {
  const proxy = await startProxy({
    env: { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-forced', UPSTREAM_ALLOWED_MODELS: MODEL, UPSTREAM_CA_FILE: pki.caFile, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY.toString('utf8'), MODEL_PRICES_FILE: join(dir, 'prices.json') },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--limits', join(dir, 'limits.json')],
    listeners: ['model'],
  });
  try {
    const now = Math.floor(Date.now() / 1000);
    const streams = await Promise.all([1, 2].map((i) => openStream(proxy.ports.model!, signBotToken({ sub: `bot-${i}`, workflow: 'w', run_id: `run-${i}`, iat: now, exp: now + 600 }, SIGNING_KEY))));
    proxy.signal('SIGTERM');
    await proxy.waitForRecord((r) => r.event === 'shutdown' && r.phase === 'draining');
    proxy.signal('SIGTERM');
    assert.equal((await proxy.exited).code, 0);
    assert.deepEqual(await Promise.all(streams.map((s) => s.ended)), ['broken', 'broken']);
    const cut = proxy.records().filter((r) => r.event === 'request');
    assert.equal(cut.length, 2, 'one record per open call');
    for (const r of cut) {
      assert.deepEqual([r.status, r.interrupted, r.error, r.charge_estimated], [200, 'shutdown', 'shutdown', true], JSON.stringify(r));
      assert.ok(Number(r.charged_usd) > 0, `charged: ${JSON.stringify(r)}`);
    }
  } finally {
    await proxy.stop('SIGKILL');
  }
});

test('a stream still open when --shutdown-grace runs out is cut by the shutdown and recorded so (interrupted: shutdown, error: shutdown), not as a client that left; the process exits 0', { timeout: 30_000 }, async () => {
  const proxy = await startProxy({
    env: { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-grace', UPSTREAM_ALLOWED_MODELS: MODEL, UPSTREAM_CA_FILE: pki.caFile, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY.toString('utf8') },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--shutdown-grace', '1s'],
    listeners: ['model'],
  });
  try {
    const now = Math.floor(Date.now() / 1000);
    const stream = await openStream(proxy.ports.model!, signBotToken({ sub: 'bot-grace', workflow: 'w', run_id: 'run-grace', iat: now, exp: now + 600 }, SIGNING_KEY));
    proxy.signal('SIGTERM');
    assert.equal((await proxy.exited).code, 0);
    assert.equal(await stream.ended, 'broken');
    const [r, ...more] = proxy.records().filter((x) => x.event === 'request');
    assert.equal(more.length, 0);
    assert.deepEqual([r!.status, r!.interrupted, r!.error], [200, 'shutdown', 'shutdown'], JSON.stringify(r));
  } finally {
    await proxy.stop('SIGKILL');
  }
});
