// Anthropic's Messages API protocol module: request checks, the stream reader fed the transcripts
// the documented fake sends (test/fixtures/sse/anthropic-*.sse), and the error format.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ERRORS } from '../../src/http/errors.ts';
import { anthropicErrorBody, anthropicMessages } from '../../src/gateway/protocols/anthropic-messages.ts';
import type { CallSummary } from '../../src/gateway/protocols/protocol.ts';
import { checkRequestBody } from '../../src/gateway/check-call.ts';
import { SseFramer } from '../../src/gateway/sse.ts';
import { expectedSummaries, rawEvents, SSE_FIXTURES, type RawEvent } from '../support/sse-fixtures.ts';
import { framedEvents, splitsThatChangeTheEvents } from '../support/sse-splits.ts';
import { countingReader } from '../support/counting-reader.ts';

const MODEL = 'claude-sonnet-5';
const POLICY = { allowedModels: new Set([MODEL]), hostedTools: new Set<string>() };
const check = (doc: Record<string, unknown>, policy = POLICY) => checkRequestBody(Buffer.from(JSON.stringify(doc)), anthropicMessages, policy);
function refusal(doc: Record<string, unknown>, policy = POLICY): { code: string; param: string | null; message: string } {
  const r = check(doc, policy);
  assert.equal(r.ok, false, JSON.stringify(doc).slice(0, 200));
  if (r.ok) throw new Error('unreachable');
  return { code: r.error.code, param: r.param, message: r.message ?? r.error.message };
}
const BASE = { model: MODEL, max_tokens: 1024, messages: [{ role: 'user', content: 'hi' }] };

// ---- requests ----

test('the recorded Claude Code request shape passes: system-role messages, untyped tools, defer_loading, stream', () => {
  const rec = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'recorded', 'claude-code-2.1.330-3.json'), 'utf8')) as { body: Record<string, unknown> };
  assert.deepEqual(check({ ...rec.body, model: MODEL }), { ok: true, model: MODEL, stream: true, maxOutputTokens: rec.body.max_tokens });
});

test('messages: a model outside the allowlist, no messages, a role outside user/assistant/system, a non-boolean stream are precise 400s', () => {
  assert.equal(refusal({ ...BASE, model: 'claude-secret' }).code, 'model_not_allowed');
  assert.equal(refusal({ model: MODEL }).code, 'messages_missing');
  assert.deepEqual(refusal({ ...BASE, messages: [{ role: 'user', content: 'x' }, { role: 'tool', content: 'x' }] }), { code: 'message_role_not_allowed', param: 'messages[1].role', message: ERRORS.messagesRoleNotAllowed.message });
  assert.equal(refusal({ ...BASE, stream: 'yes' }).param, 'stream');
});

test("Anthropic's client tools pass: custom (typed or not), bash, text editor, computer use, memory", () => {
  const tools = [{ name: 'Bash', input_schema: {} }, { type: 'custom', name: 'x', input_schema: {} }, { type: 'bash_20250124', name: 'bash' }, { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' }, { type: 'computer_20250124', name: 'computer' }, { type: 'memory_20250818', name: 'memory' }];
  assert.equal(check({ ...BASE, tools }).ok, true);
});

test("Anthropic's server tools and the MCP connector are hosted tools: refused unless allowed", () => {
  for (const [type, flag] of [
    ['web_search_20250305', 'web_search'],
    ['web_fetch_20250910', 'web_fetch'],
    ['code_execution_20250825', 'code_execution'],
    ['tool_search_tool_regex_20251119', 'tool_search'],
    ['mcp_toolset', 'mcp'],
  ]) {
    const r = refusal({ ...BASE, tools: [{ type, name: 'x' }] });
    assert.deepEqual([r.code, r.param], ['tool_not_allowed', 'tools[0].type'], type);
    assert.ok(r.message.includes(`--allow-hosted-tools ${flag}`), r.message);
    assert.equal(check({ ...BASE, tools: [{ type, name: 'x' }] }, { ...POLICY, hostedTools: new Set([flag]) }).ok, true, `${type} allowed`);
  }
  const mcp = refusal({ ...BASE, mcp_servers: [{ type: 'url', url: 'https://attacker.example/mcp', name: 'x', authorization_token: 't' }] });
  assert.deepEqual([mcp.code, mcp.param], ['tool_not_allowed', 'mcp_servers']);
  assert.equal(refusal({ ...BASE, tools: [{ type: 'teleport_20990101', name: 'x' }] }).code, 'tool_not_allowed');
});

test('a file stored through the Files API is refused wherever it is referenced: the provider would read what someone else uploaded', () => {
  const file = { type: 'document', source: { type: 'file', file_id: 'file_other_bot' } };
  for (const content of [[file], [{ type: 'tool_result', tool_use_id: 't1', content: [file] }]]) {
    const r = refusal({ ...BASE, messages: [{ role: 'user', content }] });
    assert.equal(r.code, 'stored_state_not_allowed');
    assert.match(r.param ?? '', /^messages\[0\]\.content\[0\]\.(content\[0\]\.)?source\.file_id$/);
  }
  const inline = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } };
  assert.equal(check({ ...BASE, messages: [{ role: 'user', content: [inline] }] }).ok, true);
});

test("the gateway's errors on the Messages routes are Anthropic's {type:error,error:{type,message}}", () => {
  assert.deepEqual(JSON.parse(anthropicErrorBody(ERRORS.modelNotAllowed, 'model', 'no')), { type: 'error', error: { type: 'invalid_request_error', message: 'model: no' } });
  const types = [401, 403, 404, 413, 429, 502, 503, 504, 529].map((status) => JSON.parse(anthropicErrorBody({ code: 'x', status, message: 'm' }, null, 'm')).error.type);
  assert.deepEqual(types, ['authentication_error', 'permission_error', 'not_found_error', 'request_too_large', 'rate_limit_error', 'api_error', 'api_error', 'api_error', 'overloaded_error']);
});

// ---- the stream ----

interface Expected {
  outcome: 'completed' | 'error' | 'interrupted';
  stop_reason: string | null;
  error?: string;
  usage: { input: number; cache_read: number; cache_creation: number; output: number };
  usage_complete: boolean;
  first_output: string | null;
}
const EXPECTED = expectedSummaries<Expected>();
const FILES = Object.keys(EXPECTED).filter((f) => f.startsWith('anthropic-'));

type Read = CallSummary & { events: number };
function read(chunks: readonly Buffer[]): Read {
  const reader = anthropicMessages.newStreamReader(() => 7);
  const counting = countingReader(reader);
  const framer = new SseFramer(counting.reader);
  for (const c of chunks) framer.push(c);
  return { ...reader.summary(), events: counting.counts.events };
}

/** A content_block_delta carrying text, tool input or thinking: output, read off the bytes. */
const hasOutput = (ev: RawEvent) => {
  const delta = ev.data?.delta as Record<string, unknown> | undefined;
  return ev.data?.type === 'content_block_delta' && delta !== undefined && [delta.text, delta.partial_json, delta.thinking].some((v) => typeof v === 'string' && v !== '');
};

test('messages: expected.json says what the fixture bytes hold: the first event with output, the stop_reason, whether the final usage came', () => {
  assert.equal(FILES.length, 4);
  for (const file of FILES) {
    const e = EXPECTED[file]!;
    const events = rawEvents(readFileSync(join(SSE_FIXTURES, file), 'utf8'));
    assert.equal(events.find(hasOutput)?.event ?? null, e.first_output, `${file}: first_output`);
    const messageDelta = events.find((ev) => ev.event === 'message_delta')?.data as { delta: { stop_reason: string | null }; usage?: unknown } | undefined;
    assert.equal(messageDelta?.delta.stop_reason ?? null, e.stop_reason, `${file}: stop_reason`);
    assert.equal(messageDelta?.usage !== undefined, e.usage_complete, `${file}: usage_complete`);
  }
});

test('messages stream: text, tool use, error event and cut transcripts give the usage, end and error in expected.json', () => {
  assert.equal(FILES.length, 4);
  for (const file of FILES) {
    const e = EXPECTED[file]!;
    const s = read([readFileSync(join(SSE_FIXTURES, file))]);
    const u = e.usage;
    // Input includes cache reads and writes, in the gateway's terms; both are also counted apart.
    assert.deepEqual(s.usage, { inputTokens: u.input + u.cache_read + u.cache_creation, outputTokens: u.output, reasoningTokens: null, cachedTokens: u.cache_read, cacheWriteTokens: u.cache_creation }, `${file}: usage`);
    assert.equal(s.usageComplete, e.usage_complete, `${file}: usage complete`);
    assert.equal(s.terminated, e.outcome !== 'interrupted', `${file}: terminated`);
    assert.equal(s.streamError, e.error ?? null, `${file}: error`);
    assert.equal(s.finishReason, e.stop_reason, `${file}: stop reason`);
    assert.equal(s.model, MODEL, `${file}: model`);
    assert.equal(s.firstTokenAt, e.first_output === null ? null : 7, `${file}: first output`);
  }
});

test('messages stream: fed one event at a time, time to first token is the clock at the first delta with output', () => {
  for (const file of FILES) {
    const events = rawEvents(readFileSync(join(SSE_FIXTURES, file), 'utf8'));
    let clock = -1;
    const reader = anthropicMessages.newStreamReader(() => clock);
    const framer = new SseFramer(reader);
    events.forEach((ev, i) => {
      clock = i;
      framer.push(Buffer.from(ev.raw));
    });
    const first = events.findIndex(hasOutput);
    assert.equal(reader.summary().firstTokenAt, first === -1 ? null : first, file);
  }
});

// The reader sees only the framed events, so a split that frames the same events gives the same
// summary: each split is checked at the framer (../support/sse-splits.ts), the summary read whole.
test('messages stream: every transcript split at every byte offset, with every line end, gives the same summary', () => {
  for (const file of FILES) {
    const text = readFileSync(join(SSE_FIXTURES, file), 'utf8');
    const whole = read([Buffer.from(text)]);
    const events = framedEvents([Buffer.from(text)]);
    assert.equal(events.length, whole.events, file);
    for (const lineEnd of ['\n', '\r\n', '\r']) {
      const bytes = Buffer.from(text.replaceAll('\n', lineEnd));
      assert.deepEqual(read([bytes]), whole, `${file} (${JSON.stringify(lineEnd)})`);
      assert.deepEqual(splitsThatChangeTheEvents(bytes, events), [], `${file} (${JSON.stringify(lineEnd)}): the offsets whose split frames other events`);
    }
  }
});

test('messages: summarizeJson reads usage, model and stop_reason from the JSON answer', () => {
  const body = { id: 'msg_1', type: 'message', role: 'assistant', model: MODEL, content: [{ type: 'text', text: 'hi' }], stop_reason: 'end_turn', usage: { input_tokens: 10, cache_read_input_tokens: 100, cache_creation_input_tokens: 20, output_tokens: 5 } };
  assert.deepEqual(anthropicMessages.summarizeJson(Buffer.from(JSON.stringify(body))), {
    usage: { inputTokens: 130, outputTokens: 5, reasoningTokens: null, cachedTokens: 100, cacheWriteTokens: 20 },
    usageComplete: true,
    model: MODEL,
    finishReason: 'end_turn',
    firstTokenAt: null,
    terminated: false,
    streamError: null,
    responseId: 'msg_1',
  });
});
