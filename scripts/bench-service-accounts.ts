// What verifying a Kubernetes service-account token costs a request, against today's HS256 bot
// token, through the verifier a listener holds with --sa-issuer: the service-account source first,
// the listener's own keys behind it. Cases: HS256 alone (no --sa-issuer: the figure before), HS256
// behind the service-account source (what --sa-issuer adds to every minted token: reading the
// unverified iss), and service-account tokens signed RS256 (2048 bits) and ES256, each uncached (a
// different token every call, more tokens than the cache holds) and cached (one token again and
// again, as a pod sends its projected token until the kubelet rewrites it). Nanoseconds per
// verification, the median of five rounds; the cases take turns within each round, in reverse
// order every other round.
//
//   npm run bench:service-accounts
import { randomBytes } from 'node:crypto';
import { signBotToken } from '../src/auth/jwt.ts';
import { parseJwks } from '../src/auth/jwks.ts';
import type { KeySetSource } from '../src/auth/jwks-source.ts';
import { serviceAccountSource } from '../src/auth/service-account-source.ts';
import { composeVerifier, keyRingSource, type TokenVerifier } from '../src/auth/verifier.ts';
import { medianNs, verifyRound } from './bench/ns-per-op.ts';
import { keyRing } from '../src/auth/jwt.ts';
import { parseWorkloadPolicy } from '../src/auth/workload-policy.ts';
import { canonicalScope } from '../src/git/scope.ts';
import { ecSigner, jwksOf, rsaSigner, saPayload, signSaToken, TEST_AUDIENCE, TEST_ISSUER, type SaSigner } from '../test/support/service-accounts.ts';

const ROUNDS = 5;
/** More distinct tokens than either cache holds (4096). */
const DISTINCT = 5000;
const NOW = Math.floor(Date.now() / 1000);

const secret = randomBytes(32);
const rsa = rsaSigner('bench-rsa');
const ec = ecSigner('bench-ec');
const parsed = parseJwks(JSON.stringify(jwksOf(rsa, ec)));
if (!parsed.ok) throw new Error(parsed.reason);
const keySet: KeySetSource = { current: () => parsed.set.keys, refresh: async () => parsed.set.keys, close: () => undefined };
const policy = parseWorkloadPolicy(JSON.stringify({ serviceAccounts: { 'bench/*': { models: true } } }), 'bench-policy.json', canonicalScope);
const ring = keyRing([{ kid: undefined, alg: 'HS256', key: secret }]);

const ownKeys = (): TokenVerifier => composeVerifier([keyRingSource(() => ring, 86_400)]);
const withServiceAccounts = (): TokenVerifier =>
  composeVerifier([serviceAccountSource({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, maxLifetimeSec: 86_400, keys: keySet, policy: () => policy }), keyRingSource(() => ring, 86_400)]);

const minted = (count: number) => Array.from({ length: count }, (_, i) => signBotToken({ sub: `bench-bot-${i}`, workflow: 'bench', run_id: `run-${i}`, iat: NOW, exp: NOW + 3600 }, secret));
const projected = (signer: SaSigner, count: number) => Array.from({ length: count }, (_, i) => signSaToken(signer, saPayload({ namespace: 'bench', serviceAccount: 'agent', pod: `agent-${i}` }, NOW)));

function main(): void {
  const hs = minted(DISTINCT);
  const rs = projected(rsa, DISTINCT);
  const es = projected(ec, DISTINCT);
  const runs = [
    { name: 'HS256 minted, own keys only (before)', verifier: ownKeys(), list: hs, calls: 50_000 },
    { name: 'HS256 minted, behind --sa-issuer', verifier: withServiceAccounts(), list: hs, calls: 50_000 },
    { name: 'service account RS256, uncached', verifier: withServiceAccounts(), list: rs, calls: 5000 },
    { name: 'service account RS256, cached', verifier: withServiceAccounts(), list: rs.slice(0, 1), calls: 100_000 },
    { name: 'service account ES256, uncached', verifier: withServiceAccounts(), list: es, calls: 5000 },
    { name: 'service account ES256, cached', verifier: withServiceAccounts(), list: es.slice(0, 1), calls: 100_000 },
  ].map((r) => ({ ...r, ns: [] as number[] }));
  for (const r of runs) verifyRound(r.verifier, r.list, Math.min(r.calls, 2000), NOW); // warm-up
  // The order is reversed every other round, so that no case always follows the same one.
  for (let i = 0; i < ROUNDS; i++) for (const r of i % 2 === 0 ? runs : [...runs].reverse()) r.ns.push(verifyRound(r.verifier, r.list, r.calls, NOW));
  const base = medianNs(runs[0]!.ns);
  console.log(`node ${process.version}, ${ROUNDS} rounds, median ns per verification (x: against HS256 before)`);
  for (const r of runs) console.log(`  ${r.name.padEnd(40)} ${String(medianNs(r.ns)).padStart(8)} ns  ${(medianNs(r.ns) / base).toFixed(2)}x`);
}

main();
