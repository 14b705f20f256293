// A fake of Anthropic's Messages API (`POST /v1/messages`, also with `?beta=true` as Claude Code
// calls it) over HTTPS on loopback, in the style of model-upstream.ts: every request is recorded,
// answers come from a queue of scripted handlers, and by default from the request itself
// (agent-turns.ts: plain text, a Bash tool_use, or the final text after a tool_result),
// streamed when the request says `stream: true`.
//
// The wire format follows Anthropic's documentation, not what would be convenient:
//   - https://platform.claude.com/docs/build-with-claude/streaming (event flow: message_start
//     with an empty content and the input-side usage; content_block_start / content_block_delta
//     (text_delta, input_json_delta) / content_block_stop per block; any number of `ping`;
//     message_delta with stop_reason and cumulative usage; message_stop; an `error` event such as
//     overloaded_error mid-stream; each event named by `event:` and repeated as `type` in data)
//   - https://docs.anthropic.com/en/api/messages (the Message object, `usage` with
//     `input_tokens`, `cache_creation_input_tokens`, `cache_read_input_tokens`, `output_tokens`)
//   - https://docs.anthropic.com/en/api/errors (`{"type":"error","error":{type,message},
//     "request_id"}`, 529 overloaded_error, the `request-id` response header)
//   - https://docs.anthropic.com/en/api/rate-limits (`retry-after`, `anthropic-ratelimit-*`)
//
// The same builders produce the transcripts in test/fixtures/sse/anthropic-*.sse
// (scripts/e2e/write-sse-fixtures.ts).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startHttpsFake, writeStream, type HttpsFake, type ModelHandler, type ModelRequest } from './https-fake.ts';
import { decideTurn, deltas, finalAnswer, PLAIN_ANSWER, textOf, type ShellTool, type Turn } from './agent-turns.ts';
import { encodeSse, type SseEvent } from './responses-upstream.ts';
import type { TestPki } from './tls.ts';

// The wire form is the same in both APIs: one encoder, kept in responses-upstream.ts.
export { encodeSse, type SseEvent } from './responses-upstream.ts';

export interface AnthropicUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  output_tokens: number;
}

export const TEXT_USAGE: AnthropicUsage = { input_tokens: 12, cache_creation_input_tokens: 2048, cache_read_input_tokens: 14336, output_tokens: 15 };
export const TOOL_USAGE: AnthropicUsage = { input_tokens: 14, cache_creation_input_tokens: 512, cache_read_input_tokens: 16384, output_tokens: 58 };

export interface MessageIds {
  message: string;
  toolUse: string;
  request: string;
}

export const FIXED_IDS: MessageIds = {
  message: 'msg_01E2eFakeMessage000000001',
  toolUse: 'toolu_01E2eFakeToolUse0000001',
  request: 'req_011E2eFakeRequest00000001',
};

let counter = 0;
export function freshIds(): MessageIds {
  const n = `${Date.now().toString(36)}${(++counter).toString(36).padStart(4, '0')}`;
  return { message: `msg_01${n}`, toolUse: `toolu_01${n}`, request: `req_011${n}` };
}

export interface TranscriptOptions {
  model: string;
  ids?: MessageIds;
}

function event(type: string, fields: Record<string, unknown> = {}): SseEvent {
  return { event: type, data: { type, ...fields } };
}

/** message_start: the Message with empty content; usage has the input side and output_tokens so far. */
function messageStart(ids: MessageIds, model: string, u: AnthropicUsage): SseEvent {
  return event('message_start', {
    message: {
      id: ids.message,
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: u.input_tokens,
        cache_creation_input_tokens: u.cache_creation_input_tokens,
        cache_read_input_tokens: u.cache_read_input_tokens,
        cache_creation: { ephemeral_5m_input_tokens: u.cache_creation_input_tokens, ephemeral_1h_input_tokens: 0 },
        output_tokens: 1,
        service_tier: 'standard',
      },
    },
  });
}

/** message_delta: stop reason, and usage whose output_tokens is the total so far (cumulative). */
function messageDelta(stopReason: string, u: AnthropicUsage): SseEvent {
  return event('message_delta', {
    delta: { stop_reason: stopReason, stop_sequence: null },
    usage: { input_tokens: u.input_tokens, cache_creation_input_tokens: u.cache_creation_input_tokens, cache_read_input_tokens: u.cache_read_input_tokens, output_tokens: u.output_tokens },
  });
}

function textBlock(events: SseEvent[], index: number, text: string, cutAfterDeltas?: number): boolean {
  events.push(event('content_block_start', { index, content_block: { type: 'text', text: '' } }));
  // Where the documentation's example has it: after the first content_block_start.
  if (index === 0) events.push(event('ping'));
  const parts = deltas(text);
  for (let i = 0; i < parts.length; i++) {
    if (cutAfterDeltas !== undefined && i === cutAfterDeltas) return false;
    events.push(event('content_block_delta', { index, delta: { type: 'text_delta', text: parts[i] } }));
  }
  events.push(event('content_block_stop', { index }));
  return true;
}

export function textTranscript(text: string, opts: TranscriptOptions): SseEvent[] {
  const ids = opts.ids ?? FIXED_IDS;
  const events = [messageStart(ids, opts.model, TEXT_USAGE)];
  textBlock(events, 0, text);
  events.push(messageDelta('end_turn', TEXT_USAGE), event('message_stop'));
  return events;
}

/** A short text block, then the tool_use block whose input arrives as input_json_delta pieces. */
export function toolUseTranscript(tool: ShellTool, opts: TranscriptOptions): SseEvent[] {
  const ids = opts.ids ?? FIXED_IDS;
  const events = [messageStart(ids, opts.model, TOOL_USAGE)];
  textBlock(events, 0, 'I will run the command.');
  events.push(event('content_block_start', { index: 1, content_block: { type: 'tool_use', id: ids.toolUse, name: tool.name, input: {} } }));
  // The first input_json_delta is empty, as the API sends it.
  for (const d of ['', ...deltas(JSON.stringify(tool.arguments), 10)]) events.push(event('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: d } }));
  events.push(event('content_block_stop', { index: 1 }));
  events.push(messageDelta('tool_use', TOOL_USAGE), event('message_stop'));
  return events;
}

/** An `error` event mid-stream (overloaded), after which the API closes the stream. */
export function errorEventTranscript(text: string, opts: TranscriptOptions): SseEvent[] {
  const ids = opts.ids ?? FIXED_IDS;
  const events = [messageStart(ids, opts.model, TEXT_USAGE)];
  textBlock(events, 0, text, 1);
  events.push(event('error', { error: { type: 'overloaded_error', message: 'Overloaded' }, request_id: ids.request }));
  return events;
}

/** A text answer cut after two deltas: no message_delta, no message_stop. */
export function cutTranscript(text: string, opts: TranscriptOptions): SseEvent[] {
  const ids = opts.ids ?? FIXED_IDS;
  const events = [messageStart(ids, opts.model, TEXT_USAGE)];
  textBlock(events, 0, text, 2);
  return events;
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

/** The non-streamed Message a transcript adds up to. */
export function jsonBodyOf(events: readonly SseEvent[]): Record<string, unknown> {
  const start = structuredClone((events[0]!.data as { message: Record<string, unknown> }).message);
  const blocks: Record<string, unknown>[] = [];
  const partialJson: string[] = [];
  for (const { data } of events) {
    const index = data.index as number;
    if (data.type === 'content_block_start') {
      blocks[index] = { ...(data.content_block as object) };
      partialJson[index] = '';
    } else if (data.type === 'content_block_delta') {
      const delta = data.delta as { type: string; text?: string; partial_json?: string };
      if (delta.type === 'text_delta') blocks[index]!.text = `${String(blocks[index]!.text)}${delta.text}`;
      else partialJson[index] += delta.partial_json ?? '';
    } else if (data.type === 'content_block_stop' && partialJson[index]) {
      blocks[index]!.input = JSON.parse(partialJson[index]!);
    } else if (data.type === 'message_delta') {
      Object.assign(start, data.delta as object);
      start.usage = { ...(start.usage as object), ...(data.usage as object) };
    }
  }
  start.content = blocks;
  return start;
}

/** Response headers as api.anthropic.com sends them (values made up, names and forms real). */
export function anthropicHeaders(contentType: string, requestId: string): Record<string, string> {
  const reset = new Date(Date.now() + 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  const headers: Record<string, string> = { 'content-type': contentType, 'request-id': requestId, 'anthropic-organization-id': '00000000-0000-4000-8000-00000000e2e0' };
  for (const [kind, limit] of [['requests', 4000], ['tokens', 2_000_000], ['input-tokens', 1_600_000], ['output-tokens', 400_000]] as const) {
    headers[`anthropic-ratelimit-${kind}-limit`] = String(limit);
    headers[`anthropic-ratelimit-${kind}-remaining`] = String(limit - 1);
    headers[`anthropic-ratelimit-${kind}-reset`] = reset;
  }
  if (contentType.startsWith('text/event-stream')) headers['cache-control'] = 'no-cache';
  return headers;
}

/** Handler that streams events (or wire bytes from cutWire), `gapMs` apart, optionally dropping the connection at the end. */
export function streamHandler(events: readonly SseEvent[] | string, opts: { gapMs?: number; cut?: boolean; requestId?: string } = {}): ModelHandler {
  return (_req, res) => writeStream(res, anthropicHeaders('text/event-stream; charset=utf-8', opts.requestId ?? FIXED_IDS.request), typeof events === 'string' ? [events] : events.map((e) => encodeSse([e])), opts);
}

/** An HTTP error in Anthropic's format: 529 overloaded_error, 429 rate_limit_error (with retry-after), ... */
export function errorHandler(status: number, type: string, message: string, extraHeaders: Record<string, string> = {}): ModelHandler {
  return (_req, res) => {
    const requestId = freshIds().request;
    const body = JSON.stringify({ type: 'error', error: { type, message }, request_id: requestId });
    res.writeHead(status, { ...anthropicHeaders('application/json', requestId), 'content-length': Buffer.byteLength(body), ...extraHeaders });
    res.end(body);
  };
}

export const overloaded: ModelHandler = errorHandler(529, 'overloaded_error', 'Overloaded');

export interface MessagesRequest {
  model?: string;
  stream?: boolean;
  messages?: { role?: string; content?: unknown }[];
  tools?: { name?: string; type?: string; input_schema?: unknown }[];
}

type Block = { type?: string; text?: string; content?: unknown };

/** What the conversation asks for next (agent-turns.ts), read from a Messages request body. */
export function turnOf(body: MessagesRequest): Turn {
  // Claude Code (2.1.330 with claude-sonnet-5) appends `{"role":"system"}` reminder messages
  // after the tool result: they are not a turn of the conversation.
  const messages = (body.messages ?? []).filter((m) => m.role !== 'system');
  const last = messages[messages.length - 1];
  const lastBlocks: Block[] = Array.isArray(last?.content) ? (last.content as Block[]) : [];
  const toolResults = last?.role === 'user' ? lastBlocks.filter((b) => b.type === 'tool_result') : [];
  // The user's prompt: text blocks of the last user message that is not only tool results.
  const lastUser = [...messages].reverse().find((m) => m.role === 'user' && !(Array.isArray(m.content) && (m.content as Block[]).every((b) => b.type === 'tool_result')));
  const userText = Array.isArray(lastUser?.content) ? (lastUser.content as Block[]).filter((b) => b.type === 'text').map((b) => b.text ?? '').join('\n') : textOf(lastUser?.content);
  return decideTurn({
    lastIsToolResult: toolResults.length > 0,
    toolResult: toolResults.map((b) => textOf(b.content)).join('\n'),
    lastUserText: userText,
    tools: (body.tools ?? []).filter((t) => t.name && t.input_schema).map((t) => ({ name: t.name!, schema: t.input_schema })),
  });
}

/** The transcript the default handler answers a request with. */
export function transcriptFor(body: MessagesRequest, ids: MessageIds = freshIds()): SseEvent[] {
  const turn = turnOf(body);
  const model = body.model ?? 'unknown';
  if (turn.kind === 'tool') return toolUseTranscript(turn.tool, { model, ids });
  return textTranscript(turn.kind === 'final' ? finalAnswer(turn.toolResult) : PLAIN_ANSWER, { model, ids });
}

/** Default behaviour: decide the turn from the request; stream it or answer the Message JSON. */
export function defaultMessages(req: IncomingMessage, res: ServerResponse, recorded: ModelRequest): void {
  const path = recorded.url.split('?')[0];
  if (recorded.method !== 'POST' || (path !== '/v1/messages' && path !== '/v1/messages/count_tokens')) {
    errorHandler(404, 'not_found_error', `${recorded.method} ${path} not found`)(req, res, recorded);
    return;
  }
  let body: MessagesRequest;
  try {
    body = JSON.parse(recorded.body.toString('utf8')) as MessagesRequest;
  } catch {
    errorHandler(400, 'invalid_request_error', 'There was an issue with the format of your request: invalid JSON')(req, res, recorded);
    return;
  }
  if (path === '/v1/messages/count_tokens') {
    const text = JSON.stringify({ input_tokens: Math.ceil(recorded.body.length / 4) });
    res.writeHead(200, { ...anthropicHeaders('application/json', freshIds().request), 'content-length': Buffer.byteLength(text) });
    res.end(text);
    return;
  }
  const ids = freshIds();
  const events = transcriptFor(body, ids);
  if (body.stream) {
    streamHandler(events, { requestId: ids.request })(req, res, recorded);
    return;
  }
  const text = JSON.stringify(jsonBodyOf(events));
  res.writeHead(200, { ...anthropicHeaders('application/json', ids.request), 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export interface AnthropicUpstream extends HttpsFake {
  /** Like ANTHROPIC_BASE_URL: `https://127.0.0.1:<port>` (clients add `/v1/messages`). */
  readonly baseUrl: string;
}

export async function startAnthropicUpstream(pki: Pick<TestPki, 'keyPem' | 'certPem'>, fallback: ModelHandler = defaultMessages): Promise<AnthropicUpstream> {
  const fake = await startHttpsFake(pki, fallback);
  return { ...fake, baseUrl: `https://127.0.0.1:${fake.port}` };
}
