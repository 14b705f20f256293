// The upstreams of the e2e run: one fake OpenAI origin serving both of its protocols (Codex's
// Responses API and opencode's chat completions share a provider, as they would share
// api.openai.com), and one fake Anthropic origin. Both HTTPS with the throwaway CA.
import type { ModelHandler, ModelRequest } from '../../test/support/model-upstream.ts';
import { startHttpsFake, type HttpsFake } from '../../test/support/https-fake.ts';
import { defaultResponses, errorHandler, turnOf as responsesTurn, type ResponsesRequest } from '../../test/support/responses-upstream.ts';
import { defaultMessages, startAnthropicUpstream, turnOf as messagesTurn, type AnthropicUpstream, type MessagesRequest } from '../../test/support/anthropic-upstream.ts';
import { serveResponsesSocket } from '../../test/support/responses-socket-upstream.ts';
import { agentChatTurn, turnOf as chatTurn, type ChatRequest } from '../../test/support/chat-turns.ts';
import type { Turn } from '../../test/support/agent-turns.ts';
import type { TestPki } from '../../test/support/tls.ts';
import type { Protocol } from './agents/types.ts';

const openaiRoutes: ModelHandler = (req, res, recorded) => {
  const path = recorded.url.split('?')[0];
  if (path === '/v1/responses') return defaultResponses(req, res, recorded);
  if (path === '/v1/chat/completions') return agentChatTurn(req, res, recorded);
  errorHandler(404, { message: `Invalid URL (${recorded.method} ${recorded.url})`, type: 'invalid_request_error', code: null })(req, res, recorded);
};

/** What each fake answers when nothing is scripted (a scripted handler may wrap it). */
export const DEFAULT_ANSWER: Record<'openai' | 'anthropic', ModelHandler> = { openai: openaiRoutes, anthropic: defaultMessages };

export interface Fakes {
  openai: HttpsFake & { baseUrl: string; origin: string };
  anthropic: AnthropicUpstream;
  close(): Promise<void>;
}

export async function startFakes(pki: TestPki): Promise<Fakes> {
  const openai = await startHttpsFake(pki, openaiRoutes);
  // WebSocket mode on /v1/responses, as api.openai.com serves it: each response.create is
  // recorded beside the HTTP requests (method WS), with its connection's upgrade headers.
  serveResponsesSocket(openai.server, openai.requests);
  const anthropic = await startAnthropicUpstream(pki);
  const origin = `https://127.0.0.1:${openai.port}`;
  return {
    openai: { ...openai, origin, baseUrl: `${origin}/v1` },
    anthropic,
    close: async () => void (await Promise.all([openai.close(), anthropic.close()])),
  };
}

/** What the fake answered a recorded request with (the same decision it made then). */
export function turnOfRequest(protocol: Protocol, request: ModelRequest): Turn | undefined {
  let body: unknown;
  try {
    body = JSON.parse(request.body.toString('utf8'));
  } catch {
    return undefined;
  }
  return turnOfBody(protocol, body);
}

export function turnOfBody(protocol: Protocol, body: unknown): Turn {
  if (protocol === 'responses') return responsesTurn(body as ResponsesRequest);
  if (protocol === 'chat-completions') return chatTurn(body as ChatRequest);
  return messagesTurn(body as MessagesRequest);
}
