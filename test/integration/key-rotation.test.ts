// Rotating token signing keys on the proxy as `serve` starts it, step by step as docs/operations.md gives it
// ("Rotating token signing keys"), against each running listener, the key files rewritten
// between requests: add the new public key, mint with the new kid, old and new tokens accepted
// together, remove the old key, its tokens refused from the next request, the new ones not.
// mint-token signs with a private key the proxy never sees; the proxy holds public keys only.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { send } from '../support/http-client.ts';
import { assertNoSecrets, type LogRecord, type ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { startUpstream, type TestUpstream } from '../support/upstream.ts';

let root: string;
let pki: TestPki;
before(() => {
  root = mkdtempSync(join(tmpdir(), 'key-rotation-'));
  pki = makeTestPki();
});
after(() => {
  rmSync(root, { recursive: true, force: true });
  pki?.cleanup();
});

interface Keys {
  /** What the proxy reads (--bot-keys, --git-keys): public keys only. */
  readonly dir: string;
  /** What mint-token reads: the private keys, never shown to the proxy. */
  readonly privateDir: string;
}

function keyDirs(name: string): Keys {
  const dir = join(root, name, 'public');
  const privateDir = join(root, name, 'private');
  mkdirSync(dir, { recursive: true });
  mkdirSync(privateDir, { recursive: true });
  return { dir, privateDir };
}

/** A new key pair: the private key where mint-token reads it, the public key put in place as docs/operations.md says (a hidden name, then a rename). */
function addKey(keys: Keys, kid: string, type: 'ed25519' | 'ec'): string {
  const pair = type === 'ed25519' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const pem = (k: KeyObject) => k.export({ type: k.type === 'public' ? 'spki' : 'pkcs8', format: 'pem' }).toString();
  const privateFile = join(keys.privateDir, `${kid}.pem`);
  writeFileSync(privateFile, pem(pair.privateKey), { mode: 0o600 });
  writeFileSync(join(keys.dir, `.${kid}.pem.tmp`), pem(pair.publicKey));
  renameSync(join(keys.dir, `.${kid}.pem.tmp`), join(keys.dir, `${kid}.pem`));
  return privateFile;
}

/** The log line of the re-read that left exactly these kids. */
function reloadedTo(proxy: ProxyProcess, kids: string[]): Promise<LogRecord> {
  const same = (r: LogRecord) => r.event === 'keys_reloaded' && JSON.stringify((r.keys as { kid: string }[]).map((k) => k.kid).sort()) === JSON.stringify([...kids].sort());
  return proxy.waitForRecord(same, `keys_reloaded with ${kids.join(', ')}`);
}

async function mint(privateFile: string, instance: string, extra: string[] = []): Promise<string> {
  const r = await runCommandInProcess(['mint-token', '--instance-id', instance, '--workflow', 'rotation', '--run-id', 'run-1', '--signing-key', privateFile, ...extra]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim();
}

test('key rotation on the model gateway: add the new key, mint with its kid, old and new tokens accepted together, remove the old key, its tokens refused (unknown key id) from the next request', { timeout: 90_000 }, async () => {
  const keys = keyDirs('bot');
  const oldKey = addKey(keys, 'bots-2026-10', 'ed25519');
  const proxy = await startServe({
    env: { UPSTREAM_API_KEY: 'sk-rotation-upstream', UPSTREAM_BASE_URL: 'https://127.0.0.1:9/v1', UPSTREAM_ALLOWED_MODELS: 'gpt-rotation' },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--bot-keys', keys.dir],
    listeners: ['model'],
  });
  const models = (token: string) => send(proxy.ports.model!, 'GET', '/v1/models', { headers: { authorization: `Bearer ${token}` } });
  try {
    const listening = proxy.records().find((r) => r.event === 'listening' && r.listener === 'model')!;
    assert.deepEqual([listening.bot_auth, listening.keys], ['jwt', [{ kid: 'bots-2026-10', alg: 'EdDSA' }]]);

    // Step 0: today's tokens, signed with the old key.
    const oldToken = await mint(oldKey, 'bot-old');
    assert.equal((await models(oldToken)).status, 200);

    // Step 1: the new public key next to the old one.
    const newKey = addKey(keys, 'bots-2026-11', 'ec');
    await reloadedTo(proxy, ['bots-2026-10', 'bots-2026-11']);

    // Step 2: mint with the new key; step 3: old and new accepted together.
    const newToken = await mint(newKey, 'bot-new');
    assert.equal(JSON.parse(Buffer.from(newToken.split('.')[0]!, 'base64url').toString()).kid, 'bots-2026-11');
    assert.equal((await models(newToken)).status, 200);
    assert.equal((await models(oldToken)).status, 200, 'the old key\'s tokens still count during the overlap');

    // Step 4: remove the old key; step 5: its tokens are refused from the next request on.
    rmSync(join(keys.dir, 'bots-2026-10.pem'));
    await reloadedTo(proxy, ['bots-2026-11']);
    const refused = await models(oldToken);
    assert.equal(refused.status, 401);
    assert.match(refused.body.toString(), /the bot token was refused \(unknown key id\)/);
    assert.equal((await models(newToken)).status, 200);

    // A call's line comes a moment after its answer: the secret check reads the lines of all five.
    await proxy.waitForRecord(() => proxy.records().filter((r) => r.event === 'request').length >= 5, 'the five calls\' lines');
    assertNoSecrets(proxy.output(), [oldToken, newToken], 'the gateway log');
    assert.ok(!proxy.records().some((r) => r.event === 'config_error'), 'a clean rotation reports no problem');
  } finally {
    await proxy.stop();
  }
});

test('key rotation on the git proxy: an HS256 key file replaced by an Ed25519 key, both accepted during the overlap, the removed key\'s workload tokens refused with the challenge', { timeout: 90_000 }, async () => {
  const keys = keyDirs('git');
  const upstream: TestUpstream = await startUpstream(pki);
  const secretFile = join(keys.privateDir, 'git-2026-10.hs256');
  writeFileSync(secretFile, `${'r'.repeat(32)}\n`, { mode: 0o600 });
  writeFileSync(join(keys.dir, 'git-2026-10.hs256'), `${'r'.repeat(32)}\n`);
  const proxy = await startServe({
    env: { GIT_HOST_A: upstream.hostKey, GIT_HOST_A_TOKEN: 'tok-rotation', NODE_EXTRA_CA_CERTS: pki.caFile },
    args: ['--git-auth-listen', '127.0.0.1:0', '--git-keys', keys.dir],
  });
  const scope = ['--git-repo', `${upstream.hostKey}/org/*:read`];
  const refs = (token: string) => send(proxy.ports.git!, 'GET', `/${upstream.hostKey}/org/repo.git/info/refs?service=git-upload-pack`, { headers: { authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}` } });
  try {
    const oldToken = await mint(secretFile, 'wl-old', scope);
    assert.equal((await refs(oldToken)).status, 200);

    const newKey = addKey(keys, 'git-2026-11', 'ed25519');
    await reloadedTo(proxy, ['git-2026-10', 'git-2026-11']);
    const newToken = await mint(newKey, 'wl-new', scope);
    assert.equal((await refs(newToken)).status, 200);
    assert.equal((await refs(oldToken)).status, 200);

    rmSync(join(keys.dir, 'git-2026-10.hs256'));
    await reloadedTo(proxy, ['git-2026-11']);
    const refused = await refs(oldToken);
    assert.equal(refused.status, 401);
    assert.equal(refused.headers['www-authenticate'], 'Basic realm="git-proxy"');
    assert.match(refused.body.toString(), /the workload token was refused: unknown key id/);
    assert.equal((await refs(newToken)).status, 200);
    // The refusal's line is written after its answer: wait for it.
    const record = await proxy.waitForRecord((r) => r.event === 'request' && r.status === 401, 'the refusal\'s line');
    assert.equal(record?.token_error, 'unknown key id');
  } finally {
    await proxy.stop();
    await upstream.close();
  }
});

/** The inotify watches this process holds (every fs.watch path is one), from /proc/self/fdinfo. */
function inotifyWatches(): number {
  let watches = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    let target = '';
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue; // closed meanwhile (the directory's own descriptor among them)
    }
    if (target === 'anon_inode:inotify') watches += readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8').split('\n').filter((line) => line.startsWith('inotify wd:')).length;
  }
  return watches;
}

test('a proxy served in process and stopped stops following its key files: the directory watch it added is removed', { timeout: 30_000 }, async () => {
  const keys = keyDirs('stopped');
  writeFileSync(join(keys.dir, 'bot.hs256'), `${'s'.repeat(32)}\n`);
  const before = inotifyWatches();
  const proxy = await startServe({ env: { UPSTREAM_API_KEY: 'sk-x', UPSTREAM_ALLOWED_MODELS: 'm' }, args: ['--model-gateway-listen', '127.0.0.1:0', '--bot-keys', keys.dir], listeners: ['model'] });
  try {
    assert.equal(inotifyWatches(), before + 1, 'the key directory is watched from this process (a proxy served in process: npm test trusts the test CA, so startServe serves here)');
  } finally {
    await proxy.stop();
  }
  assert.equal(inotifyWatches(), before, 'the watch is removed when the proxy stops');
});

test('a private key refused by the listeners: serve stops at start-up naming the file and the openssl command that gives its public key', { timeout: 30_000 }, async () => {
  const keys = keyDirs('refused');
  const privateFile = addKey(keys, 'mixed-up', 'ed25519');
  renameSync(privateFile, join(keys.dir, 'mixed-up.pem'));
  const r = await runCommandInProcess(['serve', '--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off', '--bot-keys', keys.dir], { UPSTREAM_API_KEY: 'sk-x', UPSTREAM_ALLOWED_MODELS: 'm' });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /--bot-keys .*: mixed-up\.pem: a private key; the proxy verifies with the public key only, so that it cannot mint tokens: give it the public key \(openssl pkey -in mixed-up\.pem -pubout\)/);
});

test('the rotation walk of docs/operations.md runs as written: its key block makes the pair, its mint-token line signs with the new kid, and a gateway reading the key directory accepts the token', { timeout: 60_000 }, async () => {
  const doc = readFileSync(join(__dirname, '..', '..', 'docs', 'operations.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Rotating token signing keys'), doc.indexOf('## Revoking a run'));
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)\n\s*```/g)].map((m) => m[1]!.replace(/^ {3}/gm, ''));
  assert.equal(blocks.length, 2, 'step 1 (the key pair) and step 2 (mint-token)');
  const work = join(root, 'doc-walk');
  mkdirSync(work);
  execFileSync('bash', ['-euo', 'pipefail', '-c', blocks[0]!], { cwd: work, stdio: 'pipe' });
  assert.deepEqual(readdirSync(join(work, 'keys')), ['bots-2026-11.pem'], 'only the public key, under its kid, in the proxy\'s directory');
  const mint = /^node proxy\.js (mint-token .*)$/.exec(blocks[1]!.trim());
  assert.ok(mint, blocks[1]);
  const minted = await runCommandInProcess(mint[1]!.split(/\s+/).map((a) => (a.startsWith('private/') ? join(work, a) : a)), {});
  assert.equal(minted.code, 0, minted.stderr);
  const token = minted.stdout.trim();
  assert.equal((JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()) as { kid: string }).kid, 'bots-2026-11');
  // GET /v1/models is the gateway's own answer: no upstream is reached.
  const gw = await startServe({ env: { UPSTREAM_BASE_URL: 'https://127.0.0.1:1', UPSTREAM_API_KEY: 'sk-x', UPSTREAM_ALLOWED_MODELS: 'm' }, args: ['--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off', '--bot-keys', join(work, 'keys')], listeners: ['model'] });
  try {
    assert.equal((await send(gw.ports.model!, 'GET', '/v1/models', { headers: { authorization: `Bearer ${token}` } })).status, 200);
    assert.equal((await send(gw.ports.model!, 'GET', '/v1/models', { headers: { authorization: 'Bearer x.y.z' } })).status, 401, 'control: another token is refused');
  } finally {
    await gw.stop();
  }
});
