// RSA key pairs for tests, made once per checkout instead of once per use: generating a 2048-bit
// pair costs 50 ms to over a second of CPU (finding primes is a random walk), and some twenty
// test files made one or more at load time, about 10 s of the suite's CPU in all.
//
// Within a process every call returns a different pair, as generateKeyPairSync would: the n-th
// call for a size is the n-th cached pair of that size. Different processes get the same pairs,
// which no test can tell apart from fresh ones (no test compares keys across processes). The
// cache is node_modules/.cache/test-keys/rsa-<bits>-<n>.pem; the first process to need a pair
// writes it to a file of its own and renames it into place, so parallel test files never read a
// half-written key.
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const CACHE = join(__dirname, '..', '..', 'node_modules', '.cache', 'test-keys');
const used = new Map<number, number>();

export interface TestKeyPair {
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
}

/** A new RSA key pair (for this process) of `modulusLength` bits, from the cache when it is there. */
export function rsaKeyPair(modulusLength = 2048): TestKeyPair {
  const n = used.get(modulusLength) ?? 0;
  used.set(modulusLength, n + 1);
  const file = join(CACHE, `rsa-${modulusLength}-${n}.pem`);
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch {
    pem = generateKeyPairSync('rsa', { modulusLength }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    mkdirSync(CACHE, { recursive: true });
    const making = `${file}.${process.pid}`;
    writeFileSync(making, pem, { mode: 0o600 });
    renameSync(making, file);
  }
  const privateKey = createPrivateKey(pem);
  return { privateKey, publicKey: createPublicKey(privateKey) };
}
