// The events of OpenAI's Responses API streams (`POST /v1/responses`), built as pure functions: the
// transcripts the fake of responses-upstream.ts streams, unit tests read, and the fixtures hold.
//
// The wire format follows OpenAI's documentation, not what would be convenient:
//   - https://developers.openai.com/docs/guides/streaming-responses (event flow, `event:` lines)
//   - https://platform.openai.com/docs/api-reference/responses-streaming (each event's fields:
//     `type`, `sequence_number`, `output_index`, `item_id`, `content_index`, `delta`, `logprobs`,
//     `obfuscation`; `response.function_call_arguments.done` with `name` and `arguments`;
//     the `error` event with `code`, `message`, `param`)
//   - https://platform.openai.com/docs/api-reference/responses/object (the response object that
//     `response.created`, `response.in_progress` and the terminal events carry; it echoes the
//     request's parameters, tools included, and `usage` with `input_tokens_details.cached_tokens`
//     and `output_tokens_details.reasoning_tokens`)
//   - https://platform.openai.com/docs/guides/rate-limits (the `x-ratelimit-*` response headers)
// There is no `data: [DONE]` at the end of a Responses stream: the terminal event is
// `response.completed`, `response.incomplete` or `response.failed`.
//
// The same builders produce the transcripts in test/fixtures/sse/responses-*.sse
// (scripts/e2e/write-sse-fixtures.ts), so unit tests of the stream inspector read exactly what
// the fake sends.
import { deltas, type ShellTool } from './agent-turns.ts';

export interface SseEvent {
  /** The `event:` line; OpenAI repeats it as `type` in the data. */
  event: string;
  data: Record<string, unknown>;
}

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export function usage(input: number, cached: number, output: number, reasoning: number): ResponsesUsage {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output,
  };
}

export const TEXT_USAGE = usage(1200, 1024, 18, 0);
export const TOOL_USAGE = usage(1300, 1024, 64, 40);

/** Ids of one response; fixed ones make the fixture files reproducible. */
export interface ResponseIds {
  response: string;
  message: string;
  functionCall: string;
  callId: string;
  reasoning: string;
  createdAt: number;
}

export const FIXED_IDS: ResponseIds = {
  response: 'resp_68e2e0000000000000000000000000000000000000000001',
  message: 'msg_68e2e0000000000000000000000000000000000000000002',
  functionCall: 'fc_68e2e0000000000000000000000000000000000000000003',
  callId: 'call_e2eA1b2C3d4E5f6G7h8I9j0K1',
  reasoning: 'rs_68e2e0000000000000000000000000000000000000000004',
  createdAt: 1_760_000_000,
};

let counter = 0;
/** Fresh ids per response, so that an agent never sees the same id twice. */
export function freshIds(): ResponseIds {
  const n = (++counter).toString(16).padStart(8, '0');
  const hex = `${Date.now().toString(16)}${n}`.padEnd(48, '0');
  return {
    response: `resp_${hex}`,
    message: `msg_${hex}`,
    functionCall: `fc_${hex}`,
    callId: `call_${n}${Math.random().toString(36).slice(2, 14)}`,
    reasoning: `rs_${hex}`,
    createdAt: Math.floor(Date.now() / 1000),
  };
}

/** Request parameters the response object echoes back (OpenAI returns them with defaults). */
type RequestEcho = Record<string, unknown>;

function echoOf(request: Record<string, unknown>): RequestEcho {
  const pick = <T>(key: string, dflt: T): unknown => (key in request ? request[key] : dflt);
  return {
    background: false,
    instructions: pick('instructions', null),
    max_output_tokens: pick('max_output_tokens', null),
    max_tool_calls: pick('max_tool_calls', null),
    parallel_tool_calls: pick('parallel_tool_calls', true),
    previous_response_id: pick('previous_response_id', null),
    prompt_cache_key: pick('prompt_cache_key', null),
    reasoning: { effort: null, summary: null, ...(request.reasoning as object | undefined) },
    safety_identifier: null,
    service_tier: 'default',
    store: pick('store', true),
    temperature: pick('temperature', 1),
    text: pick('text', { format: { type: 'text' }, verbosity: 'medium' }),
    tool_choice: pick('tool_choice', 'auto'),
    tools: pick('tools', []),
    top_logprobs: 0,
    top_p: pick('top_p', 1),
    truncation: 'disabled',
    user: null,
    metadata: pick('metadata', {}),
  };
}

/** The response object, in the field order OpenAI sends it. */
function responseObject(
  ids: ResponseIds,
  model: string,
  request: Record<string, unknown>,
  state: { status: string; output: unknown[]; usage: ResponsesUsage | null; error?: unknown; incomplete?: unknown; completedAt?: number | null },
): Record<string, unknown> {
  const echo = echoOf(request);
  return {
    id: ids.response,
    object: 'response',
    created_at: ids.createdAt,
    status: state.status,
    background: echo.background,
    completed_at: state.completedAt ?? null,
    error: state.error ?? null,
    incomplete_details: state.incomplete ?? null,
    instructions: echo.instructions,
    max_output_tokens: echo.max_output_tokens,
    max_tool_calls: echo.max_tool_calls,
    model,
    output: state.output,
    parallel_tool_calls: echo.parallel_tool_calls,
    previous_response_id: echo.previous_response_id,
    prompt_cache_key: echo.prompt_cache_key,
    reasoning: echo.reasoning,
    safety_identifier: echo.safety_identifier,
    service_tier: echo.service_tier,
    store: echo.store,
    temperature: echo.temperature,
    text: echo.text,
    tool_choice: echo.tool_choice,
    tools: echo.tools,
    top_logprobs: echo.top_logprobs,
    top_p: echo.top_p,
    truncation: echo.truncation,
    usage: state.usage,
    user: echo.user,
    metadata: echo.metadata,
  };
}

/** Numbers the events in order (`sequence_number` starts at 0) and puts `type` first. */
class EventList {
  readonly events: SseEvent[] = [];
  add(type: string, fields: Record<string, unknown>): void {
    this.events.push({ event: type, data: { type, sequence_number: this.events.length, ...fields } });
  }
}

/** OpenAI pads deltas with a random `obfuscation` string (stream_options.include_obfuscation, on by default); fixed here. */
function obfuscation(delta: string): string {
  return 'x'.repeat(Math.max(1, 16 - delta.length));
}

function messageItem(ids: ResponseIds, text: string, status: 'in_progress' | 'completed' | 'incomplete'): Record<string, unknown> {
  const content = status === 'in_progress' ? [] : [{ type: 'output_text', annotations: [], logprobs: [], text }];
  return { id: ids.message, type: 'message', status, content, role: 'assistant' };
}

/** The events of one assistant message at `outputIndex`; stops after `cutAfterDeltas` deltas when given. */
function addMessage(list: EventList, ids: ResponseIds, outputIndex: number, text: string, opts: { cutAfterDeltas?: number; status?: 'completed' | 'incomplete' } = {}): boolean {
  list.add('response.output_item.added', { output_index: outputIndex, item: messageItem(ids, '', 'in_progress') });
  list.add('response.content_part.added', { item_id: ids.message, output_index: outputIndex, content_index: 0, part: { type: 'output_text', annotations: [], logprobs: [], text: '' } });
  const parts = deltas(text);
  for (let i = 0; i < parts.length; i++) {
    if (opts.cutAfterDeltas !== undefined && i === opts.cutAfterDeltas) return false;
    list.add('response.output_text.delta', { item_id: ids.message, output_index: outputIndex, content_index: 0, delta: parts[i], logprobs: [], obfuscation: obfuscation(parts[i]!) });
  }
  list.add('response.output_text.done', { item_id: ids.message, output_index: outputIndex, content_index: 0, text, logprobs: [] });
  list.add('response.content_part.done', { item_id: ids.message, output_index: outputIndex, content_index: 0, part: { type: 'output_text', annotations: [], logprobs: [], text } });
  list.add('response.output_item.done', { output_index: outputIndex, item: messageItem(ids, text, opts.status ?? 'completed') });
  return true;
}

function start(list: EventList, ids: ResponseIds, model: string, request: Record<string, unknown>): void {
  const initial = responseObject(ids, model, request, { status: 'in_progress', output: [], usage: null });
  list.add('response.created', { response: initial });
  list.add('response.in_progress', { response: initial });
}

export interface TranscriptOptions {
  model: string;
  /** The parsed request body; its parameters are echoed in the response object. */
  request?: Record<string, unknown>;
  ids?: ResponseIds;
}

/** A streamed text answer that completes. */
export function textTranscript(text: string, opts: TranscriptOptions): SseEvent[] {
  const ids = opts.ids ?? FIXED_IDS;
  const request = opts.request ?? {};
  const list = new EventList();
  start(list, ids, opts.model, request);
  addMessage(list, ids, 0, text);
  const output = [messageItem(ids, text, 'completed')];
  list.add('response.completed', { response: responseObject(ids, opts.model, request, { status: 'completed', output, usage: TEXT_USAGE, completedAt: ids.createdAt + 1 }) });
  return list.events;
}

/**
 * A function call, as a reasoning model makes it: a reasoning item (encrypted content, returned
 * because the request asked for `include: ["reasoning.encrypted_content"]`, as Codex does), then
 * the `function_call` item with its arguments streamed as deltas.
 */
export function toolCallTranscript(tool: ShellTool, opts: TranscriptOptions): SseEvent[] {
  const ids = opts.ids ?? FIXED_IDS;
  const request = opts.request ?? {};
  const list = new EventList();
  start(list, ids, opts.model, request);
  const include = Array.isArray(request.include) ? (request.include as string[]) : [];
  const reasoning: Record<string, unknown> = { id: ids.reasoning, type: 'reasoning', summary: [] };
  if (include.includes('reasoning.encrypted_content')) reasoning.encrypted_content = 'gAAAAABe2e-fake-encrypted-reasoning-content==';
  list.add('response.output_item.added', { output_index: 0, item: { id: ids.reasoning, type: 'reasoning', summary: [] } });
  list.add('response.output_item.done', { output_index: 0, item: reasoning });

  const args = JSON.stringify(tool.arguments);
  const call = (status: string, argumentsText: string) => ({ id: ids.functionCall, type: 'function_call', status, arguments: argumentsText, call_id: ids.callId, name: tool.name });
  list.add('response.output_item.added', { output_index: 1, item: call('in_progress', '') });
  for (const d of deltas(args, 10)) list.add('response.function_call_arguments.delta', { item_id: ids.functionCall, output_index: 1, delta: d, obfuscation: obfuscation(d) });
  list.add('response.function_call_arguments.done', { item_id: ids.functionCall, name: tool.name, output_index: 1, arguments: args });
  list.add('response.output_item.done', { output_index: 1, item: call('completed', args) });
  list.add('response.completed', { response: responseObject(ids, opts.model, request, { status: 'completed', output: [reasoning, call('completed', args)], usage: TOOL_USAGE, completedAt: ids.createdAt + 1 }) });
  return list.events;
}

/** Stopped by `max_output_tokens`: the message is `incomplete`, and so is the response (with usage). */
export function incompleteTranscript(text: string, opts: TranscriptOptions): SseEvent[] {
  const ids = opts.ids ?? FIXED_IDS;
  const request = opts.request ?? {};
  const list = new EventList();
  start(list, ids, opts.model, request);
  addMessage(list, ids, 0, text, { status: 'incomplete' });
  const output = [messageItem(ids, text, 'incomplete')];
  list.add('response.incomplete', {
    response: responseObject(ids, opts.model, request, { status: 'incomplete', output, usage: usage(1200, 0, 16, 0), incomplete: { reason: 'max_output_tokens' } }),
  });
  return list.events;
}

/** The model failed after some output: `response.failed` with `response.error`, usage null. */
export function failedTranscript(text: string, opts: TranscriptOptions): SseEvent[] {
  const ids = opts.ids ?? FIXED_IDS;
  const request = opts.request ?? {};
  const list = new EventList();
  start(list, ids, opts.model, request);
  list.add('response.output_item.added', { output_index: 0, item: messageItem(ids, '', 'in_progress') });
  list.add('response.content_part.added', { item_id: ids.message, output_index: 0, content_index: 0, part: { type: 'output_text', annotations: [], logprobs: [], text: '' } });
  const first = deltas(text)[0] ?? '';
  list.add('response.output_text.delta', { item_id: ids.message, output_index: 0, content_index: 0, delta: first, logprobs: [], obfuscation: obfuscation(first) });
  list.add('response.failed', {
    response: responseObject(ids, opts.model, request, {
      status: 'failed',
      output: [],
      usage: null,
      error: { code: 'server_error', message: 'The model produced invalid content. Consider modifying your prompt if you are seeing this error persistently.' },
    }),
  });
  return list.events;
}

/** A stream that ends with an `error` event (no `response` object), as for a rate limit mid-stream. */
export function errorEventTranscript(opts: TranscriptOptions): SseEvent[] {
  const ids = opts.ids ?? FIXED_IDS;
  const list = new EventList();
  start(list, ids, opts.model, opts.request ?? {});
  list.add('error', { code: 'rate_limit_exceeded', message: 'Rate limit reached for requests. Please try again in 20ms.', param: null });
  return list.events;
}

/** A text answer cut after two deltas: no terminal event (the live fake then drops the connection). */
export function cutTranscript(text: string, opts: TranscriptOptions): SseEvent[] {
  const ids = opts.ids ?? FIXED_IDS;
  const list = new EventList();
  start(list, ids, opts.model, opts.request ?? {});
  addMessage(list, ids, 0, text, { cutAfterDeltas: 2 });
  return list.events;
}

/**
 * The bytes of a cut stream: the events of cutTranscript, then the first half of the next one,
 * as when the connection drops in the middle of a write. A reader must not count the half event.
 */
export function cutWire(text: string, opts: TranscriptOptions): string {
  const kept = cutTranscript(text, opts);
  const next = encodeSse([textTranscript(text, opts)[kept.length]!]);
  return encodeSse(kept) + next.slice(0, Math.floor(next.length / 2));
}

/** The wire form: `event: <type>` and one `data:` line of compact JSON, then a blank line. */
export function encodeSse(events: readonly SseEvent[]): string {
  return events.map((e) => `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`).join('');
}

/** The non-streamed answer: the completed response object of a transcript. */
export function jsonBodyOf(events: readonly SseEvent[]): Record<string, unknown> {
  const last = events[events.length - 1]!;
  return (last.data.response as Record<string, unknown>) ?? last.data;
}
