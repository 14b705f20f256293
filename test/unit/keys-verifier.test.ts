// The verifier the listeners hold (src/auth/verifier.ts): sources asked in order, the first answer
// final; our keys' source with its per-token cache of asymmetric verifications, which never
// outlives the token's exp or its key; and mint-token's choice of key (src/run/keys.ts). Tokens
// signed and checked by openssl: test/integration/keys-verifier.test.ts.
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { keyRing, signBotToken, type BotClaims, type KeyRing, type VerificationKey } from '../../src/auth/jwt.ts';
import { signingKeyFile, verificationKeyFile } from '../../src/auth/keys.ts';
import { composeVerifier, keyRingSource, type TokenSource, type Verification } from '../../src/auth/verifier.ts';
import { describeKeys, loadListenerKeys, mintingKey, openVerifier } from '../../src/run/keys.ts';

const NOW = 1_700_000_000;
const CLAIMS: BotClaims = { sub: 'bot-1', workflow: 'wf', run_id: 'run-1', iat: NOW - 10, exp: NOW + 600 };
const dir = mkdtempSync(join(tmpdir(), 'keys-verifier-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const ed = generateKeyPairSync('ed25519');
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const pem = (k: KeyObject) => Buffer.from(k.export({ type: k.type === 'public' ? 'spki' : 'pkcs8', format: 'pem' }).toString());
const ED: VerificationKey = verificationKeyFile('ed.pem', pem(ed.publicKey));
const EC: VerificationKey = verificationKeyFile('ec.pem', pem(ec.publicKey));

/** Our keys' source over a ring the test may swap, as a re-read of the key files does. */
function swappable(initial: KeyRing) {
  let ring = initial;
  const verifier = composeVerifier([keyRingSource(() => ring, 3600)]);
  return { set: (next: KeyRing) => (ring = next), verify: (token: string, nowSec = NOW, kind: 'bot' | 'git' = 'bot') => verifier.verify(kind, { token }, nowSec) as Verification };
}
const why = (v: Verification) => (v.ok ? 'accepted' : v.reason);

test('cached token refused after key removal: a verified Ed25519 token is refused from the next request once its key leaves the ring, and when its kid names a new key', () => {
  const v = swappable(keyRing([ED, EC]));
  const token = signBotToken(CLAIMS, signingKeyFile('ed.pem', pem(ed.privateKey)));
  assert.equal(why(v.verify(token)), 'accepted');
  assert.equal(why(v.verify(token)), 'accepted', 'from the cache');
  v.set(keyRing([EC]));
  assert.equal(why(v.verify(token)), 'unknown key id');
  v.set(keyRing([EC, verificationKeyFile('ed.pem', pem(generateKeyPairSync('ed25519').publicKey))]));
  assert.equal(why(v.verify(token)), 'bad signature', 'a new key under the old kid verifies afresh');
  v.set(keyRing([ED, EC]));
  assert.equal(why(v.verify(token)), 'accepted', 'the key back, the token is good again');
});

test('cached token refused after key removal, HS256 too: a secret replaced (its *_FILE rewritten) refuses the tokens of the old one from the next request', () => {
  const oldSecret = Buffer.from('o'.repeat(32));
  const v = swappable(keyRing([{ kid: undefined, alg: 'HS256', key: oldSecret }]));
  const token = signBotToken(CLAIMS, oldSecret);
  assert.equal(why(v.verify(token)), 'accepted');
  assert.equal(why(v.verify(token)), 'accepted', 'from the cache');
  v.set(keyRing([{ kid: undefined, alg: 'HS256', key: Buffer.from('n'.repeat(32)) }]));
  assert.equal(why(v.verify(token)), 'bad signature');
  v.set(keyRing([{ kid: 'files', alg: 'HS256', key: oldSecret }]));
  assert.equal(why(v.verify(token)), 'token has no key id', 'the same bytes under a kid are another key');
});

test('cached token expires at its exp: past exp (and the 30 s leeway) a cached token is verified afresh, and refused', () => {
  const v = swappable(keyRing([EC]));
  const token = signBotToken(CLAIMS, signingKeyFile('ec.pem', pem(ec.privateKey)));
  assert.equal(why(v.verify(token, NOW)), 'accepted');
  assert.equal(why(v.verify(token, CLAIMS.exp + 29)), 'accepted');
  assert.equal(why(v.verify(token, CLAIMS.exp + 30)), 'expired');
});

test('cached token keeps the listener rules: a cached git token is still refused by the gateway, a cached bot token by the git proxy', () => {
  const v = swappable(keyRing([ED]));
  const signer = signingKeyFile('ed.pem', pem(ed.privateKey));
  const gitToken = signBotToken({ ...CLAIMS, git: ['github.com/acme/*:read'] }, signer);
  const botToken = signBotToken(CLAIMS, signer);
  assert.equal(why(v.verify(gitToken, NOW, 'git')), 'accepted');
  assert.equal(why(v.verify(gitToken, NOW, 'bot')), 'meant for the git proxy');
  assert.equal(why(v.verify(botToken, NOW, 'bot')), 'accepted');
  assert.equal(why(v.verify(botToken, NOW, 'git')), 'no git scope');
});

test('sources are asked in order and the first answer is final: a later source never sees a token an earlier one refused; a waiting source makes the answer a promise', async () => {
  const asked: string[] = [];
  const source = (name: string, answer: (token: string | undefined) => Verification | undefined | Promise<Verification | undefined>): TokenSource => ({
    name,
    verify: (_kind, presented) => (asked.push(name), answer(presented.token)),
  });
  const claims = { ...CLAIMS, sub: 'from-b' };
  const verifier = composeVerifier([
    source('a', (t) => (t === 'for-a' ? { ok: false, reason: 'refused by a' } : undefined)),
    source('b', async (t) => (t === 'for-b' ? { ok: true, claims } : undefined)),
    source('c', (t) => (t === undefined ? undefined : { ok: false, reason: 'refused by c' })),
  ]);
  assert.deepEqual(verifier.verify('bot', { token: 'for-a' }, NOW), { ok: false, reason: 'refused by a' });
  assert.deepEqual(asked.splice(0), ['a']);
  const waited = verifier.verify('bot', { token: 'for-b' }, NOW);
  assert.ok(waited instanceof Promise);
  assert.deepEqual(await waited, { ok: true, claims });
  assert.deepEqual(asked.splice(0), ['a', 'b']);
  assert.deepEqual(await verifier.verify('bot', { token: 'other' }, NOW), { ok: false, reason: 'refused by c' });
  assert.deepEqual(asked.splice(0), ['a', 'b', 'c']);
  assert.deepEqual(await verifier.verify('git', {}, NOW), { ok: false, reason: 'no token', absent: true }, 'nothing presented: the listener asks for a token');
  assert.deepEqual(composeVerifier([]).verify('bot', { token: 'x' }, NOW), { ok: false, reason: 'no verifier for this token' });
});

test('mint-token\'s key: --signing-key FILE (a private key, its kid the file name), else the variable or its _FILE; both set, a public key, or an unreadable file is an error', () => {
  const priv = join(dir, 'bots-2026.pem');
  writeFileSync(priv, pem(ed.privateKey));
  const key = mintingKey('model', {}, priv)!;
  assert.deepEqual([key.kid, key.alg], ['bots-2026', 'EdDSA']);
  assert.equal(mintingKey('model', {}, undefined), undefined);
  assert.deepEqual(mintingKey('git', { GIT_PROXY_SIGNING_KEY: 's'.repeat(32) }, undefined), { kid: undefined, alg: 'HS256', key: Buffer.from('s'.repeat(32)) });
  const secretFile = join(dir, 'secret');
  writeFileSync(secretFile, `${'f'.repeat(32)}\n`);
  assert.deepEqual(mintingKey('model', { MODEL_PROXY_SIGNING_KEY_FILE: secretFile }, undefined), { kid: undefined, alg: 'HS256', key: Buffer.from('f'.repeat(32)) });
  assert.throws(() => mintingKey('model', { MODEL_PROXY_SIGNING_KEY: 's'.repeat(32), MODEL_PROXY_SIGNING_KEY_FILE: secretFile }, undefined), /^Error: mint-token: MODEL_PROXY_SIGNING_KEY and MODEL_PROXY_SIGNING_KEY_FILE are both set: set one$/);
  const pub = join(dir, 'pub.pem');
  writeFileSync(pub, pem(ed.publicKey));
  assert.throws(() => mintingKey('model', {}, pub), /^Error: mint-token: --signing-key pub\.pem: mint-token signs with a private key/);
  assert.throws(() => mintingKey('git', {}, join(dir, 'absent.pem')), /^Error: mint-token: --signing-key .*absent\.pem cannot be read \(ENOENT\)$/);
});

test('listener keys: the variable or its _FILE, not both; with key files beside them; none at all is network-policy mode', () => {
  const secretFile = join(dir, 'listener-secret');
  writeFileSync(secretFile, 'q'.repeat(32));
  const keysDir = join(dir, 'listener-keys');
  mkdirSync(keysDir);
  writeFileSync(join(keysDir, 'ed.pem'), pem(ed.publicKey));
  assert.equal(loadListenerKeys('model', undefined, {}, undefined), undefined);
  assert.throws(() => loadListenerKeys('git', Buffer.from('s'.repeat(32)), { GIT_PROXY_SIGNING_KEY_FILE: secretFile }, undefined), /^Error: GIT_PROXY_SIGNING_KEY and GIT_PROXY_SIGNING_KEY_FILE are both set: set one \(the file is re-read when it changes\)$/);
  const keys = loadListenerKeys('model', undefined, { MODEL_PROXY_SIGNING_KEY_FILE: secretFile }, keysDir)!;
  const opened = openVerifier(keys, 3600, { log: () => {} })!;
  assert.deepEqual(describeKeys(opened.ring()), [{ kid: null, alg: 'HS256' }, { kid: 'ed', alg: 'EdDSA' }]);
  const fromFile = signBotToken(CLAIMS, Buffer.from('q'.repeat(32)));
  const fromKey = signBotToken(CLAIMS, signingKeyFile('ed.pem', pem(ed.privateKey)));
  for (const token of [fromFile, fromKey]) assert.equal(why(opened.source.verify('bot', { token }, NOW) as Verification), 'accepted');
  assert.throws(() => loadListenerKeys('git', undefined, {}, join(dir, 'no-such-dir')), /^Error: --git-keys .*no-such-dir cannot be read \(ENOENT\)$/);
});
