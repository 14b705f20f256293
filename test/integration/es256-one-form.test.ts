// One string per token, on the model gateway as `serve` starts it: an ES256 token and its high-s
// twin (same r, s' = n - s) are one token. Both forms are served, as the same identity, for bot
// tokens (mint-token with a P-256 key, the proxy holding its public key in --bot-keys) and for
// Kubernetes service-account tokens (--sa-jwks-file). The service-account tokens are signed with
// node:crypto's sign (dsaEncoding 'ieee-p1363'), which is the call jose makes on Node
// (jose/dist/node/cjs/runtime/sign.js and node_key.js); scripts/e2e-identity.ts repeats the case
// with jose itself. mint-token's own tokens are low-s.
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { recordFor } from '../support/gateway-replies.ts';
import { send } from '../support/http-client.ts';
import { type ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { ecSigner, jwksOf, POD_UID, saPayload, signSaToken, TEST_AUDIENCE, TEST_ISSUER } from '../support/service-accounts.ts';

const N = BigInt('0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551');
const sOf = (token: string) => BigInt(`0x${Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url').subarray(32).toString('hex')}`);
const isHigh = (token: string) => sOf(token) > (N - 1n) / 2n;
/** The same token with s replaced by n - s: a signature every P-256 verifier takes. */
const twinOf = (token: string) => {
  const sig = Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url');
  const s = Buffer.from((N - sOf(token)).toString(16).padStart(64, '0'), 'hex');
  return `${token.slice(0, token.lastIndexOf('.') + 1)}${Buffer.concat([sig.subarray(0, 32), s]).toString('base64url')}`;
};

const clusterKey = ecSigner('cluster-ec');
let work: string;
let privateKeyFile: string;
let proxy: ProxyProcess;

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'es256-one-form-'));
  const keysDir = join(work, 'bot-keys');
  mkdirSync(keysDir);
  const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const pem = (k: KeyObject) => k.export({ type: k.type === 'public' ? 'spki' : 'pkcs8', format: 'pem' }).toString();
  writeFileSync(join(keysDir, 'bots-ec.pem'), pem(pair.publicKey));
  privateKeyFile = join(work, 'bots-ec.pem');
  writeFileSync(privateKeyFile, pem(pair.privateKey), { mode: 0o600 });
  writeFileSync(join(work, 'jwks.json'), JSON.stringify(jwksOf(clusterKey)));
  writeFileSync(join(work, 'policy.json'), JSON.stringify({ serviceAccounts: { 'agents/*': { models: true } } }));
  proxy = await startServe({
    env: { UPSTREAM_API_KEY: 'sk-one-form', UPSTREAM_BASE_URL: 'https://127.0.0.1:9/v1', UPSTREAM_ALLOWED_MODELS: 'gpt-one-form' },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--bot-keys', keysDir, '--sa-issuer', TEST_ISSUER, '--sa-audience', TEST_AUDIENCE, '--sa-jwks-file', join(work, 'jwks.json'), '--workload-policy', join(work, 'policy.json')],
    listeners: ['model'],
  });
});

after(async () => {
  await proxy?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** GET /v1/models with `token`: the status, and the identity the request's record names. */
async function models(token: string): Promise<{ status: number; who: string }> {
  const res = await send(proxy.ports.model!, 'GET', '/v1/models', { headers: { authorization: `Bearer ${token}` } });
  const rec = await recordFor(proxy, String(res.headers['x-request-id']));
  return { status: res.status, who: `${rec.instance_id} ${rec.workflow} ${rec.run_id}` };
}

test('one string per token, bot tokens: mint-token\'s ES256 tokens are low-s, and the high-s twin of one is served as the same token, the same identity', async () => {
  const minted: string[] = [];
  for (let i = 0; i < 16; i++) {
    const r = await runCommandInProcess(['mint-token', '--instance-id', `bot-${i}`, '--workflow', 'one-form', '--run-id', `run-${i}`, '--signing-key', privateKeyFile]);
    assert.equal(r.code, 0, r.stderr);
    minted.push(r.stdout.trim());
  }
  assert.deepEqual(minted.filter(isHigh), [], 'mint-token signs low-s only');
  const token = minted[0]!;
  const twin = twinOf(token);
  assert.ok(isHigh(twin) && twin !== token);
  assert.deepEqual(await models(token), { status: 200, who: 'bot-0 one-form run-0' });
  assert.deepEqual(await models(twin), { status: 200, who: 'bot-0 one-form run-0' }, 'the twin is the same token');
});

test('one string per token, service-account tokens: an ES256 token signed by node:crypto as jose signs, high-s or low-s, and the twin of each, are served as the same pod', async () => {
  const now = Math.floor(Date.now() / 1000);
  const signed = Array.from({ length: 64 }, (_, i) => signSaToken(clusterKey, saPayload({ namespace: 'agents', serviceAccount: 'triage', pod: `triage-${i}` }, now)));
  // About half are high-s: 64 tokens without one of each form has chance 2^-63.
  const high = signed.find(isHigh)!;
  const low = signed.find((t) => !isHigh(t))!;
  for (const token of [high, low]) {
    const pod = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString())['kubernetes.io'].pod.name as string;
    const who = `agents/${pod} agents/triage ${POD_UID}`;
    assert.deepEqual(await models(token), { status: 200, who }, isHigh(token) ? 'signed high-s' : 'signed low-s');
    assert.deepEqual(await models(twinOf(token)), { status: 200, who }, 'its twin: the same token');
  }
});
