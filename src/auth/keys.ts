// Token keys from files: one file is one key, and its name says which key and of what kind.
//
//   KID.pem     a PEM key: an Ed25519 key (tokens signed EdDSA) or a P-256 key (ES256). The
//               listeners take the public key only (`BEGIN PUBLIC KEY`): a private key given to
//               them is refused, so that the proxy can verify tokens but never mint one;
//               mint-token takes the private key (`BEGIN PRIVATE KEY`, or `BEGIN EC PRIVATE KEY`).
//   KID.hs256   an HS256 secret: the file's bytes (one trailing newline dropped), at least 32.
//               A shared secret: whoever can verify with it can mint with it. Bytes that are a
//               key's text (PEM, a JWK, an SSH public key) are refused: see publicKeyAsSecretProblem.
//
// The key id (the `kid` tokens name in their header) is the file name without its extension, of
// letters, digits, '.', '_' and '-' (64 at most, a letter or digit first). The key's type fixes
// the algorithm its tokens must name: an Ed25519 key verifies EdDSA only, a P-256 key ES256 only,
// a secret HS256 only. Pure: names and bytes in, keys out; a problem is an Error saying what to fix.
import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { hs256Secret, type SigningKey, type TokenAlgorithm, type VerificationKey } from './jwt.ts';

/** A key id as a file name gives it: a closed alphabet, so it is a harmless log field and never a path. */
export const KEY_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The extensions of key files; anything else in a key directory is a mistake to report. */
const PEM = '.pem';
const SECRET = '.hs256';

/** Pure: whether a directory entry is one the key files ignore: hidden ones (a Kubernetes secret mount's `..data`). */
export function isIgnoredKeyEntry(name: string): boolean {
  return name.startsWith('.');
}

/** Pure: the kid and kind a key file's name gives, or why the name is not a key file's. */
function keyFileName(name: string): { kid: string; kind: 'pem' | 'secret' } {
  const kind = name.endsWith(PEM) ? 'pem' : name.endsWith(SECRET) ? 'secret' : undefined;
  if (kind === undefined) throw new Error(`${name}: not a key file: name it KID.pem (an Ed25519 or P-256 key) or KID.hs256 (an HS256 secret)`);
  const kid = name.slice(0, name.length - (kind === 'pem' ? PEM : SECRET).length);
  if (!KEY_ID.test(kid)) throw new Error(`${name}: the key id "${kid.slice(0, 80)}" must be 1 to 64 letters, digits, '.', '_' or '-', beginning with a letter or digit: rename the file`);
  return { kid, kind };
}

/** Pure: an HS256 secret from a file's bytes: one trailing newline (an editor's, or echo's) dropped; at least 32 bytes. */
export function secretFromFile(what: string, bytes: Buffer): Buffer {
  const end = bytes.at(-1) === 0x0a ? (bytes.at(-2) === 0x0d ? bytes.length - 2 : bytes.length - 1) : bytes.length;
  return hs256Secret(what, Buffer.from(bytes.subarray(0, end)), 'openssl rand -hex 32 > FILE');
}

/** Pure: the algorithm a key object fixes, or why it fixes none we take. */
function algorithmOf(name: string, key: KeyObject): TokenAlgorithm {
  if (key.asymmetricKeyType === 'ed25519') return 'EdDSA';
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return 'ES256';
  const what = key.asymmetricKeyType === 'ec' ? `an EC key on ${key.asymmetricKeyDetails?.namedCurve ?? 'another curve'}` : `a ${key.asymmetricKeyType ?? 'non-asymmetric'} key`;
  throw new Error(`${name}: ${what}; a token key must be Ed25519 (openssl genpkey -algorithm ed25519) or P-256 (openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256)`);
}

/** Pure: a PEM text's key object, or why it holds none. */
function pemKey(name: string, text: string, use: 'verify' | 'sign'): KeyObject {
  const isPrivate = /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text);
  if (use === 'verify' && isPrivate) {
    throw new Error(`${name}: a private key; the proxy verifies with the public key only, so that it cannot mint tokens: give it the public key (openssl pkey -in ${name} -pubout) and keep this one for mint-token`);
  }
  if (use === 'sign' && !isPrivate) throw new Error(`${name}: mint-token signs with a private key (BEGIN PRIVATE KEY), not a public one`);
  try {
    return use === 'verify' ? createPublicKey({ key: text, format: 'pem' }) : createPrivateKey({ key: text, format: 'pem' });
  } catch {
    // Node's message may quote the input: ours names the file and says what it should hold.
    throw new Error(`${name}: not a PEM ${use === 'verify' ? 'public' : 'private'} key (an encrypted key is not taken)`);
  }
}

/** Pure: a listener's verification key from a key file (its name without the directory, and its bytes). */
export function verificationKeyFile(name: string, bytes: Buffer): VerificationKey {
  const { kid, kind } = keyFileName(name);
  if (kind === 'secret') return { kid, alg: 'HS256', key: secretFromFile(name, bytes) };
  const key = pemKey(name, bytes.toString('utf8'), 'verify');
  return { kid, alg: algorithmOf(name, key), key };
}

/** Pure: mint-token's signing key from a key file (its name without the directory, and its bytes). */
export function signingKeyFile(name: string, bytes: Buffer): SigningKey {
  const { kid, kind } = keyFileName(name);
  if (kind === 'secret') return { kid, alg: 'HS256', key: secretFromFile(name, bytes) };
  const key = pemKey(name, bytes.toString('utf8'), 'sign');
  return { kid, alg: algorithmOf(name, key), key };
}
