// A key's text is never an HS256 secret (security review 2026-11-26, finding 1): a KID.hs256 file,
// MODEL_/GIT_PROXY_SIGNING_KEY_FILE or the variable itself holding a public key's PEM, a JWK or an
// SSH public key would let whoever has that public key mint any token. Each is refused where the
// secret is read, with a message saying where a public key goes and how to make a secret.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { parseSigningKey } from '../../src/auth/jwt.ts';
import { KeyFiles } from '../../src/auth/key-files.ts';
import { signingKeyFile, verificationKeyFile } from '../../src/auth/keys.ts';
import { rsaKeyPair } from '../support/test-keys.ts';

const root = mkdtempSync(join(tmpdir(), 'public-key-as-secret-'));
after(() => rmSync(root, { recursive: true, force: true }));

const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const ed = generateKeyPairSync('ed25519');
const rsa = rsaKeyPair(2048);
/** Key texts an operator might copy where a secret belongs, each 32 bytes or more. */
const KEY_TEXTS: Record<string, string> = {
  'P-256 public PEM': ec.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  'Ed25519 public PEM': ed.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  'RSA public PEM (PKCS#1)': rsa.publicKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
  'private PEM': ec.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  'a certificate header after a comment': `# the issuer's\n-----BEGIN CERTIFICATE-----\n${'A'.repeat(64)}\n-----END CERTIFICATE-----\n`,
  JWK: JSON.stringify({ ...ec.publicKey.export({ format: 'jwk' }), kid: 'k1' }),
  'JWK set, spaced': JSON.stringify({ keys: [ed.publicKey.export({ format: 'jwk' })] }, null, 2),
  'SSH Ed25519 public key': `ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI${'B'.repeat(43)} ops@example\n`,
  'SSH ECDSA public key': `ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTY${'C'.repeat(40)} ops@example\n`,
};
const ADVICE = /not an HS256 secret; used as one, whoever has that key could mint tokens\. A public key goes in a file named KID\.pem \(--bot-keys, --git-keys\); an HS256 secret is random bytes \(openssl rand -hex 32\)$/;

test('public key as secret refused: a KID.hs256 file holding PEM text, a JWK or an SSH public key stops the listener (and mint-token), naming the file and saying to name it KID.pem or make a secret with openssl rand -hex 32', () => {
  for (const [what, text] of Object.entries(KEY_TEXTS)) {
    assert.throws(() => verificationKeyFile('bot-2026.hs256', Buffer.from(text)), (err: Error) => err.message.startsWith('bot-2026.hs256: holds ') && ADVICE.test(err.message), what);
    assert.throws(() => signingKeyFile('bot-2026.hs256', Buffer.from(text)), ADVICE, `mint-token: ${what}`);
  }
  // A secret made as the docs say still loads, hex or base64.
  assert.equal(verificationKeyFile('a.hs256', Buffer.from('9f'.repeat(32) + '\n')).alg, 'HS256');
  assert.equal(verificationKeyFile('b.hs256', Buffer.from(`${Buffer.alloc(33, 0xfb).toString('base64')}\n`)).alg, 'HS256');
});

test('public key as secret refused: MODEL_PROXY_SIGNING_KEY_FILE / GIT_PROXY_SIGNING_KEY_FILE holding a public key stops start-up naming the variable and the file', () => {
  for (const [what, text] of Object.entries(KEY_TEXTS)) {
    const file = join(root, 'signing-key');
    writeFileSync(file, text);
    assert.throws(
      () => new KeyFiles({ path: file, kind: 'secret', name: 'GIT_PROXY_SIGNING_KEY_FILE' }),
      (err: Error) => err.message.startsWith(`GIT_PROXY_SIGNING_KEY_FILE ${file}: signing-key: holds `) && ADVICE.test(err.message),
      what,
    );
  }
});

test('public key as secret refused: MODEL_PROXY_SIGNING_KEY / GIT_PROXY_SIGNING_KEY holding a public key is an error naming the variable, never showing the value', () => {
  for (const [what, text] of Object.entries(KEY_TEXTS)) {
    assert.throws(
      () => parseSigningKey('MODEL_PROXY_SIGNING_KEY', text),
      (err: Error) => err.message.startsWith('MODEL_PROXY_SIGNING_KEY: holds ') && ADVICE.test(err.message) && !err.message.includes(text.trim().slice(12, 40)),
      what,
    );
  }
  assert.equal(parseSigningKey('MODEL_PROXY_SIGNING_KEY', 'ab'.repeat(32))?.length, 64);
});

test('public key as secret refused: a key file that becomes a public key on a re-read keeps its last good secret, reported', () => {
  const file = join(root, 'rotating.hs256');
  writeFileSync(file, 'cd'.repeat(32));
  const files = new KeyFiles({ path: file, kind: 'keys', name: '--git-keys' });
  const before = files.keys[0];
  writeFileSync(file, KEY_TEXTS['P-256 public PEM']!);
  const { changed, problems } = files.reread();
  assert.equal(changed, false);
  assert.equal(files.keys[0], before);
  assert.equal(problems.length, 1);
  assert.match(problems[0]!, /^rotating\.hs256: holds PEM text \(a key or certificate\), not an HS256 secret; .*; its key read before stays$/);
});
