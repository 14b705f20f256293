// Claude Code's Bedrock and Vertex modes through the gateway, as the recorded requests show
// them: the model from the path, the project and region bound to the provider's, a Vertex call
// with a minted Google token (fake token endpoint that checks the assertion) streaming SSE, a
// Bedrock call signed with SigV4 (checked by the fake) streaming AWS event-stream frames relayed
// byte for byte with the usage read from them.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startAnthropicUpstream, streamHandler, textTranscript, type AnthropicUpstream } from '../support/anthropic-upstream.ts';
import { sigV4Valid, startTokenEndpoint, type TokenEndpoint } from '../support/cloud-fakes.ts';
import { CHUNK_HEADERS, encodeFrame } from '../support/eventstream-frame.ts';
import { send } from '../support/http-client.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { rsaKeyPair } from '../support/test-keys.ts';

const MODEL = 'claude-opus-5-5';
const BEDROCK_MODEL = 'us.anthropic.claude-opus-5-5';
const AWS = { accessKeyId: 'AKIDCLOUDROUTES', secretAccessKey: `secret-${randomBytes(12).toString('hex')}` };
const { privateKey, publicKey } = rsaKeyPair(2048);
let pki: TestPki;
let tokens: TokenEndpoint;
let vertex: AnthropicUpstream;
let bedrock: AnthropicUpstream;
let foundry: AnthropicUpstream;
const FOUNDRY_KEY = `azure-${randomBytes(12).toString('hex')}`;
let gw: ProxyProcess;
let dir: string;
const recorded = (file: string) => JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'recorded-cloud', file), 'utf8')) as { url: string; headers: Record<string, string>; body: Record<string, unknown> };

before(async () => {
  pki = makeTestPki();
  tokens = await startTokenEndpoint(pki, publicKey);
  [vertex, bedrock, foundry] = await Promise.all([startAnthropicUpstream(pki), startAnthropicUpstream(pki), startAnthropicUpstream(pki)]);
  dir = mkdtempSync(join(tmpdir(), 'cloud-routes-'));
  writeFileSync(join(dir, 'sa.json'), JSON.stringify({ type: 'service_account', private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), client_email: 'gw@proj-1.iam.gserviceaccount.com', token_uri: tokens.uri }));
  writeFileSync(
    join(dir, 'providers.json'),
    JSON.stringify({
      providers: [
        { name: 'vertex', kind: 'anthropic-vertex', baseUrl: vertex.baseUrl.replace(/\/v1$/, ''), project: 'proj-1', region: 'us-east5', credential: { type: 'google-service-account', keyFile: join(dir, 'sa.json') }, models: [MODEL], caFile: pki.caFile },
        { name: 'foundry', kind: 'anthropic', baseUrl: `${foundry.baseUrl.replace(/\/v1$/, '')}/anthropic`, keyEnv: 'FOUNDRY_KEY', keyHeader: 'api-key', models: ['claude-sonnet-5'], caFile: pki.caFile },
        { name: 'bedrock', kind: 'anthropic-bedrock', baseUrl: bedrock.baseUrl.replace(/\/v1$/, ''), region: 'us-east-1', credential: { type: 'aws-sigv4', accessKeyIdEnv: 'AWS_ID', secretAccessKeyEnv: 'AWS_SECRET', region: 'us-east-1' }, models: [BEDROCK_MODEL], caFile: pki.caFile },
      ],
    }),
  );
  gw = await startServe({ env: { NODE_EXTRA_CA_CERTS: pki.caFile, AWS_ID: AWS.accessKeyId, AWS_SECRET: AWS.secretAccessKey, FOUNDRY_KEY }, args: ['--model-gateway-listen', '127.0.0.1:0', '--providers', join(dir, 'providers.json')], listeners: ['model'] });
});

after(async () => {
  await gw?.stop();
  await Promise.all([vertex?.close(), bedrock?.close(), foundry?.close(), tokens?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const post = (path: string, body: unknown, headers: Record<string, string> = {}) => send(gw.ports.model!, 'POST', path, { headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers }, body: JSON.stringify(body) });

test('vertex: Claude Code\'s recorded streamRawPredict goes to the provider\'s own project path with a minted token, streams SSE back and is recorded with its usage', async () => {
  const rec = recorded('claude-code-2.1.330-vertex-1.json');
  vertex.script(streamHandler(textTranscript('hello from vertex', { model: MODEL })));
  const res = await post(rec.url, rec.body);
  assert.equal(res.status, 200);
  assert.match(res.body.toString(), /event: message_stop/);
  const seen = vertex.requests.at(-1)!;
  assert.equal(seen.url, `/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/${MODEL}:streamRawPredict`);
  assert.equal(seen.headers.authorization, 'Bearer ya29.fake-1');
  const record = await gw.waitForRecord((r) => r.event === 'request' && r.provider === 'vertex' && r.status === 200);
  assert.deepEqual([record.model, record.stream, record.usage_complete, record.cloud], [MODEL, true, true, 'google']);
});

test('vertex: a path naming another project or region is refused (403 cloud_scope_not_allowed) and not forwarded; a model in the body too is 400 model_in_body', async () => {
  const before = vertex.requests.length;
  const body = { anthropic_version: 'vertex-2023-10-16', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] };
  const other = await post(`/v1/projects/other-proj/locations/us-east5/publishers/anthropic/models/${MODEL}:rawPredict`, body);
  assert.equal(other.status, 403);
  assert.match(other.body.toString(), /the path names project other-proj and region us-east5; model claude-opus-5-5 is served in project proj-1 and region us-east5/);
  const region = await post(`/v1/projects/proj-1/locations/europe-west1/publishers/anthropic/models/${MODEL}:rawPredict`, body);
  assert.equal(region.status, 403);
  const inBody = await post(`/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/${MODEL}:rawPredict`, { ...body, model: MODEL });
  assert.equal(inBody.status, 400);
  assert.equal(vertex.requests.length, before);
});

test('bedrock: Claude Code\'s recorded invoke-with-response-stream is signed (checked by the fake), its event-stream frames relayed byte for byte and read for usage', async () => {
  const rec = recorded('claude-code-2.1.330-bedrock-2.json');
  const events = [
    { type: 'message_start', message: { id: 'msg_b1', type: 'message', role: 'assistant', model: BEDROCK_MODEL, content: [], usage: { input_tokens: 30, output_tokens: 1 } } },
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'hello from bedrock' } },
    { type: 'content_block_stop', index: 0 },
    { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 4 } },
    { type: 'message_stop' },
  ];
  const wire = Buffer.concat(events.map((e) => encodeFrame(CHUNK_HEADERS, Buffer.from(JSON.stringify({ bytes: Buffer.from(JSON.stringify(e)).toString('base64') })))));
  let signed = false;
  bedrock.script((req, res, r) => {
    signed = sigV4Valid(req, r.url, r.body, AWS, 'us-east-1', 'bedrock');
    if (!signed) return void res.writeHead(403, { 'content-type': 'application/json' }).end('{"message":"signature mismatch"}');
    res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream', 'x-amzn-requestid': 'req-b1' });
    res.write(wire.subarray(0, 100));
    setImmediate(() => res.end(wire.subarray(100)));
  });
  const res = await post(rec.url, rec.body, { authorization: 'Bearer bot' });
  assert.equal(res.status, 200);
  assert.equal(signed, true, 'the fake Bedrock verified the signature');
  assert.equal(bedrock.requests.at(-1)!.url, `/model/${BEDROCK_MODEL}/invoke-with-response-stream`);
  assert.deepEqual(res.body, wire, 'relayed byte for byte');
  const record = await gw.waitForRecord((r) => r.event === 'request' && r.provider === 'bedrock' && r.status === 200);
  assert.deepEqual([record.model, record.input_tokens, record.output_tokens, record.usage_complete, record.finish_reason, record.cloud], [BEDROCK_MODEL, 30, 4, true, 'end_turn', 'aws']);
});

test('bedrock: a path model with an encoded separator is refused (403 path_rejected) and not forwarded', async () => {
  const before = bedrock.requests.length;
  const res = await post('/model/us.anthropic%2Fclaude/invoke', { anthropic_version: 'bedrock-2023-05-31', max_tokens: 8, messages: [] });
  assert.equal(res.status, 403);
  assert.equal(bedrock.requests.length, before);
});

test('azure ai foundry: Claude Code\'s recorded Foundry-mode request is the Messages route; the provider\'s key goes in api-key (keyHeader) under its /anthropic base path, and never in x-api-key', async () => {
  const rec = recorded('claude-code-2.1.330-foundry-1.json');
  foundry.script(streamHandler(textTranscript('hello from foundry', { model: 'claude-sonnet-5' })));
  const res = await post(rec.url, { ...rec.body, model: 'claude-sonnet-5' });
  assert.equal(res.status, 200);
  const seen = foundry.requests.at(-1)!;
  assert.equal(seen.url, '/anthropic/v1/messages?beta=true');
  assert.equal(seen.headers['api-key'], FOUNDRY_KEY);
  assert.equal(seen.headers['x-api-key'], undefined);
  assert.equal(seen.headers.authorization, undefined);
});

test('vertex: a token count goes to the provider\'s count-tokens path with the body\'s (allowed) model, and records no usage', async () => {
  vertex.script((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"input_tokens":7}'));
  const res = await post('/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict', { anthropic_version: 'vertex-2023-10-16', model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(res.status, 200);
  assert.equal(vertex.requests.at(-1)!.url, '/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict');
  const record = await gw.waitForRecord((r) => r.event === 'request' && String(r.path).includes('count-tokens'));
  assert.deepEqual([record.model, record.usage_complete], [MODEL, undefined]);
});
