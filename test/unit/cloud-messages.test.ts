// The clouds' Anthropic routes: strict path parsing (one canonical form), the model from the path,
// the recorded Claude Code requests in its Bedrock and Vertex modes passing the checks, and the
// AWS event stream read for usage and guarded against an echoed credential.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { EventStreamFramer, EventStreamGuard, frameHeaders } from '../../src/gateway/eventstream.ts';
import { CHUNK_HEADERS, encodeFrame } from '../support/eventstream-frame.ts';
import { redactorOf } from '../support/secrets.ts';
import { anthropicMessages } from '../../src/gateway/protocols/anthropic-messages.ts';
import { parseBedrockPath, parseVertexPath } from '../../src/gateway/protocols/cloud-messages.ts';
import { PROTOCOLS } from '../../src/gateway/protocols/table.ts';
import { checkRequestBody } from '../../src/gateway/check-call.ts';
import { routeGatewayRequest } from '../../src/gateway/route.ts';

test('cloud routes: a Vertex path gives project, region, model and action; other forms are refused, naming the canonical one (parseVertexPath)', () => {
  assert.deepEqual(parseVertexPath('/v1/projects/proj-123/locations/us-east5/publishers/anthropic/models/claude-opus-5-5:streamRawPredict'), { model: 'claude-opus-5-5', action: 'streamRawPredict', project: 'proj-123', region: 'us-east5' });
  assert.deepEqual(parseVertexPath('/v1/projects/proj-123/locations/global/publishers/anthropic/models/claude-haiku-4-5@20251001:rawPredict'), { model: 'claude-haiku-4-5@20251001', action: 'rawPredict', project: 'proj-123', region: 'global' });
  assert.equal(parseVertexPath('/v1/messages'), undefined);
  for (const bad of ['/v1/projects/proj-123/locations/us-east5/publishers/anthropic/models/claude%2Fx:rawPredict', '/v1/projects/Proj/locations/us-east5/publishers/anthropic/models/m:rawPredict', '/v1/projects/proj-123/locations/us-east5/publishers/anthropic/models/m:predict']) {
    assert.ok(parseVertexPath(bad) && 'error' in parseVertexPath(bad)!, bad);
  }
});

test('cloud routes: a Bedrock path gives the model (its : as %3A or as is) and the action; any other encoding is refused (parseBedrockPath)', () => {
  assert.deepEqual(parseBedrockPath('/model/us.anthropic.claude-haiku-4-5-20251001-v1%3A0/invoke'), { model: 'us.anthropic.claude-haiku-4-5-20251001-v1:0', action: 'invoke' });
  assert.deepEqual(parseBedrockPath('/model/us.anthropic.claude-opus-5-5/invoke-with-response-stream'), { model: 'us.anthropic.claude-opus-5-5', action: 'invoke-with-response-stream' });
  for (const bad of ['/model/a%2Fb/invoke', '/model/a%2Eb/invoke', '/model/a%25/invoke', '/model/../invoke', '/model/a/converse']) assert.ok('error' in (parseBedrockPath(bad) ?? {}), bad);
});

test('cloud routes: the model is the path\'s; a body that names one too is refused (model_in_body); an unlisted path model is model_not_allowed', () => {
  const vertex = PROTOCOLS.find((p) => p.kind === 'anthropic-vertex')!;
  const pathModel = { model: 'claude-opus-5-5', action: 'streamRawPredict', project: 'proj-123', region: 'us-east5' };
  const policy = { allowedModels: new Set(['claude-opus-5-5']), hostedTools: new Set<string>() };
  const body = { anthropic_version: 'vertex-2023-10-16', max_tokens: 8, stream: true, messages: [{ role: 'user', content: 'hi' }] };
  assert.deepEqual(checkRequestBody(Buffer.from(JSON.stringify(body)), vertex, policy, pathModel), { ok: true, model: 'claude-opus-5-5', stream: true, maxOutputTokens: 8 });
  const inBody = checkRequestBody(Buffer.from(JSON.stringify({ ...body, model: 'claude-opus-5-5' })), vertex, policy, pathModel);
  assert.equal(!inBody.ok && inBody.error.code, 'model_in_body');
  const other = checkRequestBody(Buffer.from(JSON.stringify(body)), vertex, policy, { ...pathModel, model: 'claude-secret' });
  assert.equal(!other.ok && other.error.code, 'model_not_allowed');
});

for (const file of ['claude-code-2.1.330-bedrock-2.json', 'claude-code-2.1.330-vertex-1.json']) {
  test(`cloud routes: the recorded Claude Code request ${file} is routed and passes the Messages checks with the model from its path`, () => {
    const rec = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'recorded-cloud', file), 'utf8')) as { method: string; url: string; body: Record<string, unknown> };
    const route = routeGatewayRequest(rec.method, rec.url, PROTOCOLS);
    assert.ok(route.ok && route.kind === 'protocol' && route.pathModel, JSON.stringify(route));
    const checked = checkRequestBody(Buffer.from(JSON.stringify(rec.body)), route.protocol, { allowedModels: new Set([route.pathModel.model]), hostedTools: new Set() }, route.pathModel);
    assert.deepEqual(checked, { ok: true, model: route.pathModel.model, stream: true, maxOutputTokens: rec.body.max_tokens });
  });
}

test('cloud routes: Claude Code\'s Bedrock inference-profile listing is not routed (404), which it goes on from', () => {
  const route = routeGatewayRequest('GET', '/inference-profiles?type=SYSTEM_DEFINED', PROTOCOLS);
  assert.equal(!route.ok && route.error.code, 'not_found');
});

const chunkFrame = (event: Record<string, unknown>) => encodeFrame(CHUNK_HEADERS, Buffer.from(JSON.stringify({ bytes: Buffer.from(JSON.stringify(event)).toString('base64'), p: 'abcd' })));
const BEDROCK_EVENTS = [
  { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-opus-5-5', content: [], usage: { input_tokens: 12, output_tokens: 1 } } },
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } },
  { type: 'content_block_stop', index: 0 },
  { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 5 } },
  { type: 'message_stop' },
];

test('event stream: frames carry string headers and CRCs (encodeFrame, frameHeaders); the Messages events inside chunk frames reach the reader, in any chunking', () => {
  const wire = Buffer.concat(BEDROCK_EVENTS.map(chunkFrame));
  assert.deepEqual([...frameHeaders(wire.subarray(12, 12 + wire.readUInt32BE(4)))!.entries()], [[':event-type', 'chunk'], [':content-type', 'application/json'], [':message-type', 'event']]);
  for (const size of [1, 7, 100, wire.length]) {
    const reader = anthropicMessages.newStreamReader(() => 1);
    const framer = new EventStreamFramer(reader);
    for (let i = 0; i < wire.length; i += size) framer.push(wire.subarray(i, i + size));
    const s = reader.summary();
    assert.equal(framer.corrupt, false);
    assert.deepEqual([s.terminated, s.finishReason, s.usage?.inputTokens, s.usage?.outputTokens, s.model], [true, 'end_turn', 12, 5, 'claude-opus-5-5'], `chunks of ${size}`);
  }
});

test('event stream: a frame with a bad CRC or a length over the cap marks the stream corrupt and stops reading', () => {
  const wire = Buffer.concat(BEDROCK_EVENTS.map(chunkFrame));
  const bad = Buffer.from(wire);
  bad[20] = bad[20]! ^ 0xff;
  const framer = new EventStreamFramer(anthropicMessages.newStreamReader(() => 1));
  framer.push(bad);
  assert.equal(framer.corrupt, true);
  const huge = Buffer.alloc(12);
  huge.writeUInt32BE(64 * 1024 * 1024, 0);
  const framer2 = new EventStreamFramer(anthropicMessages.newStreamReader(() => 1));
  framer2.push(huge);
  assert.equal(framer2.corrupt, true);
});

test('event stream guard: whole frames pass at once, a partial frame waits for its end, and a frame carrying the credential (even base64-encoded inside) cuts the stream', () => {
  const frames = BEDROCK_EVENTS.map(chunkFrame);
  const guard = new EventStreamGuard(redactorOf('aws-secret-key-0123456789'));
  assert.deepEqual(guard.push(Buffer.concat(frames.slice(0, 2))), Buffer.concat(frames.slice(0, 2)));
  const third = frames[2]!;
  assert.equal(guard.push(third.subarray(0, 10)).length, 0);
  assert.deepEqual(guard.push(third.subarray(10)), third);
  const leak = chunkFrame({ type: 'error', error: { message: 'bad signature for aws-secret-key-0123456789' } });
  assert.throws(() => guard.push(leak), /carries a credential/);
});

test('cloud routes: Vertex\'s token count (models/count-tokens:rawPredict) takes its model from the body, and carries no usage', () => {
  const m = parseVertexPath('/v1/projects/proj-123/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict');
  assert.deepEqual(m, { model: '', action: 'rawPredict', project: 'proj-123', region: 'us-east5', countTokens: true });
  const vertex = PROTOCOLS.find((p) => p.kind === 'anthropic-vertex')!;
  const policy = { allowedModels: new Set(['claude-opus-5-5']), hostedTools: new Set<string>() };
  const body = { anthropic_version: 'vertex-2023-10-16', model: 'claude-opus-5-5', messages: [{ role: 'user', content: 'hi' }] };
  assert.deepEqual(checkRequestBody(Buffer.from(JSON.stringify(body)), vertex, policy, m as never), { ok: true, model: 'claude-opus-5-5', stream: false });
  const other = checkRequestBody(Buffer.from(JSON.stringify({ ...body, model: 'claude-secret' })), vertex, policy, m as never);
  assert.equal(!other.ok && other.error.code, 'model_not_allowed');
  assert.equal(vertex.routes[0]!.upstreamPathFor!({ project: 'p', region: 'r' }, m as never), '/v1/projects/p/locations/r/publishers/anthropic/models/count-tokens:rawPredict');
});
