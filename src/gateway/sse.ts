/**
 * Extracts token usage, model, finish reason and time to first token from OpenAI
 * chat-completions responses.
 *
 * SseInspector reads a copy of an upstream `text/event-stream` body: the proxy forwards the real
 * bytes itself, so nothing here can delay or alter them. Framing follows the WHATWG rules for
 * interpreting an event stream:
 * https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
 *
 * The inspector runs on every streamed byte, so it stays cheap and bounded:
 * - lines are found with byte searches on the incoming Buffer; nothing is decoded to a string
 *   except the data of events that are parsed;
 * - an event's data is JSON.parsed only when a byte-level pre-check says it may carry a field we
 *   still need (see mayHaveValue);
 * - a line, or an event's data, longer than maxLineBytes is dropped rather than buffered, so memory
 *   stays O(maxLineBytes) whatever upstream sends.
 */

export interface Usage {
  inputTokens: number | null;
  outputTokens: number | null;
  reasoningTokens: number | null;
  cachedTokens: number | null;
}

export interface CompletionSummary {
  /** From the last usage object seen (streams send it in a final chunk). */
  usage: Usage | null;
  /** The response's `model` field, last seen. */
  model: string | null;
  /** choices[0].finish_reason, last non-null seen. */
  finishReason: string | null;
  /** (streams) Clock value when the first event carrying output was dispatched. */
  firstTokenAt: number | null;
  /** (streams) `data: [DONE]` was seen. */
  done: boolean;
  /** (streams) Number of dispatched events that had data. */
  events: number;
  /** A line or an event's data exceeded maxLineBytes and was skipped. */
  oversized: boolean;
}

const LF = 0x0a;
const CR = 0x0d;
const TAB = 0x09;
const SPACE = 0x20;
const COLON = 0x3a;
const QUOTE = 0x22;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

const DEFAULT_MAX_LINE_BYTES = 1024 * 1024;
const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const DATA_FIELD = Buffer.from('data');
const DATA_LINE_SEPARATOR = Buffer.from('\n');
const DONE_DATA = Buffer.from('[DONE]');

/** Delta fields whose non-empty string value is model output (reasoning is OpenRouter's name). */
const OUTPUT_TEXT_FIELDS = ['content', 'reasoning_content', 'reasoning', 'refusal'] as const;

const USAGE_KEY = quotedKey('usage');
const MODEL_KEY = quotedKey('model');
const FINISH_REASON_KEY = quotedKey('finish_reason');
const TOOL_CALLS_KEY = quotedKey('tool_calls');
const OUTPUT_TEXT_KEYS = OUTPUT_TEXT_FIELDS.map(quotedKey);

export class SseInspector {
  private readonly now: () => number;
  private readonly maxLineBytes: number;

  /** Start of a line whose end has not arrived yet. */
  private readonly partialLine: BoundedBytes;
  /** The current line is over the cap: drop its bytes until its line end. */
  private skippingOversizedLine = false;
  /** The previous chunk ended with CR, so an LF starting this chunk ends no new line. */
  private previousChunkEndedWithCr = false;
  /** No line has ended yet, so the next line may start with a byte order mark. */
  private atFirstLine = true;

  /** Data lines of the event being built, joined with "\n". */
  private readonly eventData: BoundedBytes;
  private eventHasData = false;
  private eventDataTooLarge = false;

  private usage: Usage | null = null;
  private model: string | null = null;
  private finishReason: string | null = null;
  private firstTokenAt: number | null = null;
  private done = false;
  private events = 0;
  private oversized = false;

  constructor(now: () => number, maxLineBytes = DEFAULT_MAX_LINE_BYTES) {
    if (!Number.isSafeInteger(maxLineBytes) || maxLineBytes < 1) {
      throw new RangeError('maxLineBytes must be a positive integer');
    }
    this.now = now;
    this.maxLineBytes = maxLineBytes;
    this.partialLine = new BoundedBytes(maxLineBytes);
    this.eventData = new BoundedBytes(maxLineBytes);
  }

  /** Feeds the next bytes of the stream; chunk boundaries may fall anywhere. */
  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    let lineStart = this.previousChunkEndedWithCr && chunk[0] === LF ? 1 : 0;
    this.previousChunkEndedWithCr = false;

    // Both searches are memchr-fast. Each is redone only once the line start has passed its hit,
    // and never after a miss, so each search looks at every byte of the chunk at most once.
    let nextLf = chunk.indexOf(LF, lineStart);
    let nextCr = chunk.indexOf(CR, lineStart);
    while (nextLf !== -1 || nextCr !== -1) {
      const lineEnd = nextLf === -1 ? nextCr : nextCr === -1 ? nextLf : Math.min(nextLf, nextCr);
      this.completeLine(chunk.subarray(lineStart, lineEnd));
      lineStart = lineEnd + 1;
      if (chunk[lineEnd] === CR) {
        if (lineStart === chunk.length) this.previousChunkEndedWithCr = true;
        else if (chunk[lineStart] === LF) lineStart++;
      }
      if (nextLf !== -1 && nextLf < lineStart) nextLf = chunk.indexOf(LF, lineStart);
      if (nextCr !== -1 && nextCr < lineStart) nextCr = chunk.indexOf(CR, lineStart);
    }
    this.appendPartialLine(chunk.subarray(lineStart));
  }

  /** Ends the stream. An event not terminated by an empty line is discarded, as the spec says. */
  finish(): CompletionSummary {
    return {
      usage: this.usage,
      model: this.model,
      finishReason: this.finishReason,
      firstTokenAt: this.firstTokenAt,
      done: this.done,
      events: this.events,
      oversized: this.oversized,
    };
  }

  private appendPartialLine(bytes: Buffer): void {
    if (bytes.length === 0 || this.skippingOversizedLine) return;
    if (!this.partialLine.append(bytes)) {
      this.partialLine.clear();
      this.skippingOversizedLine = true;
      this.oversized = true;
    }
  }

  /** Called at a line end with the line's bytes that arrived in the current chunk. */
  private completeLine(lastPart: Buffer): void {
    const isFirstLine = this.atFirstLine;
    this.atFirstLine = false;
    if (this.skippingOversizedLine) {
      this.skippingOversizedLine = false;
      return;
    }

    let line = lastPart;
    if (this.partialLine.length > 0) {
      if (!this.partialLine.append(lastPart)) {
        this.partialLine.clear();
        this.oversized = true;
        return;
      }
      line = this.partialLine.bytes();
    } else if (lastPart.length > this.maxLineBytes) {
      this.oversized = true;
      return;
    }

    // Decoding the stream as UTF-8 strips a leading byte order mark.
    this.processLine(isFirstLine && startsWith(line, UTF8_BOM) ? line.subarray(UTF8_BOM.length) : line);
    this.partialLine.clear();
  }

  private processLine(line: Buffer): void {
    if (line.length === 0) {
      this.dispatchEvent();
      return;
    }
    // Only the data field matters here. Comments (lines starting with ':') and the event, id and
    // retry fields cannot carry usage, and without data an event is not dispatched at all.
    const isDataField =
      startsWith(line, DATA_FIELD) && (line.length === DATA_FIELD.length || line[DATA_FIELD.length] === COLON);
    if (!isDataField) return;
    let value = line.subarray(DATA_FIELD.length + 1);
    if (value[0] === SPACE) value = value.subarray(1);
    this.appendEventData(value);
  }

  private appendEventData(value: Buffer): void {
    if (!this.eventDataTooLarge) {
      const fits =
        (!this.eventHasData || this.eventData.append(DATA_LINE_SEPARATOR)) && this.eventData.append(value);
      if (!fits) {
        this.eventData.clear();
        this.eventDataTooLarge = true;
        this.oversized = true;
      }
    }
    this.eventHasData = true;
  }

  private dispatchEvent(): void {
    if (this.eventHasData) {
      this.events++;
      if (!this.eventDataTooLarge) this.inspectEventData(this.eventData.bytes());
    }
    this.eventData.clear();
    this.eventHasData = false;
    this.eventDataTooLarge = false;
  }

  private inspectEventData(data: Buffer): void {
    if (data.equals(DONE_DATA)) {
      this.done = true;
      return;
    }
    const mayHaveUsage = mayHaveValue(data, USAGE_KEY, startsObject);
    const mayHaveFinishReason = mayHaveValue(data, FINISH_REASON_KEY, startsString);
    // Every chunk repeats the model, so parsing for it stops once one is known; later parses
    // for other fields still refresh it.
    const mayHaveNeededModel = this.model === null && mayHaveValue(data, MODEL_KEY, startsString);
    const mayHaveFirstOutput =
      this.firstTokenAt === null &&
      (OUTPUT_TEXT_KEYS.some((key) => mayHaveValue(data, key, startsNonEmptyString)) ||
        mayHaveValue(data, TOOL_CALLS_KEY, startsNonEmptyArray));
    if (!mayHaveUsage && !mayHaveFinishReason && !mayHaveNeededModel && !mayHaveFirstOutput) return;

    const chunk = parseJsonObject(data);
    if (chunk === null) return;
    this.usage = readUsage(chunk) ?? this.usage;
    this.model = readModel(chunk) ?? this.model;
    this.finishReason = readFinishReason(chunk) ?? this.finishReason;
    if (mayHaveFirstOutput && carriesOutput(chunk)) this.firstTokenAt = this.now();
  }
}

/** Summarizes a non-streamed chat-completions body. Anything unparseable yields nulls. */
export function summarizeJsonCompletion(body: Buffer): CompletionSummary {
  const response = parseJsonObject(body);
  return {
    usage: response === null ? null : readUsage(response),
    model: response === null ? null : readModel(response),
    finishReason: response === null ? null : readFinishReason(response),
    firstTokenAt: null,
    done: false,
    events: 0,
    oversized: false,
  };
}

/** A byte buffer that grows by doubling and never holds more than its cap. */
class BoundedBytes {
  length = 0;
  private storage = Buffer.alloc(0);
  private readonly cap: number;

  constructor(cap: number) {
    this.cap = cap;
  }

  /** Appends all of bytes, or nothing and returns false if that would exceed the cap. */
  append(bytes: Buffer): boolean {
    const needed = this.length + bytes.length;
    if (needed > this.cap) return false;
    if (needed > this.storage.length) {
      const grown = Buffer.alloc(Math.min(this.cap, Math.max(needed, this.storage.length * 2)));
      this.storage.copy(grown, 0, 0, this.length);
      this.storage = grown;
    }
    bytes.copy(this.storage, this.length);
    this.length = needed;
    return true;
  }

  /** A view of the content, valid until the next append or clear. */
  bytes(): Buffer {
    return this.storage.subarray(0, this.length);
  }

  clear(): void {
    this.length = 0;
  }
}

function quotedKey(name: string): Buffer {
  return Buffer.from(`"${name}"`);
}

function startsWith(bytes: Buffer, prefix: Buffer): boolean {
  return bytes.length >= prefix.length && bytes.compare(prefix, 0, prefix.length, 0, prefix.length) === 0;
}

/**
 * Pre-check before JSON.parse: does the raw JSON contain `"key": value` with a value that starts as
 * `accepts` requires? A false positive (say, the key quoted inside a string) only costs a parse.
 * There is no false negative unless the key is spelled with \u escapes, which no server does.
 */
function mayHaveValue(json: Buffer, key: Buffer, accepts: (json: Buffer, valueStart: number) => boolean): boolean {
  for (let keyAt = json.indexOf(key); keyAt !== -1; keyAt = json.indexOf(key, keyAt + 1)) {
    const colonAt = skipWhitespace(json, keyAt + key.length);
    if (json[colonAt] === COLON && accepts(json, skipWhitespace(json, colonAt + 1))) return true;
  }
  return false;
}

function skipWhitespace(json: Buffer, from: number): number {
  let at = from;
  while (json[at] === SPACE || json[at] === TAB || json[at] === LF || json[at] === CR) at++;
  return at;
}

function startsObject(json: Buffer, valueStart: number): boolean {
  return json[valueStart] === OPEN_BRACE;
}

function startsString(json: Buffer, valueStart: number): boolean {
  return json[valueStart] === QUOTE;
}

function startsNonEmptyString(json: Buffer, valueStart: number): boolean {
  return json[valueStart] === QUOTE && json[valueStart + 1] !== QUOTE;
}

function startsNonEmptyArray(json: Buffer, valueStart: number): boolean {
  return json[valueStart] === OPEN_BRACKET && json[skipWhitespace(json, valueStart + 1)] !== CLOSE_BRACKET;
}

type JsonObject = Record<string, unknown>;

function asObject(value: unknown): JsonObject | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonObject) : null;
}

function parseJsonObject(bytes: Buffer): JsonObject | null {
  try {
    return asObject(JSON.parse(bytes.toString('utf8')));
  } catch {
    return null;
  }
}

function readUsage(response: JsonObject): Usage | null {
  const usage = asObject(response.usage);
  if (usage === null) return null;
  return {
    inputTokens: tokenCount(usage.prompt_tokens),
    outputTokens: tokenCount(usage.completion_tokens),
    reasoningTokens: tokenCount(asObject(usage.completion_tokens_details)?.reasoning_tokens),
    cachedTokens: tokenCount(asObject(usage.prompt_tokens_details)?.cached_tokens),
  };
}

function tokenCount(value: unknown): number | null {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : null;
}

function readModel(response: JsonObject): string | null {
  return typeof response.model === 'string' ? response.model : null;
}

function readFinishReason(response: JsonObject): string | null {
  const firstChoice = Array.isArray(response.choices) ? asObject(response.choices[0]) : null;
  const finishReason = firstChoice?.finish_reason;
  return typeof finishReason === 'string' ? finishReason : null;
}

function carriesOutput(chunk: JsonObject): boolean {
  if (!Array.isArray(chunk.choices)) return false;
  return chunk.choices.some((choice: unknown) => {
    const delta = asObject(asObject(choice)?.delta);
    if (delta === null) return false;
    const toolCalls = delta.tool_calls;
    return (
      OUTPUT_TEXT_FIELDS.some((field) => typeof delta[field] === 'string' && delta[field] !== '') ||
      (Array.isArray(toolCalls) && toolCalls.length > 0)
    );
  });
}
