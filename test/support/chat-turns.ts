// The agent-facing default of the chat-completions fake (model-upstream.ts) for npm run
// e2e:agents: the same conversation script as the other protocols (agent-turns.ts), in chat
// completions' own shapes: a text stream, or a `tool_calls` delta whose arguments arrive in
// pieces, ending with finish_reason `tool_calls`; the usage chunk when asked
// (stream_options.include_usage); `data: [DONE]` last.
// Format: https://platform.openai.com/docs/api-reference/chat-streaming (the chunk object) and
// https://platform.openai.com/docs/guides/function-calling (streamed tool_calls by index).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { decideTurn, deltas, finalAnswer, PLAIN_ANSWER, textOf, type Turn } from './agent-turns.ts';
import { chunk, sseEvent, USAGE, type ModelRequest } from './model-upstream.ts';
import { openaiHeaders } from './responses-upstream.ts';

export interface ChatRequest {
  model?: string;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  messages?: { role?: string; content?: unknown; tool_call_id?: string }[];
  tools?: { type?: string; function?: { name?: string; parameters?: unknown } }[];
}

let calls = 0;

/** What the conversation asks for next (agent-turns.ts), read from a chat-completions request body. */
export function turnOf(body: ChatRequest): Turn {
  const messages = body.messages ?? [];
  const last = messages[messages.length - 1];
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  return decideTurn({
    lastIsToolResult: last?.role === 'tool',
    toolResult: textOf(last?.content),
    lastUserText: textOf(lastUser?.content),
    tools: (body.tools ?? []).filter((t) => t.type === 'function' && t.function?.name).map((t) => ({ name: t.function!.name!, schema: t.function!.parameters })),
  });
}

/** The chat-completion answer for an agent's request, as stream events (without [DONE]) and as the JSON body. */
export function chatAnswer(body: ChatRequest): { events: unknown[]; json: Record<string, unknown> } {
  const model = body.model ?? 'unknown';
  const turn = turnOf(body);
  const events: unknown[] = [chunk(model, { role: 'assistant', content: '' })];
  if (turn.kind === 'tool') {
    const id = `call_e2e${(++calls).toString().padStart(4, '0')}`;
    const args = JSON.stringify(turn.tool.arguments);
    events.push(chunk(model, { tool_calls: [{ index: 0, id, type: 'function', function: { name: turn.tool.name, arguments: '' } }] }));
    for (const d of deltas(args, 10)) events.push(chunk(model, { tool_calls: [{ index: 0, function: { arguments: d } }] }));
    events.push(chunk(model, {}, 'tool_calls'));
    const message = { role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: turn.tool.name, arguments: args } }] };
    return { events, json: completion(model, message, 'tool_calls') };
  }
  const text = turn.kind === 'final' ? finalAnswer(turn.toolResult) : PLAIN_ANSWER;
  for (const d of deltas(text)) events.push(chunk(model, { content: d }));
  events.push(chunk(model, {}, 'stop'));
  return { events, json: completion(model, { role: 'assistant', content: text }, 'stop') };
}

function completion(model: string, message: unknown, finish: string): Record<string, unknown> {
  return { id: 'chatcmpl-e2e', object: 'chat.completion', created: Math.floor(Date.now() / 1000), model, choices: [{ index: 0, message, finish_reason: finish }], usage: USAGE };
}

/** Pass to startModelUpstream as its fallback handler. */
export function agentChatTurn(_req: IncomingMessage, res: ServerResponse, recorded: ModelRequest): void {
  const body = JSON.parse(recorded.body.toString('utf8')) as ChatRequest;
  const { events, json } = chatAnswer(body);
  if (!body.stream) {
    const text = JSON.stringify(json);
    res.writeHead(200, { ...openaiHeaders('application/json'), 'content-length': Buffer.byteLength(text) });
    res.end(text);
    return;
  }
  res.writeHead(200, openaiHeaders('text/event-stream; charset=utf-8'));
  for (const e of events) res.write(sseEvent(e));
  if (body.stream_options?.include_usage) res.write(sseEvent({ id: 'chatcmpl-test', object: 'chat.completion.chunk', created: 1, model: body.model, choices: [], usage: USAGE }));
  res.end(sseEvent('[DONE]'));
}
