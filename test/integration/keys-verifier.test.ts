// Tokens signed and checked by openssl, an independent implementation of Ed25519 and ES256,
// against the verifier the listeners hold (src/auth/verifier.ts, our keys' source). The
// verifier's own rules and mint-token's choice of key are test/unit/keys-verifier.test.ts.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { keyRing, signBotToken, type BotClaims, type KeyRing } from '../../src/auth/jwt.ts';
import { signingKeyFile, verificationKeyFile } from '../../src/auth/keys.ts';
import { composeVerifier, keyRingSource, type Verification } from '../../src/auth/verifier.ts';

const NOW = 1_700_000_000;
const CLAIMS: BotClaims = { sub: 'bot-1', workflow: 'wf', run_id: 'run-1', iat: NOW - 10, exp: NOW + 600 };
const dir = mkdtempSync(join(tmpdir(), 'keys-verifier-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Our keys' source over a ring the test may swap, as a re-read of the key files does. */
function swappable(initial: KeyRing) {
  let ring = initial;
  const verifier = composeVerifier([keyRingSource(() => ring, 3600)]);
  return { set: (next: KeyRing) => (ring = next), verify: (token: string, nowSec = NOW, kind: 'bot' | 'git' = 'bot') => verifier.verify(kind, { token }, nowSec) as Verification };
}
const why = (v: Verification) => (v.ok ? 'accepted' : v.reason);

/** openssl, an independent implementation, signs and verifies; our code does the other side. */
function openssl(args: string[], input?: Buffer): Buffer {
  return execFileSync('openssl', args, { input, stdio: ['pipe', 'pipe', 'pipe'] });
}

/** An ECDSA DER signature (SEQUENCE of two INTEGERs) as JOSE's r||s, 32 bytes each. */
function derToJose(der: Buffer): Buffer {
  let at = 2 + (der[1]! & 0x80 ? der[1]! & 0x7f : 0);
  const part = () => {
    const length = der[at + 1]!;
    const bytes = der.subarray(at + 2, at + 2 + length);
    at += 2 + length;
    return Buffer.concat([Buffer.alloc(32), bytes.subarray(bytes.length > 32 ? bytes.length - 32 : 0)]).subarray(-32);
  };
  return Buffer.concat([part(), part()]);
}

function joseToDer(jose: Buffer): Buffer {
  const integer = (b: Buffer) => {
    let v = b;
    while (v.length > 1 && v[0] === 0 && !(v[1]! & 0x80)) v = v.subarray(1);
    if (v[0]! & 0x80) v = Buffer.concat([Buffer.from([0]), v]);
    return Buffer.concat([Buffer.from([0x02, v.length]), v]);
  };
  const body = Buffer.concat([integer(jose.subarray(0, 32)), integer(jose.subarray(32))]);
  return Buffer.concat([Buffer.from([0x30, body.length]), body]);
}

test('interoperability with openssl: tokens signed by openssl (Ed25519, and ES256 turned from DER into r||s) verify; our ES256 signature verifies in openssl', () => {
  const edKey = join(dir, 'ed.key');
  const ecKey = join(dir, 'ec.key');
  openssl(['genpkey', '-algorithm', 'ed25519', '-out', edKey]);
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', ecKey]);
  const ring = keyRing([verificationKeyFile('ossl-ed.pem', openssl(['pkey', '-in', edKey, '-pubout'])), verificationKeyFile('ossl-ec.pem', openssl(['pkey', '-in', ecKey, '-pubout']))]);
  const v = swappable(ring);
  const b64 = (x: unknown) => Buffer.from(JSON.stringify(x)).toString('base64url');
  const inputFile = join(dir, 'input');

  const edInput = `${b64({ alg: 'EdDSA', typ: 'JWT', kid: 'ossl-ed' })}.${b64(CLAIMS)}`;
  writeFileSync(inputFile, edInput);
  const edSig = openssl(['pkeyutl', '-sign', '-rawin', '-inkey', edKey, '-in', inputFile]);
  assert.equal(why(v.verify(`${edInput}.${edSig.toString('base64url')}`)), 'accepted');

  const ecInput = `${b64({ alg: 'ES256', typ: 'JWT', kid: 'ossl-ec' })}.${b64(CLAIMS)}`;
  writeFileSync(inputFile, ecInput);
  const der = openssl(['dgst', '-sha256', '-sign', ecKey, inputFile]);
  assert.equal(why(v.verify(`${ecInput}.${derToJose(der).toString('base64url')}`)), 'accepted');
  assert.equal(why(v.verify(`${ecInput}.${der.toString('base64url')}`)), 'bad signature', 'DER as it comes from openssl is not JOSE');

  const ours = signBotToken(CLAIMS, signingKeyFile('ossl-ec.pem', readFileSync(ecKey)));
  const [h, p, s] = ours.split('.') as [string, string, string];
  writeFileSync(inputFile, `${h}.${p}`);
  writeFileSync(join(dir, 'sig.der'), joseToDer(Buffer.from(s, 'base64url')));
  writeFileSync(join(dir, 'ec.pub'), openssl(['pkey', '-in', ecKey, '-pubout']));
  assert.match(openssl(['dgst', '-sha256', '-verify', join(dir, 'ec.pub'), '-signature', join(dir, 'sig.der'), inputFile]).toString(), /Verified OK/);
});
