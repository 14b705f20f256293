import { test } from 'node:test';
import assert from 'node:assert/strict';
import { keyHeader } from '../../src/gateway/providers.ts';
import type { IncomingHttpHeaders } from 'node:http';
import { ERRORS } from '../../src/http/errors.ts';
import { anthropicMessages } from '../../src/gateway/protocols/anthropic-messages.ts';
import { chatCompletions } from '../../src/gateway/protocols/chat-completions.ts';
import { openAiErrorBody, openAiErrorType } from '../../src/gateway/protocols/openai.ts';
import { PROTOCOLS } from '../../src/gateway/protocols/table.ts';
import { botToken, identityFromHeaders } from '../../src/gateway/authenticate.ts';
import { checkRequestBody } from '../../src/gateway/check-call.ts';
import { clientRequestId, modelBody, modelsListBody, routeGatewayRequest as route3 } from '../../src/gateway/route.ts';
import { gatewayUpstreamHeaders as headersWithoutCredential, upstreamPath, type GatewayUpstreamHeaderInput as HeaderInput } from '../../src/gateway/prepare-upstream.ts';
import { isJsonContentType } from '../../src/gateway/body.ts';
import { withCredential } from '../../src/http/headers.ts';
import { secretHeaders } from '../../src/gateway/credentials/source.ts';

const ALLOWED = new Set(['gpt-4.1', 'gpt-4.1-mini']);
const POLICY = { allowedModels: ALLOWED, hostedTools: new Set<string>() };
const routeGatewayRequest = (method: string, target: string) => route3(method, target, PROTOCOLS);
const validateChatRequest = (body: Buffer) => checkRequestBody(body, chatCompletions, POLICY);
const CHAT_ROUTE = chatCompletions.routes[0]!;

function chat(doc: unknown): ReturnType<typeof validateChatRequest> {
  return validateChatRequest(Buffer.from(JSON.stringify(doc)));
}

function rejected(result: ReturnType<typeof validateChatRequest>): { code: string; param: string | null } {
  assert.equal(result.ok, false, JSON.stringify(result));
  if (result.ok) throw new Error('unreachable');
  return { code: result.error.code, param: result.param };
}

/** The input of gatewayUpstreamHeaders, and the headers the provider's credential source made. */
type GatewayUpstreamHeaderInput = HeaderInput & { readonly credential: Readonly<Record<string, string>> };

/** The headers a model call takes upstream: gatewayUpstreamHeaders', then the credential's, added as forward.ts writes the request. */
function gatewayUpstreamHeaders(incoming: IncomingHttpHeaders, protocol: Parameters<typeof headersWithoutCredential>[1], set: GatewayUpstreamHeaderInput) {
  return withCredential(headersWithoutCredential(incoming, protocol, set), secretHeaders(set.credential));
}

const SET: GatewayUpstreamHeaderInput = {
  host: 'api.openai.com',
  credential: { authorization: 'Bearer sk-upstream-key' },
  clientRequestId: 'req-123',
  provider: { kind: 'openai', organization: undefined, project: undefined },
};

// ---- routeGatewayRequest ----

test('POST /v1/chat/completions is the chat route, with its query kept', () => {
  assert.deepEqual(routeGatewayRequest('POST', '/v1/chat/completions'), { ok: true, kind: 'protocol', protocol: chatCompletions, route: CHAT_ROUTE, query: '' });
  assert.deepEqual(routeGatewayRequest('POST', '/v1/chat/completions?api-version=2024-10-21'), {
    ok: true,
    kind: 'protocol',
    protocol: chatCompletions,
    route: CHAT_ROUTE,
    query: 'api-version=2024-10-21',
  });
});

test('a chat query with characters outside the safe set is rejected with 400 invalid_query', () => {
  for (const target of [
    '/v1/chat/completions?a=b c',
    '/v1/chat/completions?a=<b>',
    '/v1/chat/completions?a=b#frag',
    '/v1/chat/completions?a=b?c',
    '/v1/chat/completions?a=b/c',
    '/v1/chat/completions?a="b"',
    '/v1/chat/completions?a=b;c',
  ]) {
    const r = routeGatewayRequest('POST', target);
    assert.equal(r.ok, false, target);
    if (r.ok) continue;
    assert.equal(r.error, ERRORS.badQuery, target);
    assert.equal(r.error.status, 400);
    assert.equal(r.error.code, 'invalid_query');
  }
});

test('any method but POST on the chat route is 405 with Allow: POST', () => {
  for (const method of ['GET', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'post']) {
    const r = routeGatewayRequest(method, '/v1/chat/completions');
    assert.equal(r.ok, false, method);
    if (r.ok) continue;
    assert.equal(r.error.status, 405, method);
    assert.equal(r.allow, 'POST', method);
  }
});

test('GET /v1/models is the models route', () => {
  assert.deepEqual(routeGatewayRequest('GET', '/v1/models'), { ok: true, kind: 'models' });
});

test('GET /v1/models/{id} is the model route, its id percent-decoded', () => {
  assert.deepEqual(routeGatewayRequest('GET', '/v1/models/gpt-4.1'), { ok: true, kind: 'model', id: 'gpt-4.1' });
  assert.deepEqual(routeGatewayRequest('GET', '/v1/models/ft%3Agpt-4.1%3Aacme'), { ok: true, kind: 'model', id: 'ft:gpt-4.1:acme' });
  const bad = routeGatewayRequest('GET', '/v1/models/%E0%A4%A');
  assert.equal(bad.ok, false);
  if (!bad.ok) assert.equal(bad.error, ERRORS.modelNotFound);
});

test('modelBody serves an allowlisted model and nothing else', () => {
  const providers = [{ name: 'openai', models: ['gpt-4.1'] }, { name: 'anthropic', models: ['claude-x'] }];
  assert.deepEqual(JSON.parse(modelBody('gpt-4.1', providers)!), { id: 'gpt-4.1', object: 'model', created: 0, owned_by: 'openai' });
  assert.deepEqual(JSON.parse(modelBody('claude-x', providers)!).owned_by, 'anthropic');
  assert.equal(modelBody('gpt-secret', providers), undefined);
});

test('any method but GET on the models route is 405 with Allow: GET', () => {
  for (const method of ['POST', 'PUT', 'DELETE']) {
    const r = routeGatewayRequest(method, '/v1/models');
    assert.equal(r.ok, false, method);
    if (r.ok) continue;
    assert.equal(r.error.status, 405, method);
    assert.equal(r.allow, 'GET', method);
  }
});

test('every other path is 404 not_found, whatever the method', () => {
  for (const path of [
    '/v1/completions',
    '/v1/embeddings',
    '/chat/completions',
    '/v1/chat/completions/',
    '//v1/chat/completions',
    '/v1/../v1/chat/completions',
    '/v1/./chat/completions',
    '/v1/chat/completions%2F',
    '/V1/chat/completions',
    '/v1/v1/chat/completions',
    '/v1/responsesx',
    '/v1/conversationsx',
    '/',
    '',
    'http://api.openai.com/v1/chat/completions',
  ]) {
    for (const method of ['GET', 'POST']) {
      const r = routeGatewayRequest(method, path);
      assert.equal(r.ok, false, `${method} ${path}`);
      if (r.ok) continue;
      assert.equal(r.error, ERRORS.notFound, `${method} ${path}`);
      assert.equal(r.error.status, 404);
      assert.equal(r.allow, undefined);
    }
  }
});

test('stored responses and conversations are never routed: 404 stored_state_not_routed, whatever the method', () => {
  for (const path of ['/v1/responses/resp_123', '/v1/responses/resp_123/input_items', '/v1/responses/resp_123/cancel', '/v1/responses/', '/v1/conversations', '/v1/conversations/conv_1/items']) {
    for (const method of ['GET', 'POST', 'DELETE']) {
      const r = routeGatewayRequest(method, path);
      assert.equal(r.ok, false, `${method} ${path}`);
      if (!r.ok) assert.equal(r.error, ERRORS.storedStateNotRouted, `${method} ${path}`);
    }
  }
});

// ---- isJsonContentType ----

test('isJsonContentType accepts application/json with parameters, in any case, and +json types', () => {
  for (const v of [
    'application/json',
    'application/json; charset=utf-8',
    'application/json;charset=UTF-8',
    'APPLICATION/JSON',
    'Application/Json ; charset=utf-8',
    'application/vnd.x+json',
  ]) {
    assert.equal(isJsonContentType(v), true, v);
  }
});

test('isJsonContentType rejects other media types and a missing header', () => {
  for (const v of [undefined, '', 'text/plain', 'application/jsonx', 'multipart/form-data; boundary=x', 'text/json', 'application/x-www-form-urlencoded', 'json']) {
    assert.equal(isJsonContentType(v), false, String(v));
  }
});

// ---- validateChatRequest ----

test('a valid chat request yields its model and stream flag', () => {
  assert.deepEqual(chat({ model: 'gpt-4.1', messages: [{ role: 'user', content: 'hi' }] }), { ok: true, model: 'gpt-4.1', stream: false });
});

test('a body that is not JSON is invalid_json with no param', () => {
  for (const text of ['', '{', 'model=gpt-4.1', '{"model":"gpt-4.1",}']) {
    assert.deepEqual(rejected(validateChatRequest(Buffer.from(text))), { code: 'invalid_json', param: null }, text);
  }
});

test('JSON that is not an object (array, string, number, null) is invalid_json', () => {
  for (const doc of [[], [{ model: 'gpt-4.1' }], 'gpt-4.1', 42, null, true]) {
    assert.deepEqual(rejected(chat(doc)), { code: 'invalid_json', param: null }, JSON.stringify(doc));
  }
});

test('a missing model is model_missing with param "model"', () => {
  assert.deepEqual(rejected(chat({ messages: [] })), { code: 'model_missing', param: 'model' });
});

test('a model that is not a string is model_missing with param "model"', () => {
  for (const model of [42, null, ['gpt-4.1'], { id: 'gpt-4.1' }, true]) {
    assert.deepEqual(rejected(chat({ model, messages: [] })), { code: 'model_missing', param: 'model' }, JSON.stringify(model));
  }
});

test('a model outside the allowlist is model_not_allowed, matched exactly', () => {
  for (const model of ['gpt-5', 'GPT-4.1', ' gpt-4.1', 'gpt-4.1 ', 'gpt-4', '']) {
    assert.deepEqual(rejected(chat({ model, messages: [] })), { code: 'model_not_allowed', param: 'model' }, model);
  }
});

test('a refused model\'s error names the model asked for (bounded, as OpenAI\'s does) and no allowed model', () => {
  const result = chat({ model: 'internal-model\u0000x', messages: [] });
  assert.equal(result.ok, false);
  if (result.ok) return;
  const body = openAiErrorBody(result.error, result.param, result.message ?? result.error.message);
  assert.match(body, /the model \\"internal-model\?x\\" is not available/);
  for (const allowed of ALLOWED) assert.ok(!body.includes(allowed), body);
  const long = chat({ model: 'm'.repeat(5000), messages: [] });
  assert.ok(!long.ok && (long.message ?? '').length < 300, 'bounded');
});

test('messages missing or not an array is messages_missing with param "messages"', () => {
  for (const messages of [undefined, null, 'hi', { role: 'user' }, 3]) {
    assert.deepEqual(rejected(chat({ model: 'gpt-4.1', messages })), { code: 'messages_missing', param: 'messages' }, JSON.stringify(messages));
  }
});

test('every allowed role is accepted: system, developer, user, assistant, tool', () => {
  const r = chat({
    model: 'gpt-4.1',
    messages: [
      { role: 'system', content: 's' },
      { role: 'developer', content: 'd' },
      { role: 'user', content: 'u' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'result' },
    ],
  });
  assert.equal(r.ok, true, JSON.stringify(r));
});

test('an empty messages array passes the gateway (the upstream judges it)', () => {
  assert.equal(chat({ model: 'gpt-4.1', messages: [] }).ok, true);
});

test('a disallowed role, a missing role or a non-object message is role_not_allowed naming messages[i].role', () => {
  const ok = { role: 'user', content: 'hi' };
  const cases: [unknown, number][] = [
    [{ role: 'function', name: 'f', content: 'x' }, 1],
    [{ content: 'no role' }, 1],
    [{ role: 'USER', content: 'x' }, 1],
    [{ role: 42 }, 1],
    ['user', 2],
    [null, 0],
    [['user'], 1],
  ];
  for (const [bad, index] of cases) {
    const messages = [...Array<unknown>(index).fill(ok), bad, ok];
    assert.deepEqual(
      rejected(chat({ model: 'gpt-4.1', messages })),
      { code: 'role_not_allowed', param: `messages[${index}].role` },
      JSON.stringify(bad),
    );
  }
});

test('a stream value that is not a boolean is invalid_stream with param "stream"', () => {
  for (const stream of ['true', 1, 0, null, {}]) {
    assert.deepEqual(rejected(chat({ model: 'gpt-4.1', messages: [], stream })), { code: 'invalid_stream', param: 'stream' }, JSON.stringify(stream));
  }
});

test('a request with stream: true passes, reported as a stream with its model', () => {
  assert.deepEqual(chat({ model: 'gpt-4.1', messages: [], stream: true, stream_options: { include_usage: true } }), { ok: true, model: 'gpt-4.1', stream: true });
});

// ---- identityFromHeaders ----

test('identity headers are read as given', () => {
  assert.deepEqual(
    identityFromHeaders({ 'x-instance-id': 'bot-7', 'x-workflow': 'ci/review', 'x-run-id': 'run:42@a.b_c-d' }),
    { instanceId: 'bot-7', workflow: 'ci/review', runId: 'run:42@a.b_c-d' },
  );
});

test('absent identity headers are null', () => {
  assert.deepEqual(identityFromHeaders({}), { instanceId: null, workflow: null, runId: null });
  assert.deepEqual(identityFromHeaders({ 'x-workflow': 'w' }), { instanceId: null, workflow: 'w', runId: null });
});

test('an identity header with a bad character, too long, empty or repeated is an error naming that header', () => {
  const names: [string, string][] = [
    ['x-instance-id', 'X-Instance-Id'],
    ['x-workflow', 'X-Workflow'],
    ['x-run-id', 'X-Run-Id'],
  ];
  const badValues: (string | string[])[] = ['a b', 'a\tb', 'a,b', 'é', 'a'.repeat(129), '', ['a', 'b']];
  for (const [name, display] of names) {
    for (const value of badValues) {
      const r = identityFromHeaders({ [name]: value } as IncomingHttpHeaders);
      assert.deepEqual(r, { error: ERRORS.badIdentityHeader, param: display }, `${name}: ${JSON.stringify(value)}`);
    }
  }
});

test('an identity value of exactly 128 characters is accepted', () => {
  const v = 'a'.repeat(128);
  assert.deepEqual(identityFromHeaders({ 'x-run-id': v }), { instanceId: null, workflow: null, runId: v });
});

// ---- clientRequestId ----

test('a well-formed X-Client-Request-Id is kept', () => {
  for (const v of ['req-123', 'a', 'A.b_c:d-9', 'x'.repeat(128)]) {
    assert.equal(clientRequestId({ 'x-client-request-id': v }), v);
  }
});

test('a missing, malformed or too long X-Client-Request-Id is undefined', () => {
  for (const v of [undefined, '', 'a b', 'a/b', 'a@b', 'é', 'x'.repeat(129), 'a\r\nb']) {
    assert.equal(clientRequestId({ 'x-client-request-id': v }), undefined, JSON.stringify(v));
  }
});

// ---- botToken ----

test('the bot token comes from Authorization: Bearer or x-api-key; the same token in both is fine, two different ones are a conflict', () => {
  const token = (t: string | undefined) => ({ kind: 'token', token: t });
  assert.deepEqual(botToken({ authorization: 'Bearer tok-1' }), token('tok-1'));
  assert.deepEqual(botToken({ 'x-api-key': 'tok-1' }), token('tok-1'));
  assert.deepEqual(botToken({ authorization: 'Bearer tok-1', 'x-api-key': 'tok-1' }), token('tok-1'));
  assert.deepEqual(botToken({ authorization: 'Bearer tok-1', 'x-api-key': 'tok-2' }), { kind: 'conflict' });
  assert.deepEqual(botToken({ authorization: 'Bearer conflict' }), token('conflict'), 'a token spelled "conflict" is a token');
  for (const headers of [{}, { authorization: 'Basic dG9rOg==' }, { authorization: 'Bearer ' }, { 'x-api-key': '' }]) assert.deepEqual(botToken(headers), token(undefined), JSON.stringify(headers));
});

// ---- gatewayUpstreamHeaders ----

const upstreamHeaders = (incoming: IncomingHttpHeaders, set: GatewayUpstreamHeaderInput) => gatewayUpstreamHeaders(incoming, chatCompletions, set);

test('client credentials never go upstream', () => {
  const out = upstreamHeaders(
    {
      authorization: 'Bearer bot-token',
      'proxy-authorization': 'Basic eDp5',
      'x-api-key': 'sk-found',
      'api-key': 'azure-found',
      cookie: 'session=abc',
    },
    SET,
  );
  assert.equal(out.authorization, 'Bearer sk-upstream-key');
  for (const name of ['proxy-authorization', 'x-api-key', 'api-key', 'cookie']) assert.ok(!(name in out), name);
});

test('client account selectors never go upstream', () => {
  const out = upstreamHeaders(
    {
      'openai-organization': 'org-other',
      'openai-project': 'proj-other',
      'upstream-organization': 'org-other',
      'upstream-project': 'proj-other',
    },
    SET,
  );
  for (const name of ['openai-organization', 'openai-project', 'upstream-organization', 'upstream-project']) assert.ok(!(name in out), name);
});

test('gateway identity headers stay at the gateway', () => {
  const out = upstreamHeaders({ 'x-instance-id': 'bot-1', 'x-workflow': 'w', 'x-run-id': 'r' }, SET);
  for (const name of ['x-instance-id', 'x-workflow', 'x-run-id']) assert.ok(!(name in out), name);
});

test('forwarding headers are dropped', () => {
  const out = upstreamHeaders(
    {
      forwarded: 'for=10.0.0.1',
      'x-forwarded-for': '10.0.0.1',
      'x-forwarded-host': 'evil.example',
      'x-forwarded-proto': 'http',
      'x-real-ip': '10.0.0.1',
    },
    SET,
  );
  for (const name of ['forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip']) assert.ok(!(name in out), name);
});

test('hop-by-hop headers and headers named in Connection are dropped', () => {
  const out = upstreamHeaders(
    {
      connection: 'keep-alive, X-Custom, x-stainless-lang',
      'keep-alive': 'timeout=5',
      'proxy-connection': 'keep-alive',
      te: 'trailers',
      trailer: 'x-checksum',
      'transfer-encoding': 'chunked',
      upgrade: 'websocket',
      'x-custom': '1',
      'x-stainless-lang': 'js',
      'user-agent': 'OpenAI/JS 4.0',
    },
    SET,
  );
  for (const name of ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'x-custom', 'x-stainless-lang']) {
    assert.ok(!(name in out), name);
  }
  assert.equal(out['user-agent'], 'OpenAI/JS 4.0');
});

test('a client cannot strip our Authorization or Host via Connection', () => {
  const out = upstreamHeaders({ connection: 'authorization, host, content-length, accept-encoding, x-client-request-id' }, SET);
  assert.equal(out.authorization, 'Bearer sk-upstream-key');
  assert.equal(out.host, 'api.openai.com');
  assert.equal(out['accept-encoding'], 'identity');
  assert.equal(out['x-client-request-id'], 'req-123');
});

test('the gateway sets Host, Authorization, Accept-Encoding and X-Client-Request-Id, replacing the client values; the client\'s Content-Length never goes up', () => {
  const out = upstreamHeaders(
    {
      host: 'proxy.ns.svc:8450',
      authorization: 'Bearer bot-token',
      'content-length': '999',
      'accept-encoding': 'gzip, br',
      'x-client-request-id': 'client-chosen',
    },
    SET,
  );
  assert.deepEqual(out, {
    host: 'api.openai.com',
    authorization: 'Bearer sk-upstream-key',
    'accept-encoding': 'identity',
    'x-client-request-id': 'req-123',
  });
});

test('an OpenAI-kind provider\'s organization and project go up as OpenAI-Organization and OpenAI-Project, only when configured', () => {
  const without = upstreamHeaders({}, SET);
  for (const name of ['openai-organization', 'openai-project', 'upstream-organization', 'upstream-project']) assert.ok(!(name in without), name);
  const withBoth = upstreamHeaders({}, { ...SET, provider: { kind: 'openai', organization: 'org-ours', project: 'proj-ours' } });
  assert.equal(withBoth['openai-organization'], 'org-ours');
  assert.equal(withBoth['openai-project'], 'proj-ours');
});

test('configured organization and project replace the client values', () => {
  const out = upstreamHeaders(
    { 'openai-organization': 'org-other', 'openai-project': 'proj-other' },
    { ...SET, provider: { kind: 'openai', organization: 'org-ours', project: 'proj-ours' } },
  );
  assert.equal(out['openai-organization'], 'org-ours');
  assert.equal(out['openai-project'], 'proj-ours');
});

test('an Anthropic-kind provider gets the key in x-api-key, and no Authorization', () => {
  const [name, prefix] = keyHeader('anthropic');
  const credential = { [name]: `${prefix}sk-upstream-key` };
  const out = gatewayUpstreamHeaders({ authorization: 'Bearer bot', 'x-api-key': 'bot' }, anthropicMessages, { ...SET, credential, provider: { kind: 'anthropic', organization: undefined, project: undefined } });
  assert.equal(out['x-api-key'], 'sk-upstream-key');
  assert.equal(out.authorization, undefined);
});

test('the OpenAI SDK and Codex headers on the allowlist pass through unchanged', () => {
  const incoming: IncomingHttpHeaders = {
    'content-type': 'application/json',
    accept: 'text/event-stream',
    'user-agent': 'OpenAI/JS 4.0',
    'x-stainless-lang': 'js',
    'x-stainless-retry-count': '0',
    'openai-beta': 'assistants=v2',
    'idempotency-key': 'idem-1',
    originator: 'codex_exec',
    'session-id': 's-1',
    'thread-id': 't-1',
    'x-codex-turn-metadata': '{"turn":1}',
  };
  const out = upstreamHeaders(incoming, SET);
  for (const [name, value] of Object.entries(incoming)) assert.equal(out[name], value, name);
});

test('request headers are an allowlist: a header nobody listed stays at the gateway', () => {
  const out = upstreamHeaders(
    {
      'x-authorization': 'Bearer other',
      'helicone-auth': 'Bearer sk-helicone',
      'x-goog-user-project': 'billing-project',
      'x-custom-thing': '1',
      'chatgpt-account-id': 'acct-1',
      'user-agent': 'kept',
    },
    SET,
  );
  for (const name of ['x-authorization', 'helicone-auth', 'x-goog-user-project', 'x-custom-thing', 'chatgpt-account-id']) assert.ok(!(name in out), name);
  assert.equal(out['user-agent'], 'kept');
});

test('gatewayUpstreamHeaders does not modify the incoming header object', () => {
  const incoming: IncomingHttpHeaders = { authorization: 'Bearer bot', connection: 'x-a', 'x-a': '1' };
  const copy = structuredClone(incoming);
  upstreamHeaders(incoming, SET);
  assert.deepEqual(incoming, copy);
});

test('gatewayUpstreamHeaders throws on CR, LF or NUL in the key, host, request id, organization or project', () => {
  for (const bad of ['a\rb', 'a\nb', 'a\0b']) {
    assert.throws(() => upstreamHeaders({}, { ...SET, credential: { authorization: `Bearer ${bad}` } }), /refusing to set header/, `credential: ${JSON.stringify(bad)}`);
    for (const field of ['host', 'clientRequestId'] as const) {
      assert.throws(() => upstreamHeaders({}, { ...SET, [field]: bad }), /refusing to set header/, `${field}: ${JSON.stringify(bad)}`);
    }
    for (const field of ['organization', 'project'] as const) {
      assert.throws(() => upstreamHeaders({}, { ...SET, provider: { ...SET.provider, [field]: bad } }), /refusing to set header/, `${field}: ${JSON.stringify(bad)}`);
    }
  }
});

test('the header-injection error does not echo the key', () => {
  assert.throws(
    () => upstreamHeaders({}, { ...SET, credential: { authorization: 'Bearer sk-very-secret\r\nX-Evil: 1' } }),
    (err: Error) => !err.message.includes('sk-very-secret'),
  );
});

// ---- upstreamPath ----

test('upstreamPath appends the protocol path to the base path, never doubling /v1', () => {
  assert.equal(upstreamPath('/v1', CHAT_ROUTE, ''), '/v1/chat/completions');
  assert.equal(upstreamPath('', CHAT_ROUTE, ''), '/chat/completions');
  assert.equal(upstreamPath('/openai/v1', CHAT_ROUTE, ''), '/openai/v1/chat/completions');
  assert.equal(upstreamPath('/v1', { path: '/v1/responses', upstreamPath: '/responses' }, ''), '/v1/responses');
});

test('upstreamPath appends the query only when it is non-empty', () => {
  assert.equal(upstreamPath('/v1', CHAT_ROUTE, 'api-version=2024-10-21'), '/v1/chat/completions?api-version=2024-10-21');
  assert.ok(!upstreamPath('/v1', CHAT_ROUTE, '').includes('?'));
});

// ---- OpenAI error format ----

test('openAiErrorType maps statuses to OpenAI error types', () => {
  const cases: [number, string][] = [
    [400, 'invalid_request_error'],
    [405, 'invalid_request_error'],
    [413, 'invalid_request_error'],
    [415, 'invalid_request_error'],
    [401, 'authentication_error'],
    [403, 'permission_error'],
    [404, 'not_found_error'],
    [429, 'rate_limit_error'],
    [500, 'server_error'],
    [502, 'server_error'],
    [503, 'server_error'],
    [504, 'server_error'],
  ];
  for (const [status, type] of cases) assert.equal(openAiErrorType(status), type, String(status));
});

test('openAiErrorBody is {error:{message,type,code,param}}', () => {
  assert.deepEqual(JSON.parse(openAiErrorBody(ERRORS.modelNotAllowed, 'model', ERRORS.modelNotAllowed.message)), {
    error: { message: ERRORS.modelNotAllowed.message, type: 'invalid_request_error', code: 'model_not_allowed', param: 'model' },
  });
  assert.deepEqual(JSON.parse(openAiErrorBody(ERRORS.unauthenticated, null, ERRORS.unauthenticated.message)), {
    error: { message: ERRORS.unauthenticated.message, type: 'authentication_error', code: 'invalid_bot_token', param: null },
  });
});

test('openAiErrorBody uses a given message instead of the fixed one', () => {
  assert.equal(JSON.parse(openAiErrorBody(ERRORS.internal, null, 'other')).error.message, 'other');
});

// ---- modelsListBody ----

test('modelsListBody lists exactly the allowlist, in order, in OpenAI list format', () => {
  assert.deepEqual(JSON.parse(modelsListBody([{ name: 'openai', models: ['gpt-4.1', 'gpt-4.1-mini'] }])), {
    object: 'list',
    data: [
      { id: 'gpt-4.1', object: 'model', created: 0, owned_by: 'openai' },
      { id: 'gpt-4.1-mini', object: 'model', created: 0, owned_by: 'openai' },
    ],
  });
});

test('modelsListBody of an empty allowlist is an empty list', () => {
  assert.deepEqual(JSON.parse(modelsListBody([])), { object: 'list', data: [] });
  assert.deepEqual(JSON.parse(modelsListBody([{ name: 'openai', models: [] }])), { object: 'list', data: [] });
});

test('modelsListBody lists every provider\'s models, each owned_by its provider', () => {
  const data = (JSON.parse(modelsListBody([{ name: 'openai', models: ['gpt-4.1'] }, { name: 'anthropic', models: ['claude-x', 'claude-y'] }])) as { data: { id: string; owned_by: string }[] }).data;
  assert.deepEqual(data.map((m) => [m.id, m.owned_by]), [['gpt-4.1', 'openai'], ['claude-x', 'anthropic'], ['claude-y', 'anthropic']]);
});

test('every X-Forwarded-* header, credential-looking headers and Expect are dropped on the way up', () => {
  const out = upstreamHeaders(
    {
      'x-forwarded-port': '443',
      'x-forwarded-prefix': '/x',
      'x-forwarded-server': 'edge',
      'x-original-forwarded-for': '10.0.0.1',
      'openai-api-key': 'sk-x',
      'x-goog-api-key': 'g',
      'x-auth-token': 't',
      expect: '100-continue',
      'user-agent': 'kept',
    },
    { host: 'api.example', credential: { authorization: 'Bearer sk-ours' }, clientRequestId: 'id', provider: { kind: 'openai', organization: undefined, project: undefined } },
  );
  for (const name of ['x-forwarded-port', 'x-forwarded-prefix', 'x-forwarded-server', 'x-original-forwarded-for', 'openai-api-key', 'x-goog-api-key', 'x-auth-token', 'expect']) {
    assert.ok(!(name in out), name);
  }
  assert.equal(out['user-agent'], 'kept');
  assert.equal(out.authorization, 'Bearer sk-ours');
});
