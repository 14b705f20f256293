// The limits store's password (--limits-store-password-file) against a real redis-server with
// requirepass: the gateway authenticates with it, a refused password is reported (never
// echoed) and refuses calls as the failure policy says, and a rotated file is used from the next
// connection on, without a restart. Rotation: the new password is set on Redis, the file is
// rewritten, and Redis drops its clients (as a failover or a restart would).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { assertNoSecrets, type ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { startRedis, type RedisServer } from '../support/redis-server.ts';
import { RespClient } from '../../src/store/resp.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { Secret } from '../../src/http/secret-value.ts';

const SIGNING_KEY = randomBytes(32).toString('hex');
const FIRST = `first pass ${randomBytes(8).toString('hex')}`; // a space too: the password is a RESP string, not a header
const SECOND = `second-${randomBytes(8).toString('hex')}`;
let pki: TestPki;
let upstream: ModelUpstream;
let redis: RedisServer;
let dir: string;
let passwordFile: string;

before(async () => {
  pki = makeTestPki();
  [upstream, redis] = await Promise.all([startModelUpstream(pki), startRedis(['--requirepass', FIRST])]);
  dir = mkdtempSync(join(tmpdir(), 'limits-store-password-'));
  passwordFile = join(dir, 'redis-password');
  writeFileSync(join(dir, 'limits.json'), JSON.stringify({ perInstance: { concurrent: 4 } }));
});

after(async () => {
  await Promise.all([upstream?.close(), redis?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const env = () => ({ UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-x', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY });
const gateway = () => startServe({ env: env(), args: ['--model-gateway-listen', '127.0.0.1:0', '--limits', join(dir, 'limits.json'), '--limits-store', `redis://127.0.0.1:${redis.port}`, '--limits-store-password-file', passwordFile], listeners: ['model'] });
const mint = async (run: string) => (await runCommandInProcess(['mint-token', '--instance-id', `bot-${run}`, '--workflow', 'w', '--run-id', run], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY })).stdout.trim();
const chat = async (gw: ProxyProcess, run: string) => send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${await mint(run)}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
const storeRecords = (gw: ProxyProcess) => gw.records().filter((r) => r.event === 'limits_store');

/** Redis as its operator rotates it: the new password set, every client connection dropped. */
async function rotateOnRedis(from: string, to: string): Promise<void> {
  let up!: () => void;
  let down!: (e: Error) => void;
  const ready = new Promise<void>((resolve, reject) => ((up = resolve), (down = reject)));
  const admin = new RespClient({ address: { host: '127.0.0.1', port: redis.port }, tls: false, password: { read: () => ({ ok: true, value: new Secret(from) }) }, onState: (isUp, why) => (isUp ? up() : down(new Error(`redis admin connection: ${why}`))) });
  try {
    await ready;
    assert.equal(await admin.command(['CONFIG', 'SET', 'requirepass', to]), 'OK');
    await admin.command(['CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes']);
  } finally {
    admin.close();
  }
}

test('limits store password: the gateway authenticates with the file\'s password (trailing newline dropped, inner space kept); a rotated file is used from the next connection on, without a restart, and no log line holds either password', async () => {
  writeFileSync(passwordFile, `${FIRST}\n`);
  const gw = await gateway();
  try {
    await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up');
    assert.equal((await chat(gw, 'before-rotation')).status, 200);
    writeFileSync(passwordFile, `${SECOND}\n`);
    await rotateOnRedis(FIRST, SECOND);
    await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'down');
    await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up' && storeRecords(gw).filter((x) => x.state === 'up').length === 2, 'up again with the new password');
    assert.equal((await chat(gw, 'after-rotation')).status, 200, 'served again, no restart');
    assertNoSecrets(gw.output(), [FIRST, SECOND], 'the gateway\'s output');
  } finally {
    await gw.stop();
    await rotateOnRedis(SECOND, FIRST);
  }
});

test('limits store password: a password Redis refuses is reported once as such (never echoed) and calls are refused as transient (503, the closed policy); an empty file stops start-up naming the flag', async () => {
  writeFileSync(passwordFile, 'not-the-password\n');
  const gw = await gateway();
  try {
    const down = await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'down');
    assert.equal(down.reason, 'the limits store refused the password');
    const refused = await chat(gw, 'wrong-password');
    assert.equal(refused.status, 503);
    assert.equal(refused.headers['retry-after'], '1');
    // A call's line is written after its answer: whatever was logged while it ran is in by then.
    const callLines = (n: number) => gw.waitForRecord(() => gw.records().filter((r) => r.event === 'request').length >= n, `the lines of ${n} calls`);
    await callLines(1);
    assertNoSecrets(gw.output(), ['not-the-password'], 'the gateway\'s output');
    const downs = () => storeRecords(gw).filter((r) => r.state === 'down').length;
    const seen = downs();
    assert.equal((await chat(gw, 'wrong-password-2')).status, 503);
    await callLines(2);
    assert.equal(downs(), seen, 'the same reason is not logged again on every retry');
  } finally {
    await gw.stop();
  }
  writeFileSync(passwordFile, '\n');
  const empty = await runCommandInProcess(['--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off', '--limits', join(dir, 'limits.json'), '--limits-store', `redis://127.0.0.1:${redis.port}`, '--limits-store-password-file', passwordFile], env());
  assert.notEqual(empty.code, 0);
  assert.match(empty.stderr, /--limits-store-password-file: .* is empty/);
});
