// The limits store as a least-privilege ACL user (--limits-store redis://USER@HOST:PORT, its
// password in --limits-store-password-file): the user docs/operations.md gives, applied as written
// to a real redis-server, is all the gateway, revoke and confirm-store-reset need, and lets them
// do nothing else. Its command list is checked against every command src/ sends (the scripts'
// own included: Redis checks those against the caller's ACL too).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { eventually } from '../support/eventually.ts';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { assertNoSecrets, ROOT, type ProxyProcess } from '../support/proxy-process.ts';
import { redisAsk } from '../support/redis-sentinel.ts';
import { startRedis, type RedisServer } from '../support/redis-server.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { RespError } from '../../src/store/resp.ts';

const SIGNING_KEY = randomBytes(32).toString('hex');
const ADMIN = `admin-${randomBytes(8).toString('hex')}`;
const PASSWORD = `gw-${randomBytes(12).toString('hex')}`;
const USER = 'credential-proxy';
let pki: TestPki;
let upstream: ModelUpstream;
let redis: RedisServer;
let dir: string;

/** The ACL SETUSER line of docs/operations.md, as its words. */
function documentedAcl(): string[] {
  const lines = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8').split('\n').filter((l) => l.trim().startsWith(`ACL SETUSER ${USER} `));
  assert.equal(lines.length, 1, 'docs/operations.md gives one ACL SETUSER line for the gateway\'s user');
  return lines[0]!.trim().split(/\s+/);
}

/** Every command src/ sends to the store's nodes: literal commands, and the scripts' redis.call. */
function commandsSent(): Set<string> {
  const found = new Set<string>();
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else for (const m of readFileSync(join(d, e.name), 'utf8').matchAll(/(?:command|#send)\(\[\s*'([A-Z]+)'|redis\.call\('([A-Z]+)'/g)) found.add((m[1] ?? m[2]!).toLowerCase());
    }
  };
  walk(join(ROOT, 'src'));
  return found;
}

before(async () => {
  pki = makeTestPki();
  [upstream, redis] = await Promise.all([startModelUpstream(pki), startRedis(['--requirepass', ADMIN])]);
  dir = mkdtempSync(join(tmpdir(), 'limits-store-acl-'));
  writeFileSync(join(dir, 'prices.json'), JSON.stringify({ 'gpt-test': { input: 1000, output: 1000 } }));
  writeFileSync(join(dir, 'limits.json'), JSON.stringify({ perInstance: { concurrent: 4 }, perRun: { budgetUsd: 0.01 } }));
  writeFileSync(join(dir, 'password'), `${PASSWORD}\n`);
  const words = documentedAcl().map((w) => (w === '>PASSWORD' ? `>${PASSWORD}` : w));
  assert.equal(await redisAsk(redis.port, words, { password: ADMIN }), 'OK', 'the documented line, applied as written');
});

after(async () => {
  await Promise.all([upstream?.close(), redis?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const env = () => ({ UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: 'sk-x', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY, MODEL_PRICES_FILE: join(dir, 'prices.json') });
const storeArgs = (user = USER, file = join(dir, 'password')) => ['--limits-store', `redis://${user}@127.0.0.1:${redis.port}`, '--limits-store-password-file', file];
const gateway = (args: string[] = storeArgs()) => startServe({ env: env(), args: ['--model-gateway-listen', '127.0.0.1:0', '--limits', join(dir, 'limits.json'), ...args], listeners: ['model'] });
const mint = async (run: string) => (await runCommandInProcess(['mint-token', '--instance-id', `bot-${run}`, '--workflow', 'w', '--run-id', run], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY })).stdout.trim();
const chat = async (gw: ProxyProcess, run: string) => send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${await mint(run)}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });

test('store user least privilege: the user of docs/operations.md allows every command src/ sends to the store (the scripts\' own included) but CONFIG, and no other, on the keys lim:*, rev:* and cp:state alone', () => {
  const words = documentedAcl();
  const allowed = new Set(words.filter((w) => w.startsWith('+')).map((w) => w.slice(1)));
  const wanted = new Set([...commandsSent()].filter((c) => c !== 'config'));
  assert.deepEqual([...allowed].sort(), [...wanted].sort());
  assert.deepEqual(words.filter((w) => w.startsWith('~')).sort(), ['~cp:state', '~lim:*', '~rev:*']);
  for (const w of ['on', '>PASSWORD', 'resetkeys', 'resetchannels', '-@all']) assert.ok(words.includes(w), w);
  assert.ok(words.indexOf('-@all') < words.findIndex((w) => w.startsWith('+')), 'everything taken away before the commands are given');
});

test('store user least privilege: the gateway authenticates as the documented user (redis://USER@HOST:PORT, the password from its file): calls admitted and charged, revoke and confirm-store-reset work as that user; the user can do nothing else (another key, FLUSHALL, CONFIG)', async (t) => {
  const gw = await gateway();
  try {
    await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'up');
    assert.equal((await chat(gw, 'acl-run')).status, 200);
    await eventually('the charge in the store', async () => Number(await redisAsk(redis.port, ['GET', 'lim:r:acl-run'], { password: ADMIN })) > 0, t.signal);
    assert.equal((await chat(gw, 'acl-run')).status, 429, 'the run\'s budget is spent, as counted through the user');
    // CONFIG GET is not the user's (it would read requirepass): the settings could not be checked, said once.
    const warnings = gw.records().filter((r) => r.event === 'warning' && String(r.message).includes('did not answer CONFIG GET'));
    assert.equal(warnings.length, 1);
    // revoke and confirm-store-reset as the same user.
    const revoked = await runCommandInProcess(['revoke', ...storeArgs(), '--run-id', 'stopped']);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.equal((await chat(gw, 'stopped')).status, 401, 'revoked through the user, refused by the gateway');
    const confirmed = await runCommandInProcess(['confirm-store-reset', ...storeArgs()]);
    assert.equal(confirmed.code, 0, confirmed.stderr);
    assertNoSecrets(gw.output() + revoked.stdout + revoked.stderr + confirmed.stdout + confirmed.stderr, [PASSWORD, ADMIN], 'the output');
  } finally {
    await gw.stop();
  }
  const as = { user: USER, password: PASSWORD };
  for (const command of [['GET', 'other:key'], ['SET', 'lim2', '1'], ['FLUSHALL'], ['KEYS', '*'], ['CONFIG', 'GET', 'requirepass'], ['ACL', 'LIST'], ['EVAL', "return redis.call('GET', 'other:key')", 0], ['DEL', 'lim:r:acl-run']]) {
    const reply = await redisAsk(redis.port, command, as);
    // A script is refused the key it reaches for as well ("can't access at least one of the keys").
    assert.ok(reply instanceof RespError && /^NOPERM|^ERR The user executing the script can't access/.test(reply.message), `${command.join(' ')}: ${String(reply)}`);
  }
});

test('store user least privilege: a user Redis does not know, or a wrong password, is reported as refused naming the user and never the password; calls are refused as transient (503, the closed policy)', async () => {
  const wrong = join(dir, 'wrong');
  writeFileSync(wrong, 'not-the-password\n');
  for (const [user, file] of [['nobody', join(dir, 'password')], [USER, wrong]] as const) {
    const gw = await gateway(storeArgs(user, file));
    try {
      const down = await gw.waitForRecord((r) => r.event === 'limits_store' && r.state === 'down');
      assert.equal(down.reason, `the limits store refused the user ${user} or its password`);
      assert.equal((await chat(gw, `refused-${user}`)).status, 503);
      assertNoSecrets(gw.output(), [PASSWORD, 'not-the-password'], 'the gateway\'s output');
    } finally {
      await gw.stop();
    }
  }
});
