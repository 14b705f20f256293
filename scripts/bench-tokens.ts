// What verifying a bot token costs a request, through the verifier the listeners hold
// (src/auth/verifier.ts): HS256 (the environment's key, and a key file's with kid), Ed25519
// and ES256 (minted, low-s, and their high-s twins, which the verifier reads as the minted token),
// each uncached (a different token every call, more tokens than the cache holds) and cached (one
// token again and again, as an agent sends it). Nanoseconds per verification, the
// median of five rounds; the cases take turns within each round, so that a machine busy with
// something else slows them alike and the ratios hold.
//
//   npm run bench:tokens
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { keyRing, signBotToken, type SigningKey, type VerificationKey } from '../src/auth/jwt.ts';
import { composeVerifier, keyRingSource, type TokenVerifier } from '../src/auth/verifier.ts';
import { medianNs, verifyRound } from './bench/ns-per-op.ts';

const ROUNDS = 5;
/** More distinct tokens than the verifier's cache holds (4096), so that cycling through them always misses. */
const DISTINCT = 5000;
const NOW = Math.floor(Date.now() / 1000);

function verifierOf(key: VerificationKey): TokenVerifier {
  const ring = keyRing([key]);
  return composeVerifier([keyRingSource(() => ring, 86_400)]);
}

function tokens(signer: SigningKey, count: number): string[] {
  return Array.from({ length: count }, (_, i) => signBotToken({ sub: `bench-bot-${i}`, workflow: 'bench', run_id: `run-${i}`, iat: NOW, exp: NOW + 3600, jti: randomBytes(12).toString('hex') }, signer));
}

/** The same token with s replaced by n - s (mint-token signs low-s: every twin is high-s), which the verifier reads as the token. */
function highSTwin(token: string): string {
  const n = BigInt('0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551');
  const signature = Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url');
  const s = Buffer.from((n - BigInt(`0x${signature.subarray(32).toString('hex')}`)).toString(16).padStart(64, '0'), 'hex');
  return `${token.slice(0, token.lastIndexOf('.') + 1)}${Buffer.concat([signature.subarray(0, 32), s]).toString('base64url')}`;
}

function pair(type: 'ed25519' | 'ec'): { publicKey: KeyObject; privateKey: KeyObject } {
  return type === 'ed25519' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'P-256' });
}

function main(): void {
  const secret = randomBytes(32);
  const ed = pair('ed25519');
  const ec = pair('ec');
  const cases: { name: string; verify: VerificationKey; sign: SigningKey; calls: number; twins?: true }[] = [
    { name: 'HS256, environment key (no kid)', verify: { kid: undefined, alg: 'HS256', key: secret }, sign: { kid: undefined, alg: 'HS256', key: secret }, calls: 50_000 },
    { name: 'HS256, key file (kid)', verify: { kid: 'k1', alg: 'HS256', key: secret }, sign: { kid: 'k1', alg: 'HS256', key: secret }, calls: 50_000 },
    { name: 'Ed25519 (EdDSA)', verify: { kid: 'ed', alg: 'EdDSA', key: ed.publicKey }, sign: { kid: 'ed', alg: 'EdDSA', key: ed.privateKey }, calls: 5000 },
    { name: 'P-256 (ES256)', verify: { kid: 'ec', alg: 'ES256', key: ec.publicKey }, sign: { kid: 'ec', alg: 'ES256', key: ec.privateKey }, calls: 5000 },
    { name: 'P-256 (ES256), high-s twins', verify: { kid: 'ec', alg: 'ES256', key: ec.publicKey }, sign: { kid: 'ec', alg: 'ES256', key: ec.privateKey }, calls: 5000, twins: true },
  ];
  const runs = cases.flatMap((c) => {
    const many = c.twins ? tokens(c.sign, DISTINCT).map(highSTwin) : tokens(c.sign, DISTINCT);
    return [
      { name: c.name, cached: false, verifier: verifierOf(c.verify), list: many, calls: c.calls, ns: [] as number[] },
      { name: c.name, cached: true, verifier: verifierOf(c.verify), list: many.slice(0, 1), calls: 100_000, ns: [] as number[] },
    ];
  });
  for (const r of runs) verifyRound(r.verifier, r.list, Math.min(r.calls, 2000), NOW); // warm-up
  for (let i = 0; i < ROUNDS; i++) for (const r of runs) r.ns.push(verifyRound(r.verifier, r.list, r.calls, NOW));
  console.log(`ns per verification (median of ${ROUNDS} rounds), node ${process.version}`);
  console.log('| key | uncached | cached (one token again) |');
  console.log('|---|---:|---:|');
  for (const c of cases) {
    const [uncached, cached] = runs.filter((r) => r.name === c.name);
    console.log(`| ${c.name} | ${medianNs(uncached!.ns)} | ${medianNs(cached!.ns)} |`);
  }
}

main();
