// OpenAI's Responses API (`POST /v1/responses`): the only protocol Codex speaks, and what the
// OpenAI SDK's client.responses.create, the Agents SDK and the AI SDK's OpenAI provider use.
//
// Two things set it apart from chat completions, and both are decided here:
// - Stored state. OpenAI stores responses by default, and anyone holding the key can read or
//   continue them; every bot shares one key. So a request may not point at stored state: no
//   previous_response_id, conversation, stored prompt or background run, and no input item that
//   the provider would have to fetch by id (item_reference; reasoning without its
//   encrypted_content; an item type the gateway does not know that carries an id). Requests
//   that carry their whole history, as Codex does with store:false, pass. The retrieval routes
//   are not routed at all (../route.ts).
// - Hosted tools. A request can ask the provider to run tools on its side (web search, file
//   search, code interpreter, image generation, a hosted shell, MCP servers at any URL): egress
//   no network policy sees. Only tools the client runs itself pass, unless the operator allows
//   a hosted one by name.
//
// The stream: `event: <type>` / `data: {"type": <type>, ...}` events; response.completed,
// response.incomplete and response.failed end it and carry the whole response with its usage
// (response.completed repeats every output item: it can be megabytes, so it is read with
// JsonCapture, never buffered whole). An `error` event also ends it.
import { bounded } from '../../http/log.ts';
import { ERRORS } from '../../http/errors.ts';
import { JsonCapture } from '../json-capture.ts';
import type { LargeEventConsumer } from '../sse.ts';
import { isObject, type JsonObject } from '../../json/keys.ts';
import { mayHaveValue, parseObjectLoose, quotedKey, startsNonEmptyString, startsWithOneOf, tokenCount } from './peek.ts';
import { checkToolType, OPENAI_REQUEST_HEADER_PREFIXES, OPENAI_REQUEST_HEADERS, OPENAI_RETRY_STATUSES, openAiErrorBody } from './openai.ts';
import { checkContent, checkStore, refuseStoredState } from './content.ts';
import { checkToolList, refuseHostedTool } from './tools.ts';
import { errorClass, refuse, responseIdOf, type CallSummary, type RequestRefusal, type StreamReader, type WireProtocol } from './protocol.ts';
import type { TokenUsage } from '../../limits/prices.ts';

const RESPONSES_ROLES: ReadonlySet<string> = new Set(['system', 'developer', 'user', 'assistant']);

/**
 * Tool types the client executes itself: the model only asks, the client runs the call and
 * sends the output back. `namespace` groups functions (Codex); `shell` is client-run only with
 * a local environment (see isHostedShell).
 */
const RESPONSES_CLIENT_TOOLS: ReadonlySet<string> = new Set(['function', 'custom', 'namespace', 'local_shell', 'shell', 'apply_patch', 'computer', 'computer_use_preview']);

/**
 * For each input item type the gateway knows, the field that holds its content. An item with an
 * `id` must carry that field: otherwise the provider would fill it from storage, where another
 * bot's items live. Reasoning content is `encrypted_content`, which stateless clients ask for.
 */
const SELF_CONTAINED: ReadonlyMap<string, string> = new Map([
  ['message', 'content'],
  ['function_call', 'arguments'],
  ['function_call_output', 'output'],
  ['custom_tool_call', 'input'],
  ['custom_tool_call_output', 'output'],
  ['reasoning', 'encrypted_content'],
  ['compaction', 'encrypted_content'],
  ['local_shell_call', 'action'],
  ['local_shell_call_output', 'output'],
  ['shell_call', 'action'],
  ['shell_call_output', 'output'],
  ['apply_patch_call', 'operation'],
  ['apply_patch_call_output', 'output'],
  ['computer_call', 'action'],
  ['computer_call_output', 'output'],
]);

/** Request fields that point at state stored at the provider, and why each is refused. */
const STORED_STATE_FIELDS: readonly (readonly [string, string])[] = [
  ['previous_response_id', 'continues a response stored at the provider'],
  ['conversation', 'continues a conversation stored at the provider'],
  ['prompt', 'uses a prompt template stored at the provider'],
];
const WHOLE_HISTORY = 'send the whole conversation in "input" instead (with "store": false, as Codex does)';

/** A `shell` tool with a container environment runs at the provider: hosted. */
function isHostedShell(tool: JsonObject): boolean {
  const environment = tool.environment;
  return environment !== undefined && environment !== null && !(isObject(environment) && environment.type === 'local');
}

function checkResponsesTool(tool: JsonObject, where: string, hostedAllowed: ReadonlySet<string>): RequestRefusal | undefined {
  // Codex searches its own deferred tools: a tool_search it executes itself is a client tool.
  if (tool.type === 'tool_search' && tool.execution === 'client') return undefined;
  if (tool.type === 'shell' && isHostedShell(tool) && !hostedAllowed.has('shell')) return refuseHostedTool('shell', 'shell', `${where}.environment`);
  const refusal = checkToolType(tool.type, RESPONSES_CLIENT_TOOLS, hostedAllowed, where);
  if (refusal) return refusal;
  // A namespace groups tools: each is checked as if it were listed at the top.
  if (tool.type === 'namespace') return checkToolList(tool.tools, (inner, j) => checkResponsesTool(inner, `${where}.tools[${j}]`, hostedAllowed));
  // An allowed code interpreter may start a fresh container, never enter another run's.
  const container = tool.container;
  if (typeof container === 'string') return refuseStoredState(`${where}.container`, "another run's code-interpreter container, by id", 'send "container": {"type": "auto"} for a fresh one');
  return checkContent([[`${where}.container`, container]], hostedAllowed);
}

function checkInput(input: unknown): RequestRefusal | undefined {
  if (typeof input === 'string') return undefined;
  if (!Array.isArray(input)) return refuse(ERRORS.inputMissing, 'input');
  for (let i = 0; i < input.length; i++) {
    const item: unknown = input[i];
    if (!isObject(item)) return refuse(ERRORS.invalidInputItem, `input[${i}]`);
    // A message may leave out its type (the SDKs' "easy input message").
    const type = item.type === undefined && item.role !== undefined ? 'message' : item.type;
    if (typeof type !== 'string') return refuse(ERRORS.invalidInputItem, `input[${i}].type`);
    if (type === 'item_reference') {
      return refuse(ERRORS.storedStateRefused, `input[${i}]`, `input[${i}] is an item_reference, which reads an item stored at the provider; ${WHOLE_HISTORY}`);
    }
    if (type === 'message' && (typeof item.role !== 'string' || !RESPONSES_ROLES.has(item.role))) return refuse(ERRORS.responsesRoleNotAllowed, `input[${i}].role`);
    if (item.id !== undefined && item.id !== null) {
      const content = SELF_CONTAINED.get(type);
      if (content === undefined || item[content] === undefined || item[content] === null) {
        return refuse(
          ERRORS.storedStateRefused,
          `input[${i}].id`,
          `input[${i}] (type "${bounded(type)}") has an id but not its ${content === undefined ? 'content' : `"${content}"`}, so the provider would read it from storage; include the item's content or leave out its id`,
        );
      }
    }
  }
  return undefined;
}

function readUsage(usage: unknown): TokenUsage | null {
  if (!isObject(usage)) return null;
  return {
    inputTokens: tokenCount(usage.input_tokens),
    outputTokens: tokenCount(usage.output_tokens),
    reasoningTokens: tokenCount(isObject(usage.output_tokens_details) ? usage.output_tokens_details.reasoning_tokens : undefined),
    cachedTokens: tokenCount(isObject(usage.input_tokens_details) ? usage.input_tokens_details.cached_tokens : undefined),
    cacheWriteTokens: null,
  };
}

/** Status, or the incomplete reason: `completed`, `max_output_tokens`, `failed`, ... */
function finishOf(response: JsonObject): string | null {
  const status = typeof response.status === 'string' ? response.status : null;
  const reason = isObject(response.incomplete_details) ? response.incomplete_details.reason : undefined;
  return status === 'incomplete' && typeof reason === 'string' ? reason : status;
}

const TYPE_KEY = quotedKey('type');
const DELTA_KEY = quotedKey('delta');
const DELTA_SUFFIX = Buffer.from('.delta"');
const TERMINAL_TYPES: ReadonlySet<string> = new Set(['response.completed', 'response.incomplete', 'response.failed']);
/** Events worth a parse: the first ones (model), the terminal ones, errors. Deltas are checked apart. */
const IS_TYPE_READ = startsWithOneOf([...TERMINAL_TYPES, 'response.created', 'response.in_progress', 'error'].map((t) => Buffer.from(`"${t}"`)));
/** Fields a large event is read for; a large delta only needs its type. */
const LARGE_EVENT_PATHS = ['type', 'code', 'error', 'response.usage', 'response.model', 'response.status', 'response.incomplete_details', 'response.error'];

class ResponsesStreamReader implements StreamReader {
  private usage: TokenUsage | null = null;
  private model: string | null = null;
  private finishReason: string | null = null;
  private firstTokenAt: number | null = null;
  private terminated = false;
  private streamError: string | null = null;
  private id: unknown;

  constructor(private readonly now: () => number) {}

  event(data: Buffer): void {
    const mayBeFirstOutput = this.firstTokenAt === null && data.indexOf(DELTA_SUFFIX) !== -1 && mayHaveValue(data, DELTA_KEY, startsNonEmptyString);
    if (!mayBeFirstOutput && !mayHaveValue(data, TYPE_KEY, IS_TYPE_READ)) return;
    const event = parseObjectLoose(data);
    if (event !== null) this.apply(event);
  }

  largeEvent(): LargeEventConsumer {
    const capture = new JsonCapture(LARGE_EVENT_PATHS);
    return {
      push: (bytes) => capture.push(bytes),
      end: () => {
        const v = capture.finish();
        const response = { usage: v.get('response.usage'), model: v.get('response.model'), status: v.get('response.status'), incomplete_details: v.get('response.incomplete_details'), error: v.get('response.error') };
        // A delta this large certainly carries output; its text was not kept.
        this.apply({ type: v.get('type'), code: v.get('code'), error: v.get('error'), response, delta: 'x' });
      },
    };
  }

  private apply(event: JsonObject): void {
    const type = event.type;
    if (typeof type !== 'string') return;
    if (type.endsWith('.delta')) {
      if (this.firstTokenAt === null && typeof event.delta === 'string' && event.delta !== '') this.firstTokenAt = this.now();
      return;
    }
    if (type === 'error') {
      this.terminated = true;
      this.streamError = errorClass(event.code ?? (isObject(event.error) ? (event.error.code ?? event.error.type) : undefined)) ?? 'error';
      return;
    }
    const response = event.response;
    if (!isObject(response)) return;
    if (typeof response.model === 'string') this.model = response.model;
    this.id ??= response.id;
    if (!TERMINAL_TYPES.has(type)) return;
    this.terminated = true;
    this.usage = readUsage(response.usage) ?? this.usage;
    this.finishReason = finishOf(response);
    if (type === 'response.failed') this.streamError = errorClass(isObject(response.error) ? response.error.code : undefined) ?? 'failed';
  }

  summary(): CallSummary {
    return { usage: this.usage, usageComplete: this.usage !== null, model: this.model, finishReason: this.finishReason, firstTokenAt: this.firstTokenAt, terminated: this.terminated, streamError: this.streamError, ...responseIdOf(this.id) };
  }
}

const CREATED_OR_ERROR = startsWithOneOf(['response.created', 'error'].map((t) => Buffer.from(`"${t}"`)));

/**
 * Over a WebSocket: the id a `response.created` event gives its response (a later turn of the same
 * connection may continue it), and the HTTP status an `error` event carries (OpenAI wraps the error
 * an HTTP request would have got in one, with its status).
 */
export function socketEventFacts(data: Buffer): { readonly responseId?: string; readonly status?: number } {
  if (!mayHaveValue(data, TYPE_KEY, CREATED_OR_ERROR)) return {};
  const event = parseObjectLoose(data);
  if (event?.type === 'response.created' && isObject(event.response) && typeof event.response.id === 'string') return { responseId: event.response.id };
  if (event?.type === 'error' && Number.isInteger(event.status)) return { status: event.status as number };
  return {};
}

export const responses: WireProtocol = {
  api: 'responses',
  kind: 'openai',
  routes: [{ path: '/v1/responses', upstreamPath: '/responses' }],

  checkRequest(req, policy) {
    if (policy.socket !== undefined && req.type !== 'response.create') return refuse(ERRORS.socketEventNotServed, 'type');
    if (req.stream !== undefined && typeof req.stream !== 'boolean') return refuse(ERRORS.streamNotBoolean, 'stream');
    for (const [field, why] of STORED_STATE_FIELDS) {
      const value = req[field];
      if (value === undefined || value === null) continue;
      // On a WebSocket the provider keeps the connection's own responses in memory for that
      // connection: continuing one of them reaches nothing another workload made.
      if (field === 'previous_response_id' && typeof value === 'string' && policy.socket?.responses.has(value)) continue;
      if (field === 'previous_response_id' && policy.socket !== undefined) return refuse(ERRORS.storedStateRefused, field, `"${field}" names no response of this WebSocket connection: only a response this connection's own turns produced may be continued; ${WHOLE_HISTORY}`);
      return refuse(ERRORS.storedStateRefused, field, `"${field}" ${why}, which this gateway does not let a workload reach; ${WHOLE_HISTORY}`);
    }
    if (req.background === true) {
      return refuse(ERRORS.storedStateRefused, 'background', 'a background response is stored and fetched later, which this gateway does not allow; send the request without "background" (stream it instead)');
    }
    const input = checkInput(req.input) ?? checkStore(req.store) ?? checkContent([['input', req.input]], policy.hostedTools);
    if (input) return input;
    const tools = checkToolList(req.tools, (tool, i) => checkResponsesTool(tool, `tools[${i}]`, policy.hostedTools));
    if (tools) return tools;
    // tool_choice may name a hosted tool type directly: the same policy applies (function and
    // custom are client tools; allowed_tools only narrows the listed tools, checked above).
    const choice = req.tool_choice;
    if (isObject(choice) && typeof choice.type === 'string' && choice.type !== 'allowed_tools') return checkToolType(choice.type, RESPONSES_CLIENT_TOOLS, policy.hostedTools, 'tool_choice');
    return undefined;
  },

  requestHeaders: OPENAI_REQUEST_HEADERS,
  requestHeaderPrefixes: OPENAI_REQUEST_HEADER_PREFIXES,
  upstreamRequestIdHeader: 'x-request-id',
  retryStatuses: OPENAI_RETRY_STATUSES,

  newStreamReader: (now) => new ResponsesStreamReader(now),

  summarizeJson(body) {
    const response = parseObjectLoose(body);
    if (response === null) return { usage: null, usageComplete: false, model: null, finishReason: null, firstTokenAt: null, terminated: false, streamError: null };
    const usage = readUsage(response.usage);
    return {
      usage,
      usageComplete: usage !== null,
      model: typeof response.model === 'string' ? response.model : null,
      finishReason: finishOf(response),
      firstTokenAt: null,
      terminated: false,
      streamError: response.status === 'failed' ? (errorClass(isObject(response.error) ? response.error.code : undefined) ?? 'failed') : null,
      ...responseIdOf(response.id),
    };
  },

  streamNeedsEndEvent: true,
  errorBody: openAiErrorBody,
};
