// The Responses API protocol module: request policy (model, stored state, hosted tools) and the
// stream reader, fed transcripts in OpenAI's streaming format.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { checkRequestBody } from '../../src/gateway/check-call.ts';
import type { CallSummary } from '../../src/gateway/protocols/protocol.ts';
import { responses } from '../../src/gateway/protocols/responses.ts';
import { SseFramer } from '../../src/gateway/sse.ts';
import type { ShellTool } from '../support/agent-turns.ts';
import { encodeSse, failedTranscript, jsonBodyOf, textTranscript, toolCallTranscript } from '../support/responses-transcripts.ts';
import { expectedSummaries, rawEvents, SSE_FIXTURES } from '../support/sse-fixtures.ts';
import { framedEvents, splitsThatChangeTheEvents } from '../support/sse-splits.ts';
import { countingReader } from '../support/counting-reader.ts';

const POLICY = { allowedModels: new Set(['gpt-5', 'gpt-5-mini']), hostedTools: new Set<string>() };

function check(doc: Record<string, unknown>, policy = POLICY) {
  return checkRequestBody(Buffer.from(JSON.stringify(doc)), responses, policy);
}

function refusal(doc: Record<string, unknown>, policy = POLICY): { code: string; param: string | null; message: string } {
  const r = check(doc, policy);
  assert.equal(r.ok, false, `expected a refusal for ${JSON.stringify(doc).slice(0, 200)}`);
  if (r.ok) throw new Error('unreachable');
  return { code: r.error.code, param: r.param, message: r.message ?? r.error.message };
}

/** What Codex 0.169 sends, in shape (recorded): developer + user messages, tools, store:false. */
const CODEX_LIKE = {
  model: 'gpt-5',
  instructions: 'You are Codex.',
  input: [
    { type: 'message', role: 'developer', content: [{ type: 'input_text', text: '<permissions instructions>' }] },
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'say hi' }] },
  ],
  tools: [
    { type: 'function', name: 'shell_command', description: 'Runs a shell command', strict: false, parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } },
    { type: 'namespace', name: 'mcp__files', tools: [] },
    { type: 'custom', name: 'apply_patch', format: { type: 'grammar', syntax: 'lark', definition: 'start: x' } },
    { type: 'tool_search', execution: 'client', description: 'Searches over deferred tool metadata', parameters: { type: 'object', properties: { query: { type: 'string' } } } },
  ],
  tool_choice: 'auto',
  parallel_tool_calls: false,
  reasoning: { effort: 'medium', summary: 'auto' },
  store: false,
  stream: true,
  include: ['reasoning.encrypted_content'],
  prompt_cache_key: 'thread-1',
  client_metadata: { originator: 'codex_exec' },
};

test('a Codex-shaped request passes with its model and stream flag', () => {
  assert.deepEqual(check(CODEX_LIKE), { ok: true, model: 'gpt-5', stream: true });
});

test('a plain SDK request with a string input passes', () => {
  assert.deepEqual(check({ model: 'gpt-5-mini', input: 'hello' }), { ok: true, model: 'gpt-5-mini', stream: false });
});

test('responses: a model outside the allowlist is model_not_allowed, naming the model asked for (as OpenAI does), kept for the log too', () => {
  const r = check({ ...CODEX_LIKE, model: 'gpt-secret' });
  assert.equal(r.ok, false);
  if (r.ok) return;
  assert.equal(r.error.code, 'model_not_allowed');
  assert.equal(r.refusedModel, 'gpt-secret');
  assert.match(r.message ?? '', /the model "gpt-secret" is not available through this gateway; GET \/v1\/models lists/);
});

test('responses: model missing, stream not boolean, input missing are precise 400s', () => {
  assert.deepEqual(refusal({ input: 'x' }).code, 'model_missing');
  assert.deepEqual(refusal({ model: 'gpt-5', input: 'x', stream: 'yes' }).param, 'stream');
  for (const input of [undefined, null, 42, { role: 'user' }]) assert.deepEqual(refusal({ model: 'gpt-5', input }).code, 'input_missing', JSON.stringify(input));
  assert.deepEqual(refusal({ model: 'gpt-5', input: ['text'] }), { code: 'invalid_input_item', param: 'input[0]', message: refusal({ model: 'gpt-5', input: ['text'] }).message });
});

test('responses: message roles are system, developer, user or assistant', () => {
  assert.equal(check({ model: 'gpt-5', input: ['system', 'developer', 'user', 'assistant'].map((role) => ({ role, content: 'x' })) }).ok, true);
  for (const role of ['tool', 'function', 'USER', 42]) {
    assert.deepEqual(refusal({ model: 'gpt-5', input: [{ role: 'user', content: 'x' }, { type: 'message', role, content: 'x' }] }).param, 'input[1].role', String(role));
  }
});

// ---- stored state ----

test('previous_response_id, conversation, a stored prompt and background mode are refused: a bot never reaches stored state', () => {
  for (const [field, value] of [
    ['previous_response_id', 'resp_68af0000'],
    ['conversation', 'conv_123'],
    ['conversation', { id: 'conv_123' }],
    ['prompt', { id: 'pmpt_1', variables: {} }],
  ] as const) {
    const r = refusal({ ...CODEX_LIKE, [field]: value });
    assert.equal(r.code, 'stored_state_not_allowed', field);
    assert.equal(r.param, field);
    assert.match(r.message, /send the whole conversation in "input"/);
  }
  assert.equal(refusal({ ...CODEX_LIKE, background: true }).param, 'background');
  assert.equal(check({ ...CODEX_LIKE, previous_response_id: null, conversation: null, background: false }).ok, true);
});

test('an item_reference in input is refused', () => {
  const r = refusal({ model: 'gpt-5', input: [{ role: 'user', content: 'x' }, { type: 'item_reference', id: 'msg_other_bot' }] });
  assert.deepEqual([r.code, r.param], ['stored_state_not_allowed', 'input[1]']);
});

test('an input item with an id but without its content is refused: the provider would read it from storage', () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ type: 'reasoning', id: 'rs_other', summary: [] }, '"encrypted_content"'],
    [{ type: 'message', id: 'msg_other', role: 'assistant' }, '"content"'],
    [{ type: 'function_call', id: 'fc_other', call_id: 'c1', name: 'f' }, '"arguments"'],
    [{ type: 'web_search_call', id: 'ws_other', status: 'completed' }, 'content'],
    [{ type: 'something_new', id: 'x_1' }, 'content'],
  ];
  for (const [item, missing] of cases) {
    const r = refusal({ model: 'gpt-5', input: [item] });
    assert.deepEqual([r.code, r.param], ['stored_state_not_allowed', 'input[0].id'], JSON.stringify(item));
    assert.ok(r.message.includes(missing), r.message);
  }
});

test('input items that carry their content pass, with or without ids: whole-history clients keep working', () => {
  const history = [
    { role: 'user', content: 'list files' },
    { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'gAAAA...' },
    { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'shell_command', arguments: '{"command":"ls"}' },
    { type: 'function_call_output', call_id: 'call_1', output: 'a.txt' },
    { type: 'message', id: 'msg_1', role: 'assistant', content: [{ type: 'output_text', text: 'a.txt' }] },
    { type: 'custom_tool_call', call_id: 'call_2', name: 'apply_patch', input: '*** Begin Patch' },
    { type: 'custom_tool_call_output', call_id: 'call_2', output: 'ok' },
  ];
  assert.deepEqual(check({ model: 'gpt-5', input: history, store: false }), { ok: true, model: 'gpt-5', stream: false });
});

// ---- hosted tools ----

test('tools the client runs itself pass: function, custom, namespace, local_shell, a local shell, apply_patch, computer use', () => {
  const tools = [{ type: 'function', name: 'f' }, { type: 'custom', name: 'c' }, { type: 'namespace', name: 'n' }, { type: 'local_shell' }, { type: 'shell' }, { type: 'shell', environment: { type: 'local' } }, { type: 'apply_patch' }, { type: 'computer_use_preview', display_width: 1, display_height: 1, environment: 'linux' }];
  assert.equal(check({ model: 'gpt-5', input: 'x', tools }).ok, true);
});

test('hosted tools are refused with a 400 naming the type and the flag that allows it, and pass once that flag is given', () => {
  for (const [type, flag] of [
    ['web_search', 'web_search'],
    ['web_search_preview', 'web_search'],
    ['web_search_preview_2025_03_11', 'web_search'],
    ['web_search_2025_08_26', 'web_search'],
    ['file_search', 'file_search'],
    ['code_interpreter', 'code_interpreter'],
    ['image_generation', 'image_generation'],
    ['mcp', 'mcp'],
    ['tool_search', 'tool_search'],
  ]) {
    const doc = { model: 'gpt-5', input: 'x', tools: [{ type: 'function', name: 'f' }, { type, server_url: 'https://evil.example/mcp' }] };
    const r = refusal(doc);
    assert.deepEqual([r.code, r.param], ['tool_not_allowed', 'tools[1].type'], type);
    assert.ok(r.message.includes(`"${type}"`) && r.message.includes(`--allow-hosted-tools ${flag}`), r.message);
    assert.deepEqual(check(doc, { ...POLICY, hostedTools: new Set([flag]) }), { ok: true, model: 'gpt-5', stream: false }, `${type} allowed by ${flag}`);
  }
});

test('a shell tool with a container environment is hosted: refused unless allowed', () => {
  const tools = [{ type: 'shell', environment: { type: 'container_auto' } }];
  const r = refusal({ model: 'gpt-5', input: 'x', tools });
  assert.deepEqual([r.code, r.param], ['tool_not_allowed', 'tools[0].environment']);
  assert.match(r.message, /--allow-hosted-tools shell/);
  assert.equal(check({ model: 'gpt-5', input: 'x', tools }, { ...POLICY, hostedTools: new Set(['shell']) }).ok, true);
});

test('a hosted tool the operator allowed passes, and only that one', () => {
  const policy = { ...POLICY, hostedTools: new Set(['web_search']) };
  assert.equal(check({ model: 'gpt-5', input: 'x', tools: [{ type: 'web_search' }, { type: 'web_search_preview' }] }, policy).ok, true);
  assert.equal(refusal({ model: 'gpt-5', input: 'x', tools: [{ type: 'mcp', server_url: 'https://x' }] }, policy).code, 'tool_not_allowed');
});

test('an unknown tool type is refused, and tools must be objects with a type', () => {
  assert.equal(refusal({ model: 'gpt-5', input: 'x', tools: [{ type: 'teleport' }] }).code, 'tool_not_allowed');
  assert.deepEqual(refusal({ model: 'gpt-5', input: 'x', tools: { type: 'function' } }).param, 'tools');
  assert.deepEqual(refusal({ model: 'gpt-5', input: 'x', tools: ['function'] }).param, 'tools[0]');
  assert.deepEqual(refusal({ model: 'gpt-5', input: 'x', tools: [{ name: 'f' }] }).param, 'tools[0].type');
});

test('tool_choice naming a hosted tool is refused like the tool itself', () => {
  const r = refusal({ model: 'gpt-5', input: 'x', tool_choice: { type: 'web_search_preview' } });
  assert.deepEqual([r.code, r.param], ['tool_not_allowed', 'tool_choice.type']);
  assert.equal(check({ model: 'gpt-5', input: 'x', tool_choice: { type: 'function', name: 'f' } }).ok, true);
  assert.equal(check({ model: 'gpt-5', input: 'x', tool_choice: 'required' }).ok, true);
});

test('a duplicate key in a responses body is refused before any check', () => {
  const r = checkRequestBody(Buffer.from('{"model":"gpt-secret","input":"x","model":"gpt-5"}'), responses, POLICY);
  assert.equal(r.ok, false);
  if (!r.ok) assert.equal(r.error.code, 'duplicate_key');
});

// ---- the stream ----

const MODEL = 'gpt-5.5';
interface Expected {
  outcome: 'completed' | 'incomplete' | 'failed' | 'error' | 'interrupted';
  finish_reason: string | null;
  error?: string;
  usage: { input: number; cached: number; output: number; reasoning: number } | null;
  usage_complete: boolean;
  first_output: string | null;
}
const EXPECTED = expectedSummaries<Expected>();
const FILES = Object.keys(EXPECTED).filter((f) => f.startsWith('responses-'));
const TERMINAL = ['response.completed', 'response.incomplete', 'response.failed'];

type Read = CallSummary & { events: number; oversized: boolean };
function read(chunks: readonly Buffer[], clock: () => number = () => 5, maxEventBytes?: number): Read {
  const reader = responses.newStreamReader(clock);
  const counting = countingReader(reader);
  const framer = new SseFramer(counting.reader, maxEventBytes);
  for (const c of chunks) framer.push(c);
  return { ...reader.summary(), ...counting.counts };
}

test('responses: expected.json says what the fixture bytes hold: the first event with a non-empty delta, the terminal status, whether usage came', () => {
  assert.equal(FILES.length, 6);
  for (const file of FILES) {
    const e = EXPECTED[file]!;
    const events = rawEvents(readFileSync(join(SSE_FIXTURES, file), 'utf8'));
    const first = events.find((ev) => typeof ev.data?.delta === 'string' && ev.data.delta !== '');
    assert.equal(first?.event ?? null, e.first_output, `${file}: first_output`);
    const terminal = events.find((ev) => TERMINAL.includes(ev.event ?? ''))?.data?.response as { status: string; incomplete_details: { reason: string } | null; usage: unknown } | undefined;
    assert.equal(terminal === undefined ? null : (terminal.incomplete_details?.reason ?? terminal.status), e.finish_reason, `${file}: finish_reason`);
    assert.equal(terminal !== undefined && terminal.usage !== null, e.usage_complete, `${file}: usage_complete`);
  }
});

test('responses stream: the recorded-format transcripts (text, tool call, incomplete, failed, error event, cut) give the summaries in expected.json', () => {
  assert.equal(FILES.length, 6);
  for (const file of FILES) {
    const e = EXPECTED[file]!;
    const s = read([readFileSync(join(SSE_FIXTURES, file))]);
    const usage = e.usage === null ? null : { inputTokens: e.usage.input, cachedTokens: e.usage.cached, outputTokens: e.usage.output, reasoningTokens: e.usage.reasoning, cacheWriteTokens: null };
    assert.deepEqual(s.usage, usage, `${file}: usage`);
    assert.equal(s.usageComplete, e.usage_complete, `${file}: usage complete`);
    assert.equal(s.terminated, e.outcome !== 'interrupted', `${file}: terminated`);
    assert.equal(s.streamError, e.error ?? null, `${file}: streamError`);
    assert.equal(s.finishReason, e.finish_reason, `${file}: finish reason`);
    assert.equal(s.firstTokenAt, e.first_output === null ? null : 5, `${file}: first output`);
    assert.equal(s.model, MODEL, `${file}: model`);
  }
});

test('responses stream: fed one event at a time, time to first token is the clock at the first event with a non-empty delta', () => {
  for (const file of FILES) {
    const events = rawEvents(readFileSync(join(SSE_FIXTURES, file), 'utf8'));
    let clock = -1;
    const reader = responses.newStreamReader(() => clock);
    const framer = new SseFramer(reader);
    events.forEach((ev, i) => {
      clock = i;
      framer.push(Buffer.from(ev.raw));
    });
    const first = events.findIndex((ev) => typeof ev.data?.delta === 'string' && ev.data.delta !== '');
    assert.equal(reader.summary().firstTokenAt, first === -1 ? null : first, file);
  }
});

// The reader sees only the framed events, so a split that frames the same events gives the same
// summary: each split is checked at the framer (../support/sse-splits.ts), the summary read whole.
test('responses stream: every transcript split at every byte offset, with every line end, gives the same summary', () => {
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

test('responses stream: time to first token is the first output-bearing delta, not an empty one or the reasoning item', () => {
  const tool: ShellTool = { name: 'exec_command', arguments: { cmd: 'echo hi' } };
  for (const [events, firstType] of [
    [textTranscript('Hello there.', { model: MODEL }), 'response.output_text.delta'],
    [toolCallTranscript(tool, { model: MODEL, request: { include: ['reasoning.encrypted_content'] } }), 'response.function_call_arguments.delta'],
  ] as const) {
    let clock = 0;
    const reader = responses.newStreamReader(() => clock);
    const framer = new SseFramer(reader);
    events.forEach((e, i) => {
      clock = i;
      framer.push(Buffer.from(encodeSse([e])));
    });
    assert.equal(reader.summary().firstTokenAt, events.findIndex((e) => e.event === firstType && e.data.delta !== ''), firstType);
  }
});

test('responses stream: a multi-megabyte response.completed yields its usage with bounded memory', () => {
  const events = textTranscript('Hello there.', { model: MODEL });
  const completed = events.at(-1)!.data.response as { output: unknown[] };
  completed.output = [{ type: 'message', id: 'msg_big', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'y'.repeat(8 * 1024 * 1024), annotations: [] }] }, { type: 'reasoning', id: 'rs_big', summary: [], encrypted_content: 'z'.repeat(2 * 1024 * 1024) }];
  const bytes = Buffer.from(encodeSse(events));
  assert.ok(bytes.length > 10 * 1024 * 1024);
  const reader = responses.newStreamReader(() => 5);
  const counting = countingReader(reader);
  const framer = new SseFramer(counting.reader, 256 * 1024);
  const before = process.memoryUsage().arrayBuffers;
  let peak = 0;
  for (let at = 0; at < bytes.length; at += 64 * 1024) {
    framer.push(bytes.subarray(at, at + 64 * 1024));
    peak = Math.max(peak, process.memoryUsage().arrayBuffers - before);
  }
  assert.ok(peak < 2 * 1024 * 1024, `the reader held ${peak} bytes of array buffers for a ${bytes.length}-byte event`);
  const summary = reader.summary();
  assert.equal(counting.counts.oversized, true);
  assert.deepEqual(summary.usage, { inputTokens: 1200, cachedTokens: 1024, outputTokens: 18, reasoningTokens: 0, cacheWriteTokens: null });
  assert.equal(summary.model, MODEL);
  assert.equal(summary.finishReason, 'completed');
  assert.equal(summary.terminated, true);
});

test('responses: summarizeJson reads usage, model, status and a failure from the JSON answer', () => {
  const completed = jsonBodyOf(textTranscript('Hello there.', { model: MODEL }));
  assert.deepEqual(responses.summarizeJson(Buffer.from(JSON.stringify(completed))), {
    usage: { inputTokens: 1200, cachedTokens: 1024, outputTokens: 18, reasoningTokens: 0, cacheWriteTokens: null },
    usageComplete: true,
    model: MODEL,
    finishReason: 'completed',
    firstTokenAt: null,
    terminated: false,
    streamError: null,
    responseId: completed.id,
  });
  const failed = responses.summarizeJson(Buffer.from(JSON.stringify(jsonBodyOf(failedTranscript('x', { model: MODEL })))));
  assert.deepEqual([failed.usage, failed.finishReason, failed.streamError], [null, 'failed', 'server_error']);
  assert.equal(responses.summarizeJson(Buffer.from('not json')).usage, null);
});

test("responses: a namespace's own tools are checked like top-level ones (web_search and mcp inside a namespace are refused; functions pass)", () => {
  const ns = (tools: unknown[]) => ({ model: 'gpt-5', input: 'hi', tools: [{ type: 'namespace', name: 'ns', tools }] });
  assert.equal(check(ns([{ type: 'function', name: 'f' }])).ok, true);
  for (const [type, name] of [['web_search', 'web_search'], ['mcp', 'mcp']] as const) {
    const r = refusal(ns([{ type: 'function', name: 'f' }, { type }]));
    assert.deepEqual([r.code, r.param], ['tool_not_allowed', 'tools[0].tools[1].type']);
    assert.match(r.message, new RegExp(`--allow-hosted-tools ${name}`));
  }
  const nested = refusal(ns([{ type: 'namespace', name: 'inner', tools: [{ type: 'web_search' }] }]));
  assert.equal(nested.param, 'tools[0].tools[0].tools[0].type', 'namespaces within namespaces too');
  assert.equal(check(ns([{ type: 'web_search' }]), { ...POLICY, hostedTools: new Set(['web_search']) }).ok, true);
});
