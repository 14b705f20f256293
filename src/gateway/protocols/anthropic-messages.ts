// Anthropic's Messages API (`POST /v1/messages`, and `/v1/messages/count_tokens`): the only
// protocol Claude Code speaks. No translation: its own route, its own auth header (x-api-key,
// set per provider kind), its own usage events and error format.
//
// The stream (https://docs.anthropic.com/en/docs/build-with-claude/streaming): message_start
// carries the model and the input usage (input_tokens, cache_read_input_tokens,
// cache_creation_input_tokens); message_delta carries stop_reason and the cumulative
// output_tokens; message_stop is the clean end; an `error` event (overloaded_error, ...) ends it
// with an error class. Input tokens are known from the start, so an interrupted stream still
// records them, with usage marked incomplete.
//
// Usage is reported in the gateway's terms (those of OpenAI, whose counts nest): input tokens
// include cache reads and cache writes, which Anthropic reports apart; cached tokens are the
// cache reads; cache writes are a token type of their own.
import { ERRORS } from '../../http/errors.ts';
import type { ProxyError } from '../../http/errors.ts';
import { isObject, type JsonObject } from '../../json/keys.ts';
import { mayHaveValue, parseObjectLoose, quotedKey, startsNonEmptyString, startsWithOneOf, tokenCount } from './peek.ts';
import { errorClass, refuse, responseIdOf, type CallSummary, type RequestRefusal, type StreamReader, type WireProtocol } from './protocol.ts';
import type { TokenUsage } from '../../limits/prices.ts';
import { checkContent, refuseStoredState } from './content.ts';
import { checkToolList, refuseHostedTool, refuseUnknownTool, type HostedTool } from './tools.ts';

/**
 * Message roles: user and assistant, as documented, and system, which Claude Code 2.1 sends
 * inside `messages` (recorded: test/fixtures/recorded/claude-code-*.json).
 */
const MESSAGES_ROLES: ReadonlySet<string> = new Set(['user', 'assistant', 'system']);

/**
 * Tool types. A tool without a type (or `custom`) is the client's own, as are Anthropic's
 * client tools (bash, text editor, computer use, memory: the model asks, the client runs them).
 * Server tools run at Anthropic and are hosted tools.
 */
const CLIENT_TOOL = /^(?:custom|bash_\d{8}|text_editor_\d{8}|computer_\d{8}|memory_\d{8})$/;
const SERVER_TOOLS: readonly (readonly [RegExp, HostedTool])[] = [
  [/^web_search_\d{8}$/, 'web_search'],
  [/^web_fetch_\d{8}$/, 'web_fetch'],
  [/^code_execution_\d{8}$/, 'code_execution'],
  [/^tool_search_tool_(?:regex|bm25)(?:_\d{8})?$/, 'tool_search'],
  [/^mcp_toolset$/, 'mcp'],
];

/** The request headers Anthropic's clients send that may go upstream (each seen from Claude Code 2.1). */
const ANTHROPIC_REQUEST_HEADERS: ReadonlySet<string> = new Set(['content-type', 'accept', 'user-agent', 'anthropic-version', 'anthropic-beta', 'x-app', 'x-claude-code-session-id']);

function checkTool(tool: JsonObject, i: number, hostedAllowed: ReadonlySet<string>): RequestRefusal | undefined {
  const type = tool.type;
  if (type === undefined || type === null) return undefined; // a custom tool
  if (typeof type !== 'string') return refuse(ERRORS.invalidTools, `tools[${i}].type`);
  if (CLIENT_TOOL.test(type)) return undefined;
  const hosted = SERVER_TOOLS.find(([pattern]) => pattern.test(type))?.[1];
  if (hosted === undefined) return refuseUnknownTool(type, `tools[${i}].type`, 'custom tools, bash, text_editor, computer, memory');
  return hostedAllowed.has(hosted) ? undefined : refuseHostedTool(type, hosted, `tools[${i}].type`);
}

function checkMessages(messages: unknown): RequestRefusal | undefined {
  if (!Array.isArray(messages)) return refuse(ERRORS.messagesMissing, 'messages');
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    if (!isObject(m) || typeof m.role !== 'string' || !MESSAGES_ROLES.has(m.role)) return refuse(ERRORS.messagesRoleNotAllowed, `messages[${i}].role`);
  }
  return undefined;
}

/**
 * The code-execution container: a fresh one, with Anthropic's own skills at most. One named by
 * id is another run's (its files and state), and a custom skill is code stored under the key.
 */
function checkContainer(container: unknown): RequestRefusal | undefined {
  if (container === undefined || container === null) return undefined;
  if (typeof container === 'string') return refuseStoredState('container', "another run's code-execution container, by id", 'leave "container" out for a fresh one');
  if (!isObject(container)) return undefined;
  if (container.id !== undefined && container.id !== null) return refuseStoredState('container.id', "another run's code-execution container, by id", 'leave the id out for a fresh container');
  const skills = Array.isArray(container.skills) ? container.skills : [];
  for (let i = 0; i < skills.length; i++) {
    const skill: unknown = skills[i];
    if (!isObject(skill) || skill.type !== 'anthropic') return refuseStoredState(`container.skills[${i}]`, 'a skill stored at the provider (only "type": "anthropic" skills are built in)', "use Anthropic's built-in skills only");
  }
  return undefined;
}

function readUsage(usage: unknown): TokenUsage | null {
  if (!isObject(usage)) return null;
  const input = tokenCount(usage.input_tokens);
  const cacheRead = tokenCount(usage.cache_read_input_tokens);
  const cacheWrite = tokenCount(usage.cache_creation_input_tokens);
  return {
    inputTokens: input === null ? null : input + (cacheRead ?? 0) + (cacheWrite ?? 0),
    outputTokens: tokenCount(usage.output_tokens),
    reasoningTokens: null,
    cachedTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
  };
}

/** Later usage (message_delta) refines earlier (message_start): a field it lacks is kept. */
function mergeUsage(earlier: TokenUsage | null, later: TokenUsage | null): TokenUsage | null {
  if (earlier === null || later === null) return later ?? earlier;
  return {
    inputTokens: later.inputTokens ?? earlier.inputTokens,
    outputTokens: later.outputTokens ?? earlier.outputTokens,
    reasoningTokens: null,
    cachedTokens: later.cachedTokens ?? earlier.cachedTokens,
    cacheWriteTokens: later.cacheWriteTokens ?? earlier.cacheWriteTokens,
  };
}

const TYPE_KEY = quotedKey('type');
/** Events worth a parse; content deltas are checked apart, until the first output. */
const IS_TYPE_READ = startsWithOneOf(['message_start', 'message_delta', 'message_stop', 'error'].map((t) => Buffer.from(`"${t}"`)));
const DELTA_TEXT_KEYS = ['text', 'partial_json', 'thinking'].map(quotedKey);
const CONTENT_BLOCK_DELTA = Buffer.from('"content_block_delta"');

class MessagesStreamReader implements StreamReader {
  private usage: TokenUsage | null = null;
  private usageFinal = false;
  private model: string | null = null;
  private id: unknown;
  private stopReason: string | null = null;
  private firstTokenAt: number | null = null;
  private stopped = false;
  private error: string | null = null;

  constructor(private readonly now: () => number) {}

  event(data: Buffer): void {
    const mayBeFirstOutput = this.firstTokenAt === null && data.indexOf(CONTENT_BLOCK_DELTA) !== -1 && DELTA_TEXT_KEYS.some((k) => mayHaveValue(data, k, startsNonEmptyString));
    if (!mayBeFirstOutput && !mayHaveValue(data, TYPE_KEY, IS_TYPE_READ)) return;
    const event = parseObjectLoose(data);
    if (event === null) return;
    switch (event.type) {
      case 'content_block_delta': {
        const delta = event.delta;
        if (this.firstTokenAt === null && isObject(delta) && [delta.text, delta.partial_json, delta.thinking].some((v) => typeof v === 'string' && v !== '')) this.firstTokenAt = this.now();
        break;
      }
      case 'message_start': {
        const message = event.message;
        if (isObject(message)) {
          if (typeof message.model === 'string') this.model = message.model;
          this.id ??= message.id;
          this.usage = mergeUsage(this.usage, readUsage(message.usage));
        }
        break;
      }
      case 'message_delta': {
        const stop = isObject(event.delta) ? event.delta.stop_reason : undefined;
        if (typeof stop === 'string') this.stopReason = stop;
        const usage = readUsage(event.usage);
        if (usage !== null) {
          this.usage = mergeUsage(this.usage, usage);
          this.usageFinal = true;
        }
        break;
      }
      case 'message_stop':
        this.stopped = true;
        break;
      case 'error':
        this.stopped = true;
        this.error = errorClass(isObject(event.error) ? event.error.type : undefined) ?? 'error';
        break;
    }
  }

  /** No Messages event comes near the cap (content arrives as deltas); one that does is skipped. */
  largeEvent(): undefined {
    return undefined;
  }

  summary(): CallSummary {
    return {
      usage: this.usage,
      usageComplete: this.usage !== null && this.usageFinal,
      model: this.model,
      finishReason: this.stopReason,
      firstTokenAt: this.firstTokenAt,
      terminated: this.stopped,
      streamError: this.error,
      ...responseIdOf(this.id),
    };
  }
}

/** Anthropic's error `type` for a status (https://docs.anthropic.com/en/api/errors). */
function anthropicErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 529) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

/** `{"type":"error","error":{"type","message"}}`, as Anthropic answers, so Claude Code shows it. */
export function anthropicErrorBody(error: ProxyError, param: string | null, message: string): string {
  return JSON.stringify({ type: 'error', error: { type: error.type ?? anthropicErrorType(error.status), message: param === null ? message : `${param}: ${message}` } });
}

export const anthropicMessages: WireProtocol = {
  api: 'messages',
  kind: 'anthropic',
  routes: [
    { path: '/v1/messages', upstreamPath: '/v1/messages' },
    // A token count: no generation, no usage to record.
    { path: '/v1/messages/count_tokens', upstreamPath: '/v1/messages/count_tokens', noUsage: true },
  ],

  checkRequest(req, policy) {
    const messages = checkMessages(req.messages) ?? checkContent([['messages', req.messages], ['system', req.system]], policy.hostedTools) ?? checkContainer(req.container);
    if (messages) return messages;
    if (req.stream !== undefined && typeof req.stream !== 'boolean') return refuse(ERRORS.streamNotBoolean, 'stream');
    const tools = checkToolList(req.tools, (tool, i) => checkTool(tool, i, policy.hostedTools));
    if (tools) return tools;
    // The MCP connector: Anthropic connects to each listed server URL, with the token given.
    if (req.mcp_servers !== undefined && req.mcp_servers !== null && !policy.hostedTools.has('mcp')) return refuseHostedTool('mcp_servers', 'mcp', 'mcp_servers');
    return undefined;
  },

  requestHeaders: ANTHROPIC_REQUEST_HEADERS,
  // The Anthropic SDKs describe their runtime in X-Stainless-* headers, as OpenAI's do.
  requestHeaderPrefixes: ['x-stainless-'],
  upstreamRequestIdHeader: 'request-id',
  // 529 is Anthropic's "overloaded": worth another attempt, like a 429.
  retryStatuses: new Set([429, 529]),

  newStreamReader: (now) => new MessagesStreamReader(now),

  summarizeJson(body) {
    const message: JsonObject | null = parseObjectLoose(body);
    const usage = message === null ? null : readUsage(message.usage);
    return {
      usage,
      usageComplete: usage !== null,
      model: typeof message?.model === 'string' ? message.model : null,
      finishReason: typeof message?.stop_reason === 'string' ? message.stop_reason : null,
      firstTokenAt: null,
      terminated: false,
      streamError: null,
      ...responseIdOf(message?.id),
    };
  },

  streamNeedsEndEvent: true,
  errorBody: anthropicErrorBody,
};
