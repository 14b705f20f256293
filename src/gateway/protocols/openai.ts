// What the OpenAI-style protocols (chat completions, responses) share: the error format, the
// request headers OpenAI's clients send that may go upstream, and the tool policy.
import type { ProxyError } from '../../http/errors.ts';
import { ERRORS } from '../../http/errors.ts';
import { refuse, type RequestRefusal } from './protocol.ts';
import { refuseHostedTool, refuseUnknownTool, type HostedTool } from './tools.ts';

/** OpenAI's error `type` for a status, so SDKs classify gateway errors as they do upstream ones. */
export function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** `{"error":{"message","type","code","param"}}`, as OpenAI answers. */
export function openAiErrorBody(error: ProxyError, param: string | null, message: string): string {
  return JSON.stringify({ error: openAiError(error, param, message) });
}

/** The error object itself, `{"message","type","code","param"}`: an HTTP answer's, and a WebSocket error event's (socket-turn.ts). */
export function openAiError(error: ProxyError, param: string | null, message: string): { message: string; type: string; code: string; param: string | null } {
  return { message, type: error.type ?? openAiErrorType(error.status), code: error.code, param };
}

/**
 * Client headers that go upstream on the OpenAI routes, beside the ones the gateway sets itself
 * (Host, Authorization, Content-Length, Accept-Encoding, X-Client-Request-Id). An allowlist, so
 * that a header nobody thought of (a second credential, a billing selector) stays here. Each
 * was seen from a real client (test/fixtures/recorded/) or is the OpenAI SDKs' own, and carries
 * no credential and no account choice:
 * - every HTTP client: Content-Type, Accept, User-Agent;
 * - the OpenAI SDKs: OpenAI-Beta (feature opt-ins), Idempotency-Key, X-Stainless-* (the SDK's
 *   name, version, runtime, retry count and timeout);
 * - Codex 0.169: Originator, Session-Id, Thread-Id, X-Codex-Turn-Metadata, X-Codex-Window-Id,
 *   X-Codex-Beta-Features;
 * - opencode 1.18: Originator, Session-Id, X-Session-Id, X-Session-Affinity (cache affinity).
 */
export const OPENAI_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'content-type',
  'accept',
  'user-agent',
  'openai-beta',
  'idempotency-key',
  'originator',
  'session-id',
  'thread-id',
  'x-session-id',
  'x-session-affinity',
]);
/** OpenAI's rate limit; anything else is the upstream's answer to relay. */
export const OPENAI_RETRY_STATUSES: ReadonlySet<number> = new Set([429]);

export const OPENAI_REQUEST_HEADER_PREFIXES: readonly string[] = ['x-stainless-', 'x-codex-'];

/**
 * OpenAI tool types the provider runs on its own side, and their names for
 * --allow-hosted-tools (./tools.ts says why each is egress); the dated variants of a tool count
 * as the tool.
 */
const HOSTED_TOOLS: ReadonlyMap<string, HostedTool> = new Map([
  ['web_search', 'web_search'],
  ['web_search_preview', 'web_search'],
  ['web_search_preview_2025_03_11', 'web_search'],
  ['web_search_2025_08_26', 'web_search'],
  ['file_search', 'file_search'],
  ['code_interpreter', 'code_interpreter'],
  ['image_generation', 'image_generation'],
  ['mcp', 'mcp'],
  // Tool search run by the provider (Codex runs its own: execution "client", see responses.ts).
  ['tool_search', 'tool_search'],
]);

/**
 * Checks one `tools` entry (or a `tool_choice` object) against the policy: a client-executed
 * type passes, a hosted one only when allowed, an unknown type never. `where` names it in the
 * message (e.g. `tools[2]`).
 */
export function checkToolType(type: unknown, clientTypes: ReadonlySet<string>, hostedAllowed: ReadonlySet<string>, where: string): RequestRefusal | undefined {
  if (typeof type !== 'string') return refuse(ERRORS.invalidTools, `${where}.type`);
  if (clientTypes.has(type)) return undefined;
  const hosted = HOSTED_TOOLS.get(type);
  if (hosted !== undefined) return hostedAllowed.has(hosted) ? undefined : refuseHostedTool(type, hosted, `${where}.type`);
  return refuseUnknownTool(type, `${where}.type`, [...clientTypes].join(', '));
}
