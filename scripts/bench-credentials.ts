// What a credential source adds to one model call, in the same run: a static key, a cached
// Google access token, and an AWS SigV4 signature over a 30 KB body (the body hashed, the
// canonical request built, the day's key cached). p50 and p99 of the authenticate() call, in µs.
//
//   npm run bench:credentials
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { awsSource } from '../src/gateway/credentials/aws.ts';
import { googleServiceAccountSource } from '../src/gateway/credentials/google.ts';
import { staticKeySource } from '../src/gateway/credentials/static-key.ts';
import type { CredentialSource } from '../src/gateway/credentials/source.ts';
import { literalSecret } from '../src/config/secret.ts';

const CALLS = 20_000;
const body = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: randomBytes(15_000).toString('hex') }] }));
const call = { method: 'POST', target: '/model/us.anthropic.claude-opus-5-5/invoke', host: 'bedrock-runtime.us-east-1.amazonaws.com', contentType: 'application/json', body };

async function measure(source: CredentialSource): Promise<{ p50: number; p99: number }> {
  const times: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const t = performance.now();
    await source.authenticate(call, Date.now());
    times.push((performance.now() - t) * 1000);
  }
  times.sort((a, b) => a - b);
  return { p50: times[Math.floor(CALLS / 2)]!, p99: times[Math.floor(CALLS * 0.99)]! };
}

async function main(): Promise<void> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyFile = JSON.stringify({ type: 'service_account', private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), client_email: 'bench@p.iam.gserviceaccount.com', token_uri: 'https://oauth2.example/token' });
  const google = googleServiceAccountSource({ readKeyFile: () => keyFile, scope: 's', exchange: async () => ({ accessToken: `ya29.${'x'.repeat(200)}`, expiresInSec: 3600 }), onRefresh: () => {} });
  // The token is fetched once; every measured call uses the cached one.
  await google.refresh(Date.now());
  const first = await google.authenticate(call, Date.now());
  if (!first.ok) throw new Error(`the Google source has no token: ${first.reason}`);
  const sources: [string, CredentialSource][] = [
    ['static key', staticKeySource(literalSecret('sk-' + 'k'.repeat(48)), ['authorization', 'Bearer '])],
    ['google access token (cached)', google],
    ['aws sigv4, 30 KB body', awsSource({ accessKeyId: literalSecret('AKIDBENCH'), secretAccessKey: literalSecret('s'.repeat(40)), sessionToken: undefined, region: 'us-east-1', service: 'bedrock' })],
  ];
  console.log(`${CALLS} calls each, body ${(body.length / 1024).toFixed(1)} KiB, node ${process.version}`);
  console.log('| source | p50 µs | p99 µs | p50 added to the static key |');
  console.log('|---|---:|---:|---:|');
  let base = 0;
  for (const [name, source] of sources) {
    const { p50, p99 } = await measure(source);
    if (name === 'static key') base = p50;
    console.log(`| ${name} | ${p50.toFixed(1)} | ${p99.toFixed(1)} | ${name === 'static key' ? '' : `+${(p50 - base).toFixed(1)} µs`} |`);
  }
}

void main();
