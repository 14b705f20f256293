// OpenAI chat completions (`POST /v1/chat/completions`): what opencode and most OpenAI-compatible
// clients speak. The request's `model`, `messages` roles, `stream` and `tools` are checked; usage,
// model, finish reason and the first output are read from the answer.
import { ERRORS } from '../../http/errors.ts';
import { isObject, type JsonObject } from '../../json/keys.ts';
import { mayHaveValue, parseObjectLoose, quotedKey, startsNonEmptyArray, startsNonEmptyString, startsObject, startsString, tokenCount } from './peek.ts';
import { checkToolType, OPENAI_REQUEST_HEADER_PREFIXES, OPENAI_REQUEST_HEADERS, OPENAI_RETRY_STATUSES, openAiErrorBody } from './openai.ts';
import { refuse, responseIdOf, type CallSummary, type StreamReader, type WireProtocol } from './protocol.ts';
import type { TokenUsage } from '../../limits/prices.ts';
import { checkContent, checkStore } from './content.ts';
import { checkToolList, refuseHostedTool } from './tools.ts';

const CHAT_ROLES: ReadonlySet<string> = new Set(['system', 'developer', 'user', 'assistant', 'tool']);
/** Chat tools the client runs itself: its own functions, and free-form custom tools. */
const CLIENT_TOOLS: ReadonlySet<string> = new Set(['function', 'custom']);

/** Delta fields whose non-empty string value is model output (reasoning is OpenRouter's name). */
const OUTPUT_TEXT_FIELDS = ['content', 'reasoning_content', 'reasoning', 'refusal'] as const;
const USAGE_KEY = quotedKey('usage');
const MODEL_KEY = quotedKey('model');
const FINISH_REASON_KEY = quotedKey('finish_reason');
const TOOL_CALLS_KEY = quotedKey('tool_calls');
const OUTPUT_TEXT_KEYS = OUTPUT_TEXT_FIELDS.map(quotedKey);
const DONE_DATA = Buffer.from('[DONE]');

function readUsage(response: JsonObject): TokenUsage | null {
  const usage = response.usage;
  if (!isObject(usage)) return null;
  return {
    inputTokens: tokenCount(usage.prompt_tokens),
    outputTokens: tokenCount(usage.completion_tokens),
    reasoningTokens: tokenCount(isObject(usage.completion_tokens_details) ? usage.completion_tokens_details.reasoning_tokens : undefined),
    cachedTokens: tokenCount(isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details.cached_tokens : undefined),
    cacheWriteTokens: null,
  };
}

function readModel(response: JsonObject): string | null {
  return typeof response.model === 'string' ? response.model : null;
}

function readFinishReason(response: JsonObject): string | null {
  const firstChoice: unknown = Array.isArray(response.choices) ? response.choices[0] : undefined;
  const finishReason = isObject(firstChoice) ? firstChoice.finish_reason : undefined;
  return typeof finishReason === 'string' ? finishReason : null;
}

function carriesOutput(chunk: JsonObject): boolean {
  if (!Array.isArray(chunk.choices)) return false;
  return chunk.choices.some((choice: unknown) => {
    const delta = isObject(choice) ? choice.delta : undefined;
    if (!isObject(delta)) return false;
    const toolCalls = delta.tool_calls;
    return OUTPUT_TEXT_FIELDS.some((field) => typeof delta[field] === 'string' && delta[field] !== '') || (Array.isArray(toolCalls) && toolCalls.length > 0);
  });
}

/**
 * Reads `chat.completion.chunk` events. An event is JSON.parsed only when a byte-level check says
 * it may carry something still needed: usage, a finish reason, the model (until known) or the
 * first output. Every chunk repeats the model, so it is parsed for that only once.
 */
class ChatStreamReader implements StreamReader {
  private usage: TokenUsage | null = null;
  private model: string | null = null;
  private finishReason: string | null = null;
  private firstTokenAt: number | null = null;
  private done = false;
  private id: unknown;

  constructor(private readonly now: () => number) {}

  event(data: Buffer): void {
    if (data.equals(DONE_DATA)) {
      this.done = true;
      return;
    }
    const mayHaveUsage = mayHaveValue(data, USAGE_KEY, startsObject);
    const mayHaveFinishReason = mayHaveValue(data, FINISH_REASON_KEY, startsString);
    const mayHaveNeededModel = this.model === null && mayHaveValue(data, MODEL_KEY, startsString);
    const mayHaveFirstOutput =
      this.firstTokenAt === null && (OUTPUT_TEXT_KEYS.some((key) => mayHaveValue(data, key, startsNonEmptyString)) || mayHaveValue(data, TOOL_CALLS_KEY, startsNonEmptyArray));
    if (!mayHaveUsage && !mayHaveFinishReason && !mayHaveNeededModel && !mayHaveFirstOutput) return;

    const chunk = parseObjectLoose(data);
    if (chunk === null) return;
    this.usage = readUsage(chunk) ?? this.usage;
    this.model = readModel(chunk) ?? this.model;
    this.id ??= chunk.id;
    this.finishReason = readFinishReason(chunk) ?? this.finishReason;
    if (mayHaveFirstOutput && carriesOutput(chunk)) this.firstTokenAt = this.now();
  }

  /** A chat chunk is small; one over the cap is no chunk any server sends, and is skipped. */
  largeEvent(): undefined {
    return undefined;
  }

  summary(): CallSummary {
    return { usage: this.usage, usageComplete: this.usage !== null, model: this.model, finishReason: this.finishReason, firstTokenAt: this.firstTokenAt, terminated: this.done, streamError: null, ...responseIdOf(this.id) };
  }
}

export const chatCompletions: WireProtocol = {
  api: 'chat_completions',
  kind: 'openai',
  routes: [{ path: '/v1/chat/completions', upstreamPath: '/chat/completions' }],

  checkRequest(req, policy) {
    if (!Array.isArray(req.messages)) return refuse(ERRORS.messagesMissing, 'messages');
    for (let i = 0; i < req.messages.length; i++) {
      const m = req.messages[i] as { role?: unknown } | null;
      if (typeof m !== 'object' || m === null || typeof m.role !== 'string' || !CHAT_ROLES.has(m.role)) return refuse(ERRORS.roleNotAllowed, `messages[${i}].role`);
    }
    if (req.stream !== undefined && typeof req.stream !== 'boolean') return refuse(ERRORS.streamNotBoolean, 'stream');
    const stored = checkStore(req.store) ?? checkContent([['messages', req.messages]], policy.hostedTools);
    if (stored) return stored;
    const tools = checkToolList(req.tools, (tool, i) => checkToolType(tool.type, CLIENT_TOOLS, policy.hostedTools, `tools[${i}]`));
    if (tools) return tools;
    // Chat's own hosted search (search-preview models) is the same egress as the web_search tool.
    if (req.web_search_options !== undefined && req.web_search_options !== null && !policy.hostedTools.has('web_search')) return refuseHostedTool('web_search', 'web_search', 'web_search_options');
    return undefined;
  },

  requestHeaders: OPENAI_REQUEST_HEADERS,
  requestHeaderPrefixes: OPENAI_REQUEST_HEADER_PREFIXES,
  upstreamRequestIdHeader: 'x-request-id',
  retryStatuses: OPENAI_RETRY_STATUSES,

  newStreamReader: (now) => new ChatStreamReader(now),

  summarizeJson(body) {
    const response = parseObjectLoose(body);
    const usage = response === null ? null : readUsage(response);
    return {
      usage,
      usageComplete: usage !== null,
      model: response === null ? null : readModel(response),
      finishReason: response === null ? null : readFinishReason(response),
      firstTokenAt: null,
      terminated: false,
      streamError: null,
      ...responseIdOf(response?.id),
    };
  },

  // OpenAI ends every stream with `data: [DONE]`, but OpenAI-compatible servers differ (and
  // the SDKs accept a stream without it): the end of the HTTP body ends a chat stream.
  streamNeedsEndEvent: false,
  errorBody: openAiErrorBody,
};
