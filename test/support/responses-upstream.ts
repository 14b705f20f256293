// A fake of OpenAI's Responses API (`POST /v1/responses`) over HTTPS on loopback, in the style of
// model-upstream.ts: every request is recorded, answers come from a queue of scripted handlers,
// and by default from the request itself (agent-turns.ts: plain text, a shell tool call, or the
// final text after a tool result), streamed when the request says `stream: true`. The events it
// streams, and the wire format they follow, are responses-transcripts.ts's.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startHttpsFake, writeStream, type HttpsFake, type ModelHandler, type ModelRequest } from './https-fake.ts';
import { decideTurn, finalAnswer, PLAIN_ANSWER, textOf, type Turn } from './agent-turns.ts';
import { encodeSse, freshIds, jsonBodyOf, textTranscript, toolCallTranscript, type ResponseIds, type SseEvent } from './responses-transcripts.ts';
import type { TestPki } from './tls.ts';

// The transcripts this fake streams are built in responses-transcripts.ts (pure, for unit tests);
// the integration tests and the bench take those they stream from here.
export { cutTranscript, encodeSse, jsonBodyOf, textTranscript, type SseEvent } from './responses-transcripts.ts';

/** Response headers as api.openai.com sends them (values made up, names and forms real). */
export function openaiHeaders(contentType: string): Record<string, string> {
  return {
    'content-type': contentType,
    'x-request-id': `req_${Math.random().toString(16).slice(2).padEnd(32, '0')}`,
    'openai-version': '2020-10-01',
    'openai-organization': 'user-e2efakeorganization',
    'openai-project': 'proj_e2efakeproject',
    'openai-processing-ms': '42',
    'x-ratelimit-limit-requests': '10000',
    'x-ratelimit-remaining-requests': '9999',
    'x-ratelimit-reset-requests': '6ms',
    'x-ratelimit-limit-tokens': '30000000',
    'x-ratelimit-remaining-tokens': '29998000',
    'x-ratelimit-reset-tokens': '4ms',
  };
}

/** Handler that streams events (or wire bytes from cutWire), `gapMs` apart (0: all at once), optionally dropping the connection at the end. */
export function streamHandler(events: readonly SseEvent[] | string, opts: { gapMs?: number; cut?: boolean } = {}): ModelHandler {
  return (_req, res) => writeStream(res, openaiHeaders('text/event-stream; charset=utf-8'), typeof events === 'string' ? [events] : events.map((e) => encodeSse([e])), opts);
}

/** Handler that answers an HTTP error in OpenAI's format, e.g. 429 with `retry-after`. */
export function errorHandler(status: number, error: { message: string; type: string; code: string | null; param?: string | null }, extraHeaders: Record<string, string> = {}): ModelHandler {
  return (_req, res) => {
    const body = JSON.stringify({ error: { message: error.message, type: error.type, param: error.param ?? null, code: error.code } }, null, 2);
    res.writeHead(status, { ...openaiHeaders('application/json'), 'content-length': Buffer.byteLength(body), ...extraHeaders });
    res.end(body);
  };
}

export interface ResponsesRequest {
  model?: string;
  stream?: boolean;
  input?: unknown;
  tools?: { type?: string; name?: string; parameters?: unknown; tools?: { type?: string; name?: string; parameters?: unknown }[] }[];
}

/** Tool outputs the client runs itself and returns as input items. */
const TOOL_OUTPUT_TYPES = new Set(['function_call_output', 'custom_tool_call_output', 'local_shell_call_output']);

/** Function tools the agent offered, including those inside a `namespace` tool. */
function offeredTools(body: ResponsesRequest): { name: string; schema: unknown }[] {
  const out: { name: string; schema: unknown }[] = [];
  for (const t of body.tools ?? []) {
    if (t.type === 'function' && t.name) out.push({ name: t.name, schema: t.parameters });
    if (t.type === 'namespace') for (const inner of t.tools ?? []) if (inner.type === 'function' && inner.name) out.push({ name: inner.name, schema: inner.parameters });
  }
  return out;
}

/** What the conversation asks for next (agent-turns.ts), read from a Responses request body. */
export function turnOf(body: ResponsesRequest): Turn {
  const items = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : Array.isArray(body.input) ? (body.input as Record<string, unknown>[]) : [];
  const last = items[items.length - 1];
  const lastUser = [...items].reverse().find((i) => i.role === 'user' && (i.type === undefined || i.type === 'message'));
  return decideTurn({
    lastIsToolResult: TOOL_OUTPUT_TYPES.has(String(last?.type)),
    toolResult: typeof last?.output === 'string' ? last.output : textOf(last?.output),
    lastUserText: textOf(lastUser?.content),
    tools: offeredTools(body),
  });
}

/** The transcript the default handler answers a request with. */
export function transcriptFor(body: ResponsesRequest & Record<string, unknown>, ids: ResponseIds = freshIds()): SseEvent[] {
  const turn = turnOf(body);
  const opts = { model: body.model ?? 'unknown', request: body, ids };
  if (turn.kind === 'tool') return toolCallTranscript(turn.tool, opts);
  return textTranscript(turn.kind === 'final' ? finalAnswer(turn.toolResult) : PLAIN_ANSWER, opts);
}

/** Default behaviour: decide the turn from the request; stream it or answer the JSON response object. */
export function defaultResponses(_req: IncomingMessage, res: ServerResponse, recorded: ModelRequest): void {
  let body: ResponsesRequest & Record<string, unknown>;
  try {
    body = JSON.parse(recorded.body.toString('utf8')) as ResponsesRequest & Record<string, unknown>;
  } catch {
    errorHandler(400, { message: 'We could not parse the JSON body of your request.', type: 'invalid_request_error', code: null })(_req, res, recorded);
    return;
  }
  if (recorded.method !== 'POST' || !/^\/v1\/responses(\?|$)/.test(recorded.url)) {
    errorHandler(404, { message: `Invalid URL (${recorded.method} ${recorded.url})`, type: 'invalid_request_error', code: null })(_req, res, recorded);
    return;
  }
  const events = transcriptFor(body);
  if (body.stream) {
    streamHandler(events)(_req, res, recorded);
    return;
  }
  const text = JSON.stringify(jsonBodyOf(events));
  res.writeHead(200, { ...openaiHeaders('application/json'), 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export interface ResponsesUpstream extends HttpsFake {
  /** Like an OpenAI SDK baseURL: `https://127.0.0.1:<port>/v1`. */
  readonly baseUrl: string;
}

export async function startResponsesUpstream(pki: Pick<TestPki, 'keyPem' | 'certPem'>, fallback: ModelHandler = defaultResponses): Promise<ResponsesUpstream> {
  const fake = await startHttpsFake(pki, fallback);
  return { ...fake, baseUrl: `https://127.0.0.1:${fake.port}/v1` };
}
