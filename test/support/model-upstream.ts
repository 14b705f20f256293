// A fake OpenAI-compatible upstream over HTTPS on loopback. Each request is recorded; the answer
// comes from a queue of scripted handlers, or by default a completion (streamed when asked)
// with a usage block. Used by the gateway tests and the demo.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startHttpsFake, type HttpsFake, type ModelHandler, type ModelRequest } from './https-fake.ts';
import type { TestPki } from './tls.ts';

export type { ModelHandler, ModelRequest } from './https-fake.ts';

export interface ModelUpstream extends HttpsFake {
  readonly baseUrl: string;
}

export const USAGE = {
  prompt_tokens: 42,
  completion_tokens: 7,
  total_tokens: 49,
  prompt_tokens_details: { cached_tokens: 10 },
  completion_tokens_details: { reasoning_tokens: 3 },
};

export const STREAM_WORDS = ['Hello', ' from', ' the', ' fake', ' upstream', '.'];

export function completionJson(model: string): string {
  return JSON.stringify({
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the fake upstream.' }, finish_reason: 'stop' }],
    usage: USAGE,
  });
}

export function sseEvent(obj: unknown): string {
  return `data: ${typeof obj === 'string' ? obj : JSON.stringify(obj)}\n\n`;
}

export function chunk(model: string, delta: Record<string, unknown>, finish: string | null = null): unknown {
  return { id: 'chatcmpl-test', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta, finish_reason: finish }] };
}

/** The events of a complete stream, as separate strings (so tests can pace them). */
export function streamEvents(model: string, includeUsage: boolean): string[] {
  const events = [sseEvent(chunk(model, { role: 'assistant', content: '' }))];
  for (const w of STREAM_WORDS) events.push(sseEvent(chunk(model, { content: w })));
  events.push(sseEvent(chunk(model, {}, 'stop')));
  if (includeUsage) events.push(sseEvent({ id: 'chatcmpl-test', object: 'chat.completion.chunk', created: 1, model, choices: [], usage: USAGE }));
  events.push(sseEvent('[DONE]'));
  return events;
}

/** Default behaviour: a plain completion, or an immediate stream, as the request asks. */
export function defaultCompletion(_req: IncomingMessage, res: ServerResponse, recorded: ModelRequest): void {
  const body = JSON.parse(recorded.body.toString()) as { model: string; stream?: boolean; stream_options?: { include_usage?: boolean } };
  if (body.stream) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': 'req_upstream_1' });
    for (const e of streamEvents(body.model, body.stream_options?.include_usage === true)) res.write(e);
    res.end();
    return;
  }
  const text = completionJson(body.model);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'x-request-id': 'req_upstream_1' });
  res.end(text);
}

export async function startModelUpstream(pki: Pick<TestPki, 'keyPem' | 'certPem'>, basePath = '/v1', fallback: ModelHandler = defaultCompletion): Promise<ModelUpstream> {
  const fake = await startHttpsFake(pki, fallback);
  return { ...fake, baseUrl: `https://127.0.0.1:${fake.port}${basePath}` };
}
