// The limits store over TLS (rediss://, rediss+sentinel://) with a CA bundle of its own
// (--limits-store-ca-file), against redis-server built with TLS (Debian's is): the store's
// certificate is verified, for the address or name the gateway connects to, and a store whose
// certificate does not chain to the bundle, or names another host, is never used.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { eventually } from '../support/eventually.ts';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { redisAsk, startSentinelSet, type SetTls } from '../support/redis-sentinel.ts';
import { startRedis, type RedisServer } from '../support/redis-server.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const SIGNING_KEY = randomBytes(32).toString('hex');
let pki: TestPki;
let other: TestPki;
let upstream: ModelUpstream;
let redis: RedisServer;
let tls: SetTls;
let dir: string;

before(async () => {
  pki = makeTestPki();
  other = makeTestPki('other');
  tls = { certFile: join(pki.dir, 'server.pem'), keyFile: join(pki.dir, 'server.key'), caFile: pki.caFile };
  // TLS alone on the port; bound to a second loopback address too, which the certificate does not name.
  const tlsOnly = (port: number) => ['--port', '0', '--tls-port', String(port), '--tls-cert-file', tls.certFile, '--tls-key-file', tls.keyFile, '--tls-ca-cert-file', tls.caFile, '--tls-auth-clients', 'no', '--bind', '127.0.0.1', '127.0.0.2'];
  [upstream, redis] = await Promise.all([startModelUpstream(pki), startRedis(tlsOnly)]);
  dir = mkdtempSync(join(tmpdir(), 'limits-store-tls-'));
  writeFileSync(join(dir, 'limits.json'), JSON.stringify({ perInstance: { concurrent: 4 } }));
});

after(async () => {
  await Promise.all([upstream?.close(), redis?.close()]);
  pki?.cleanup();
  other?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const gateway = (url: string, caFile: string) =>
  startServe({
    env: { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-x', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off', '--limits', join(dir, 'limits.json'), '--limits-store', url, '--limits-store-ca-file', caFile],
    listeners: ['model'],
  });
const mint = async (run: string) => (await runCommandInProcess(['mint-token', '--instance-id', `bot-${run}`, '--workflow', 'w', '--run-id', run], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY })).stdout.trim();
const chat = async (gw: ProxyProcess, run: string) => send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${await mint(run)}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });

test('store TLS verified: rediss:// with --limits-store-ca-file: the certificate is verified against the bundle, calls are admitted and their slots kept in the store', async (t) => {
  const gw = await gateway(`rediss://127.0.0.1:${redis.port}`, pki.caFile);
  try {
    await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up');
    assert.equal((await chat(gw, 'tls-run')).status, 200);
    await eventually('the call\'s request window in the store', async () => Number(await redisAsk(redis.port, ['EXISTS', 'lim:i:bot-tls-run:w'], { tls })) === 1, t.signal);
  } finally {
    await gw.stop();
  }
});

test('store TLS verified: a certificate that does not chain to the bundle, or does not name the address connected to, is refused: the store stays down, saying why, and calls are refused (closed)', async () => {
  for (const [url, caFile, why] of [
    [`rediss://127.0.0.1:${redis.port}`, other.caFile, /certificate/],
    [`rediss://127.0.0.2:${redis.port}`, pki.caFile, /IP: 127\.0\.0\.2 is not in the cert's list/],
  ] as const) {
    const gw = await gateway(url, caFile);
    try {
      const down = await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'down');
      assert.match(String(down.reason), why);
      assert.equal((await chat(gw, 'untrusted')).status, 503);
      assert.ok(!gw.records().some((r) => r.event === 'limits_store' && r.state === 'up'), 'never up');
    } finally {
      await gw.stop();
    }
  }
});

test('store TLS verified: rediss+sentinel://: the sentinels and the master they name are all reached over TLS and verified against the bundle', { timeout: 120_000 }, async () => {
  const set = await startSentinelSet({ tls });
  try {
    const gw = await gateway(set.url(), pki.caFile);
    try {
      const up = await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up');
      assert.equal(up.node, `127.0.0.1:${await set.masterPort()}`);
      assert.equal((await chat(gw, 'tls-sentinel-run')).status, 200);
    } finally {
      await gw.stop();
    }
  } finally {
    await set.close();
  }
});
