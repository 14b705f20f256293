// Interoperability of the service-account verifier with an independent JOSE implementation: the
// `jose` library (pinned, installed outside the tree like the agents of e2e:agents) makes the
// issuer's keys and JWKS and signs Kubernetes-shaped tokens; the BUILT proxy (dist/proxy.js), with
// --sa-issuer and --sa-jwks-url pointing at a fake issuer that serves jose's JWKS over HTTPS,
// must serve a model call for each RS256 and ES256 token jose mints, and refuse, with the reason,
// each jose-minted token it must not take; an ES256 token's twin (s' = n - s) is the same token and
// is served too. Exit 0 when every case holds, 1 otherwise.
//
//   npm run e2e:identity          (builds first; E2E_AGENTS_CACHE_DIR chooses the cache)
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { send } from '../test/support/http-client.ts';
import { startModelUpstream } from '../test/support/model-upstream.ts';
import { startProxy } from '../test/support/proxy-process.ts';
import { makeTestPki } from '../test/support/tls.ts';
import { cacheRoot } from './e2e/install.ts';

const JOSE = { pkg: 'jose', version: '5.9.5' };
const AUDIENCE = 'credential-proxy';
const POD_UID = '0d8b260e-ef0e-45fb-be8e-ff44f97722e8';
const SA_UID = 'e6a8680e-d103-4cce-80ea-03acbbeacf7d';

/** The subset of jose 5's API this script uses. */
interface Jose {
  generateKeyPair(alg: string, opts?: { modulusLength?: number; extractable?: boolean }): Promise<{ publicKey: unknown; privateKey: unknown }>;
  exportJWK(key: unknown): Promise<Record<string, unknown>>;
  SignJWT: new (payload: Record<string, unknown>) => { setProtectedHeader(h: Record<string, unknown>): { sign(key: unknown): Promise<string> } };
  UnsecuredJWT: new (payload: Record<string, unknown>) => { encode(): string };
}

/** jose@version in the cache, installed once (a marker after a verified install). */
function installJose(): string {
  const dir = join(cacheRoot(), `${JOSE.pkg}@${JOSE.version}`);
  const marker = join(dir, '.e2e-installed');
  if (existsSync(marker)) return dir;
  console.log(`installing ${JOSE.pkg}@${JOSE.version} into ${dir}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ private: true, description: `e2e:identity install of ${JOSE.pkg}@${JOSE.version}` }, null, 2)}\n`);
  const r = spawnSync('npm', ['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', `${JOSE.pkg}@${JOSE.version}`], { cwd: dir, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`npm install ${JOSE.pkg}@${JOSE.version} failed: ${(r.stderr || r.stdout).trim().slice(-800)}`);
  writeFileSync(marker, `${JOSE.version}\n`);
  return dir;
}

/** P-256's group order n: an ES256 signature (r, s) and its twin (r, n - s) both verify. */
const P256_ORDER = BigInt('0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551');
const sOf = (token: string) => BigInt(`0x${Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url').subarray(32).toString('hex')}`);
const isHighS = (token: string) => sOf(token) > P256_ORDER / 2n;
function twinOf(token: string): string {
  const signature = Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url');
  const s = Buffer.from((P256_ORDER - sOf(token)).toString(16).padStart(64, '0'), 'hex');
  return `${token.slice(0, token.lastIndexOf('.') + 1)}${Buffer.concat([signature.subarray(0, 32), s]).toString('base64url')}`;
}

function projectedClaims(issuer: string, nowSec: number, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    aud: [AUDIENCE],
    exp: nowSec + 3600,
    iat: nowSec,
    nbf: nowSec,
    iss: issuer,
    jti: '5f0c1b8e-9a53-4c7e-8d1e-2b9c0a7d6e41',
    sub: 'system:serviceaccount:agents:triage',
    'kubernetes.io': { namespace: 'agents', pod: { name: 'triage-0', uid: POD_UID }, serviceaccount: { name: 'triage', uid: SA_UID } },
    ...over,
  };
}

async function main(): Promise<number> {
  const jose = require(join(installJose(), 'node_modules', 'jose')) as Jose;
  const pki = makeTestPki();
  const work = mkdtempSync(join(tmpdir(), 'e2e-identity-'));
  const rsa = await jose.generateKeyPair('RS256', { modulusLength: 2048 });
  const ec = await jose.generateKeyPair('ES256');
  const other = await jose.generateKeyPair('RS256', { modulusLength: 2048 });
  const jwks = { keys: [{ ...(await jose.exportJWK(rsa.publicKey)), kid: 'jose-rsa', alg: 'RS256', use: 'sig' }, { ...(await jose.exportJWK(ec.publicKey)), kid: 'jose-ec', alg: 'ES256', use: 'sig' }] };
  // The issuer: jose's JWKS over HTTPS with the test CA.
  const server = createServer({ key: pki.keyPem, cert: pki.certPem }, (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const model = await startModelUpstream(pki);
  const policy = join(work, 'policy.json');
  writeFileSync(policy, JSON.stringify({ serviceAccounts: { 'agents/*': { models: true } } }));
  const proxy = await startProxy({
    env: { UPSTREAM_BASE_URL: model.baseUrl, UPSTREAM_API_KEY: 'sk-e2e', UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--sa-issuer', issuer, '--sa-audience', AUDIENCE, '--sa-jwks-url', `${issuer}/openid/v1/jwks`, '--sa-ca-file', pki.caFile, '--workload-policy', policy],
    listeners: ['model'],
  });
  let failures = 0;
  try {
    await proxy.waitForRecord((r) => r.event === 'sa_keys_loaded', 'the key set loaded');
    const now = Math.floor(Date.now() / 1000);
    const sign = (key: unknown, header: Record<string, unknown>, over: Record<string, unknown> = {}) => new jose.SignJWT(projectedClaims(issuer, now, over)).setProtectedHeader(header).sign(key);
    const modulus = Buffer.from(String((await jose.exportJWK(rsa.publicKey)).n), 'base64url');
    const cases: { name: string; token: string; expect: 'served' | string }[] = [
      { name: 'RS256 token signed by jose', token: await sign(rsa.privateKey, { alg: 'RS256', kid: 'jose-rsa', typ: 'JWT' }), expect: 'served' },
      { name: 'ES256 token signed by jose', token: await sign(ec.privateKey, { alg: 'ES256', kid: 'jose-ec' }), expect: 'served' },
      { name: 'aud as a string', token: await sign(ec.privateKey, { alg: 'ES256', kid: 'jose-ec' }, { aud: AUDIENCE }), expect: 'served' },
      { name: 'alg none (jose UnsecuredJWT)', token: new jose.UnsecuredJWT(projectedClaims(issuer, now)).encode(), expect: 'malformed token' },
      { name: 'HS256 keyed with the RSA public modulus', token: await sign(modulus, { alg: 'HS256', kid: 'jose-rsa' }), expect: 'algorithm not allowed for this key' },
      { name: 'PS256 over the RSA key', token: await sign(rsa.privateKey, { alg: 'PS256', kid: 'jose-rsa' }), expect: 'algorithm not allowed for this key' },
      { name: 'signed by another key under a known kid', token: await sign(other.privateKey, { alg: 'RS256', kid: 'jose-rsa' }), expect: 'bad signature' },
      { name: 'no kid', token: await sign(rsa.privateKey, { alg: 'RS256' }), expect: 'token has no key id' },
      { name: 'another audience', token: await sign(rsa.privateKey, { alg: 'RS256', kid: 'jose-rsa' }, { aud: ['https://kubernetes.default.svc'] }), expect: 'wrong audience' },
      { name: 'expired', token: await sign(rsa.privateKey, { alg: 'RS256', kid: 'jose-rsa' }, { iat: now - 7200, nbf: now - 7200, exp: now - 3600 }), expect: 'expired' },
      { name: 'a year long (the API server\'s extended token)', token: await sign(rsa.privateKey, { alg: 'RS256', kid: 'jose-rsa' }, { exp: now + 365 * 86_400 }), expect: 'lifetime too long' },
      { name: 'crit header', token: await sign(rsa.privateKey, { alg: 'RS256', kid: 'jose-rsa', crit: ['b64'], b64: true }), expect: 'unsupported critical header' },
      { name: 'bound to a Secret, not a pod', token: await sign(rsa.privateKey, { alg: 'RS256', kid: 'jose-rsa' }, { 'kubernetes.io': { namespace: 'agents', secret: { name: 's', uid: POD_UID }, serviceaccount: { name: 'triage', uid: SA_UID } } }), expect: 'token not bound to a pod' },
    ];
    // One string per token: jose leaves s as OpenSSL computes it, above n/2 about half of the time.
    // A token of either form, and the twin of each (s' = n - s), is served: the twin is the same token.
    const esTokens = await Promise.all(Array.from({ length: 32 }, () => sign(ec.privateKey, { alg: 'ES256', kid: 'jose-ec' })));
    const highS = esTokens.filter(isHighS);
    console.log(`jose signed ${esTokens.length} ES256 tokens, ${highS.length} of them with s > n/2`);
    const lowS = esTokens.find((t) => !isHighS(t));
    for (const [form, token] of [['a high s', highS[0]], ['a low s', lowS]] as const) {
      if (token === undefined) continue; // all 32 of one form: chance 2^-31
      cases.push({ name: `ES256 token signed by jose with ${form}`, token, expect: 'served' }, { name: `the twin (n - s) of jose's token with ${form}`, token: twinOf(token), expect: 'served' });
    }
    for (const c of cases) {
      const res = await send(proxy.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${c.token}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
      const body = res.body.toString();
      // A refusal's message ends with the verifier's reason: 'the service-account token was refused: <why>'.
      const got = res.status === 200 ? 'served' : (/token was refused: (.*)$/.exec(refusalMessage(body))?.[1] ?? `${res.status} ${body.slice(0, 200)}`);
      const ok = got === c.expect;
      if (!ok) failures++;
      console.log(`${ok ? 'ok  ' : 'FAIL'} ${c.name}: ${got}${ok ? '' : ` (expected ${c.expect})`}`);
    }
  } finally {
    await proxy.stop();
    await model.close();
    server.closeAllConnections();
    server.close();
    pki.cleanup();
    rmSync(work, { recursive: true, force: true });
  }
  console.log(failures === 0 ? `e2e:identity: every case holds (jose@${JOSE.version})` : `e2e:identity: ${failures} case(s) failed`);
  return failures === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    console.error(`e2e:identity: ${err.stack ?? err.message}`);
    process.exit(1);
  },
);

/** The error message of an OpenAI-format refusal body, or '' when the body is not one. */
function refusalMessage(body: string): string {
  try {
    const message: unknown = (JSON.parse(body) as { error?: { message?: unknown } }).error?.message;
    return typeof message === 'string' ? message : '';
  } catch {
    return '';
  }
}
