// One stored-state rule and one content-by-URL rule for every protocol, against the gateway
// with an OpenAI-kind and an Anthropic-kind upstream: each reference form is refused on its
// protocol with the same error code, never reaches the upstream, and inline content passes.
// Content by URL passes once the operator allows url_content, stored state never does.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startAnthropicUpstream, type AnthropicUpstream } from '../support/anthropic-upstream.ts';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const GPT = 'gpt-5.1';
const CLAUDE = 'claude-sonnet-4-6';
let pki: TestPki;
let anthropic: AnthropicUpstream;
let openai: ModelUpstream;
let strict: ProxyProcess;
let urlsAllowed: ProxyProcess;
let dir: string;

before(async () => {
  pki = makeTestPki();
  [anthropic, openai] = await Promise.all([startAnthropicUpstream(pki), startModelUpstream(pki)]);
  dir = mkdtempSync(join(tmpdir(), 'stored-state-'));
  const file = join(dir, 'providers.json');
  writeFileSync(
    file,
    JSON.stringify({
      providers: [
        { name: 'openai', kind: 'openai', baseUrl: openai.baseUrl, keyEnv: 'OPENAI_KEY', models: [GPT], caFile: pki.caFile },
        { name: 'anthropic', kind: 'anthropic', baseUrl: anthropic.baseUrl, keyEnv: 'ANTHROPIC_KEY', models: [CLAUDE], caFile: pki.caFile },
      ],
    }),
  );
  const env = { OPENAI_KEY: `sk-${randomBytes(8).toString('hex')}`, ANTHROPIC_KEY: `sk-ant-${randomBytes(8).toString('hex')}` };
  const args = ['--model-gateway-listen', '127.0.0.1:0', '--providers', file];
  [strict, urlsAllowed] = await Promise.all([
    startServe({ env, args: [...args], listeners: ['model'] }),
    startServe({ env, args: [...args, '--allow-hosted-tools', 'url_content,code_execution,code_interpreter'], listeners: ['model'] }),
  ]);
});

after(async () => {
  await Promise.all([strict?.stop(), urlsAllowed?.stop()]);
  await Promise.all([anthropic?.close(), openai?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

type Api = 'chat' | 'responses' | 'messages';
const PATHS: Record<Api, string> = { chat: '/v1/chat/completions', responses: '/v1/responses', messages: '/v1/messages' };
const user = (api: Api, content: unknown[]) =>
  api === 'responses' ? { model: GPT, input: [{ role: 'user', content }] } : api === 'chat' ? { model: GPT, messages: [{ role: 'user', content }] } : { model: CLAUDE, max_tokens: 16, messages: [{ role: 'user', content }] };

/** Each form a request can reference stored state in, by protocol. */
const STORED: readonly [Api, string, Record<string, unknown>][] = [
  ['chat', 'a file by id', user('chat', [{ type: 'file', file: { file_id: 'file-abc' } }])],
  ['chat', 'store: true', { model: GPT, store: true, messages: [{ role: 'user', content: 'hi' }] }],
  ['chat', "an earlier answer's audio by id", { model: GPT, messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', audio: { id: 'audio_abc' } }] }],
  ['responses', 'an input_file by id', user('responses', [{ type: 'input_file', file_id: 'file-abc' }])],
  ['responses', 'an input_image by id', user('responses', [{ type: 'input_image', file_id: 'file-abc' }])],
  ['responses', 'store: true', { model: GPT, store: true, input: 'hi' }],
  ['responses', 'previous_response_id', { model: GPT, previous_response_id: 'resp_1', input: 'hi' }],
  ['responses', 'a stored prompt', { model: GPT, prompt: { id: 'pmpt_1' }, input: 'hi' }],
  ['responses', 'an item_reference', { model: GPT, input: [{ type: 'item_reference', id: 'msg_1' }] }],
  ['responses', "a code interpreter in another run's container", { model: GPT, input: 'hi', tools: [{ type: 'code_interpreter', container: 'cntr_other' }] }],
  ['responses', 'a code interpreter with stored files', { model: GPT, input: 'hi', tools: [{ type: 'code_interpreter', container: { type: 'auto', file_ids: ['file-abc'] } }] }],
  ['messages', 'a document from the Files API', user('messages', [{ type: 'document', source: { type: 'file', file_id: 'file_abc' } }])],
  ['messages', 'a document whose content holds a stored file', user('messages', [{ type: 'document', source: { type: 'content', content: [{ type: 'image', source: { type: 'file', file_id: 'file_abc' } }] } }])],
  ['messages', 'a container_upload block', user('messages', [{ type: 'container_upload', file_id: 'file_abc' }])],
  ['messages', 'a container by id', { ...user('messages', ['hi']), container: 'container_other' }],
  ['messages', 'a container object with an id', { ...user('messages', ['hi']), container: { id: 'container_other' } }],
  ['messages', 'a custom skill', { ...user('messages', ['hi']), container: { skills: [{ type: 'custom', skill_id: 'skill_1' }] } }],
];

/** Content the provider would fetch from a URL, by protocol. */
const BY_URL: readonly [Api, string, Record<string, unknown>][] = [
  ['chat', 'image_url', user('chat', [{ type: 'image_url', image_url: { url: 'https://evil.example/x.png?d=SECRET' } }])],
  ['responses', 'input_image.image_url', user('responses', [{ type: 'input_image', image_url: 'https://evil.example/x.png?d=SECRET' }])],
  ['responses', 'input_file.file_url', user('responses', [{ type: 'input_file', file_url: 'https://evil.example/x.pdf' }])],
  ['messages', 'an image source of type url', user('messages', [{ type: 'image', source: { type: 'url', url: 'https://evil.example/x.png?d=SECRET' } }])],
  ['messages', 'a document source of type url', user('messages', [{ type: 'document', source: { type: 'url', url: 'https://evil.example/x.pdf' } }])],
  ['messages', 'an image by url inside a tool result', user('messages', [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'image', source: { type: 'url', url: 'https://evil.example/y.png' } }] }])],
];

/** Inline content: always allowed. */
const INLINE: readonly [Api, string, Record<string, unknown>][] = [
  ['chat', 'a data: image', user('chat', [{ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }])],
  ['responses', 'a data: input_image', user('responses', [{ type: 'input_image', image_url: 'data:image/png;base64,iVBORw0KGgo=' }])],
  ['messages', 'a base64 image', user('messages', [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }])],
  ['messages', 'a client tool_use whose arguments name a file_id and a url', { model: CLAUDE, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'fetch', input: { file_id: 'x', url: 'https://a.example' } }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'ok' }] }] }],
];

const upstreamCount = () => openai.requests.length + anthropic.requests.length;

/** The answer's status and the gateway's error code, read from the request's own log record. */
async function call(gw: ProxyProcess, api: Api, body: unknown): Promise<{ status: number; code: string | undefined }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (api === 'messages') headers['anthropic-version'] = '2023-06-01';
  const res = await send(gw.ports.model!, 'POST', PATHS[api], { headers, body: JSON.stringify(body) });
  const id = res.headers['x-client-request-id'];
  const record = await gw.waitForRecord((r) => r.event === 'request' && r.request_id === id, `the record of ${String(id)}`);
  return { status: res.status, code: record.error as string | undefined };
}

for (const [api, form, body] of STORED) {
  test(`stored state, ${api}: ${form} is refused (400 stored_state_not_allowed) and never forwarded, whatever the operator allows`, async () => {
    const before = upstreamCount();
    // The hosted tools involved allowed: the reference itself is what is refused.
    assert.deepEqual(await call(urlsAllowed, api, body), { status: 400, code: 'stored_state_not_allowed' });
    assert.equal((await call(strict, api, body)).status, 400);
    assert.equal(upstreamCount(), before);
  });
}

for (const [api, form, body] of BY_URL) {
  test(`content by URL, ${api}: ${form} is refused by default (400 url_content_not_allowed) and forwarded with --allow-hosted-tools url_content`, async () => {
    const before = upstreamCount();
    assert.deepEqual(await call(strict, api, body), { status: 400, code: 'url_content_not_allowed' });
    assert.equal(upstreamCount(), before);
    assert.equal((await call(urlsAllowed, api, body)).status, 200);
    assert.equal(upstreamCount(), before + 1);
  });
}

for (const [api, form, body] of INLINE) {
  test(`inline content, ${api}: ${form} is forwarded`, async () => {
    const before = upstreamCount();
    assert.equal((await call(strict, api, body)).status, 200);
    assert.equal(upstreamCount(), before + 1);
  });
}
