// Credential sources through the gateway: an OpenAI-kind provider whose credential is a
// Google service account (Vertex AI's OpenAI-compatible endpoint is such a pair) against a fake
// token endpoint that verifies the assertion's signature and claims; one whose token endpoint
// refuses (502 naming the provider, logged, counted); and an OpenAI-kind provider whose calls
// are signed with AWS SigV4, against an upstream that checks each signature over what it received.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { sigV4Valid, startTokenEndpoint, type TokenEndpoint } from '../support/cloud-fakes.ts';
import { send } from '../support/http-client.ts';
import { defaultCompletion, startModelUpstream, type ModelRequest, type ModelUpstream } from '../support/model-upstream.ts';
import { parseExposition } from '../support/prometheus.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { rsaKeyPair } from '../support/test-keys.ts';

const { privateKey, publicKey } = rsaKeyPair(2048);
const AWS = { accessKeyId: 'AKIDTESTGATEWAY', secretAccessKey: `aws-secret-${randomBytes(12).toString('hex')}`, sessionToken: `session-${randomBytes(12).toString('hex')}` };
let pki: TestPki;
let vertex: ModelUpstream;
let bedrock: ModelUpstream;
let tokens: TokenEndpoint;
let tokenUri: string;
let gw: ProxyProcess;
let dir: string;
/** The metadata server (plain HTTP, as on GKE) and STS (HTTPS), with what they were asked. */
let metadata: import('node:http').Server;
/** An in-cluster model server that speaks plain http and needs no key (vLLM, Ollama). */
let inCluster: import('node:http').Server;
const inClusterSeen: IncomingMessage[] = [];
let sts: import('node:https').Server;
const metadataAsked: (string | undefined)[] = [];
const stsForms: URLSearchParams[] = [];
const TEMP = { accessKeyId: 'ASIATEMPORARY', secretAccessKey: `temp-secret-${randomBytes(8).toString('hex')}`, sessionToken: `temp-token-${randomBytes(8).toString('hex')}` };

before(async () => {
  pki = makeTestPki();
  tokens = await startTokenEndpoint(pki, publicKey);
  tokenUri = tokens.uri;
  [vertex, bedrock] = await Promise.all([startModelUpstream(pki), startModelUpstream(pki)]);
  metadata = createHttpServer((req, res) => {
    metadataAsked.push(req.headers['metadata-flavor'] as string | undefined);
    if (req.url !== '/computeMetadata/v1/instance/service-accounts/default/token' || req.headers['metadata-flavor'] !== 'Google') return void res.writeHead(403).end();
    res.writeHead(200, { 'content-type': 'application/json', 'metadata-flavor': 'Google' }).end('{"access_token":"ya29.metadata-1","expires_in":3599,"token_type":"Bearer"}');
  });
  sts = createHttpsServer({ key: pki.keyPem, cert: pki.certPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString());
      stsForms.push(form);
      if (form.get('WebIdentityToken') !== 'eks-projected-token') return void res.writeHead(400, { 'content-type': 'text/xml' }).end('<ErrorResponse><Error><Code>InvalidIdentityToken</Code></Error></ErrorResponse>');
      const expiry = new Date(Date.now() + 3600_000).toISOString();
      res.writeHead(200, { 'content-type': 'text/xml' }).end(`<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>${TEMP.accessKeyId}</AccessKeyId><SecretAccessKey>${TEMP.secretAccessKey}</SecretAccessKey><SessionToken>${TEMP.sessionToken}</SessionToken><Expiration>${expiry}</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`);
    });
  });
  inCluster = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => {
      inClusterSeen.push(req);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'c1', object: 'chat.completion', model: 'qwen3-coder', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } }));
    });
  });
  await Promise.all([new Promise<void>((r) => metadata.listen(0, '127.0.0.1', r)), new Promise<void>((r) => sts.listen(0, '127.0.0.1', r)), new Promise<void>((r) => inCluster.listen(0, '127.0.0.1', r))]);
  const portOf = (s: { address(): unknown }) => (s.address() as { port: number }).port;
  dir = mkdtempSync(join(tmpdir(), 'credential-sources-'));
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const saKey = (uri: string) => JSON.stringify({ type: 'service_account', private_key_id: 'k1', private_key: pem, client_email: 'gateway@proj.iam.gserviceaccount.com', token_uri: uri });
  writeFileSync(join(dir, 'sa.json'), saKey(tokenUri));
  writeFileSync(join(dir, 'sa-broken.json'), saKey(tokenUri.replace('/token', '/refuses')));
  writeFileSync(join(dir, 'eks-token'), 'eks-projected-token\n');
  writeFileSync(join(dir, 'aws-id'), AWS.accessKeyId);
  writeFileSync(join(dir, 'aws-secret'), `${AWS.secretAccessKey}\n`);
  writeFileSync(
    join(dir, 'providers.json'),
    JSON.stringify({
      providers: [
        { name: 'vertex', kind: 'openai', baseUrl: vertex.baseUrl, credential: { type: 'google-service-account', keyFile: join(dir, 'sa.json') }, models: ['google/gemini-2.5-pro'], caFile: pki.caFile },
        { name: 'vertex-broken', kind: 'openai', baseUrl: vertex.baseUrl, credential: { type: 'google-service-account', keyFile: join(dir, 'sa-broken.json') }, models: ['broken-model'], caFile: pki.caFile },
        { name: 'vllm', kind: 'openai', baseUrl: `http://127.0.0.1:${portOf(inCluster)}/v1`, allowPlainHttp: true, credential: { type: 'none' }, models: ['qwen3-coder'] },
        { name: 'gke', kind: 'openai', baseUrl: vertex.baseUrl, credential: { type: 'google-metadata' }, models: ['gke-model'], caFile: pki.caFile },
        { name: 'eks', kind: 'openai', baseUrl: bedrock.baseUrl, credential: { type: 'aws-web-identity', roleArn: 'arn:aws:iam::123456789012:role/gateway', tokenFile: join(dir, 'eks-token'), region: 'us-west-2', stsEndpoint: `https://127.0.0.1:${portOf(sts)}/` }, models: ['eks-model'], caFile: pki.caFile },
        { name: 'bedrock', kind: 'openai', baseUrl: bedrock.baseUrl, credential: { type: 'aws-sigv4', accessKeyIdFile: join(dir, 'aws-id'), secretAccessKeyFile: join(dir, 'aws-secret'), sessionTokenEnv: 'AWS_SESSION_TOKEN', region: 'us-west-2' }, models: ['openai.gpt-oss-120b-1:0'], caFile: pki.caFile },
      ],
    }),
  );
  gw = await startServe({
    env: { NODE_EXTRA_CA_CERTS: pki.caFile, AWS_SESSION_TOKEN: AWS.sessionToken, GCE_METADATA_HOST: `127.0.0.1:${portOf(metadata)}` },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--providers', join(dir, 'providers.json')],
    listeners: ['model'],
  });
});

after(async () => {
  await gw?.stop();
  await Promise.all([vertex?.close(), bedrock?.close(), tokens?.close(), new Promise((r) => metadata?.close(r)), new Promise((r) => sts?.close(r)), new Promise((r) => inCluster?.close(r))]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const chat = (model: string) => send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }) });

test('google service account: calls carry the minted access token; one token serves many calls; the assertion is signed by the key file and addressed to its token endpoint', async () => {
  for (let i = 0; i < 3; i++) assert.equal((await chat('google/gemini-2.5-pro')).status, 200);
  const seen = vertex.requests.filter((r) => r.body.includes('gemini')).map((r) => r.headers.authorization);
  assert.deepEqual(seen, ['Bearer ya29.fake-1', 'Bearer ya29.fake-1', 'Bearer ya29.fake-1']);
  const good = tokens.assertions.filter((c) => c.aud === tokenUri);
  assert.equal(good.length, 1, 'one exchange for every call');
  assert.deepEqual([good[0]!.iss, good[0]!.scope], ['gateway@proj.iam.gserviceaccount.com', 'https://www.googleapis.com/auth/cloud-platform']);
  const listening = gw.records().find((r) => r.event === 'listening' && r.listener === 'model') as { providers: { name: string; credential: string; key: string }[] };
  assert.deepEqual(listening.providers.map((p) => [p.name, p.credential, p.key]), [['vertex', 'google-service-account', 'present'], ['vertex-broken', 'google-service-account', 'present'], ['vllm', 'none', 'present'], ['gke', 'google-metadata', 'present'], ['eks', 'aws-web-identity', 'present'], ['bedrock', 'aws-sigv4', 'present']]);
});

test('google service account: a token endpoint that refuses the assertion gives 502 upstream_credential_failed naming the provider and why, logged and counted; nothing is forwarded', async () => {
  const before = vertex.requests.length;
  const r = await chat('broken-model');
  assert.equal(r.status, 502);
  const error = (JSON.parse(r.body.toString()) as { error: { code: string; message: string } }).error;
  assert.equal(error.code, 'upstream_credential_failed');
  assert.match(error.message, /provider vertex-broken \(no valid Google access token \(the token endpoint answered 400: invalid_grant\)\)/);
  assert.equal(vertex.requests.length, before);
  await gw.waitForRecord((rec) => rec.event === 'credential_refresh_failed' && rec.provider === 'vertex-broken');
  const metrics = parseExposition((await send(gw.ports.metrics!, 'GET', '/metrics')).body.toString());
  assert.ok((metrics.find((s) => s.name === 'model_gateway_credential_refreshes_total' && s.labels.provider === 'vertex-broken' && s.labels.outcome === 'failed')?.value ?? 0) >= 1);
  assert.equal(metrics.find((s) => s.name === 'model_gateway_credential_refreshes_total' && s.labels.provider === 'vertex' && s.labels.outcome === 'ok')?.value, 1);
});

test('aws sigv4: every call is signed over what the upstream receives (path, host, content type, date, session token, body hash), checked there; the secret never leaves the gateway', async () => {
  let verified = 0;
  const check = (req: IncomingMessage, res: ServerResponse, recorded: ModelRequest) => {
    if (!sigV4Valid(req, recorded.url, recorded.body, AWS, 'us-west-2', 'bedrock') || req.headers['x-amz-security-token'] !== AWS.sessionToken) {
      res.writeHead(403, { 'content-type': 'application/json' }).end('{"message":"The request signature we calculated does not match the signature you provided."}');
      return;
    }
    verified++;
    defaultCompletion(req, res, recorded);
  };
  bedrock.script(check, check);
  for (let i = 0; i < 2; i++) assert.equal((await chat('openai.gpt-oss-120b-1:0')).status, 200);
  assert.equal(verified, 2);
  assert.ok(!gw.output().includes(AWS.secretAccessKey) && !gw.output().includes(AWS.sessionToken), 'no secret in the log');
});

test('google metadata server (GKE workload identity): calls carry the metadata server\'s token, asked for with Metadata-Flavor: Google, once for many calls', async () => {
  for (let i = 0; i < 2; i++) assert.equal((await chat('gke-model')).status, 200);
  assert.deepEqual(vertex.requests.filter((r) => r.body.includes('gke-model')).map((r) => r.headers.authorization), ['Bearer ya29.metadata-1', 'Bearer ya29.metadata-1']);
  assert.deepEqual(metadataAsked, ['Google']);
});

test('aws web identity (EKS IRSA): the projected token is traded at STS once; calls are signed with the temporary credentials, checked by the upstream', async () => {
  let verified = 0;
  const check = (req: IncomingMessage, res: ServerResponse, recorded: ModelRequest) => {
    if (!sigV4Valid(req, recorded.url, recorded.body, TEMP, 'us-west-2', 'bedrock') || req.headers['x-amz-security-token'] !== TEMP.sessionToken) return void res.writeHead(403).end('{}');
    verified++;
    defaultCompletion(req, res, recorded);
  };
  bedrock.script(check, check);
  for (let i = 0; i < 2; i++) assert.equal((await chat('eks-model')).status, 200);
  assert.equal(verified, 2);
  assert.equal(stsForms.length, 1);
  assert.deepEqual([stsForms[0]!.get('Action'), stsForms[0]!.get('RoleArn')], ['AssumeRoleWithWebIdentity', 'arn:aws:iam::123456789012:role/gateway']);
  assert.ok(!gw.output().includes(TEMP.secretAccessKey) && !gw.output().includes(TEMP.sessionToken));
});

test('plain http: an in-cluster model server opted in with allowPlainHttp and credential none is reached over http with no credential header, and start-up warns about it', async () => {
  const res = await chat('qwen3-coder');
  assert.equal(res.status, 200);
  const seen = inClusterSeen.at(-1)!;
  assert.equal(seen.url, '/v1/chat/completions');
  assert.deepEqual([seen.headers.authorization, seen.headers['x-api-key']], [undefined, undefined]);
  const warning = gw.records().find((r) => r.event === 'warning' && r.provider === 'vllm');
  assert.match(String(warning?.message), /reached over plain http \(allowPlainHttp\): only for a server inside the cluster/);
});
