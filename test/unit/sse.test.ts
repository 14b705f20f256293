import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chatCompletions } from '../../src/gateway/protocols/chat-completions.ts';
import type { CallSummary } from '../../src/gateway/protocols/protocol.ts';
import { SseFramer } from '../../src/gateway/sse.ts';
import { framedEvents, splitsThatChangeTheEvents } from '../support/sse-splits.ts';
import { countingReader } from '../support/counting-reader.ts';

/** The chat reader behind the framer, as the gateway runs them, with the framer's counts. */
type CompletionSummary = CallSummary & { events: number; oversized: boolean };
function newInspector(now: () => number, maxEventBytes?: number): { push(chunk: Buffer): void; finish(): CompletionSummary } {
  const reader = chatCompletions.newStreamReader(now);
  const counting = countingReader(reader);
  const framer = new SseFramer(counting.reader, maxEventBytes);
  return { push: (chunk) => framer.push(chunk), finish: () => ({ ...reader.summary(), ...counting.counts }) };
}
const summarizeJsonCompletion = (body: Buffer) => chatCompletions.summarizeJson(body);

const MODEL = 'gpt-4o-2024-08-06';
const CONSTANT_CLOCK = (): number => 1000;

/** One chat.completion.chunk as OpenAI serializes it (compact JSON). */
function chunkJson(fields: Record<string, unknown>): string {
  return JSON.stringify({
    id: 'chatcmpl-abc123',
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model: MODEL,
    system_fingerprint: 'fp_44709d6fcb',
    ...fields,
  });
}

function deltaChunk(delta: Record<string, unknown>, finishReason: string | null = null): string {
  return chunkJson({ choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }], usage: null });
}

const ROLE_CHUNK = deltaChunk({ role: 'assistant', content: '', refusal: null });
const USAGE_CHUNK = chunkJson({
  choices: [],
  usage: {
    prompt_tokens: 42,
    completion_tokens: 17,
    total_tokens: 59,
    prompt_tokens_details: { cached_tokens: 8, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 5, audio_tokens: 0 },
  },
});
const EXPECTED_USAGE = { inputTokens: 42, outputTokens: 17, reasoningTokens: 5, cachedTokens: 8, cacheWriteTokens: null };

const TRANSCRIPT_EVENTS = [
  ROLE_CHUNK,
  deltaChunk({ content: 'h' }),
  deltaChunk({ content: 'éllo ' }),
  deltaChunk({ content: '🌍 ünïcødé' }),
  deltaChunk({
    tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '' } }],
  }),
  deltaChunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":"Zürich"}' } }] }),
  deltaChunk({}, 'tool_calls'),
  USAGE_CHUNK,
  '[DONE]',
];

function transcript(lineEnd: string): Buffer {
  return Buffer.from(TRANSCRIPT_EVENTS.map((data) => `data: ${data}${lineEnd}${lineEnd}`).join(''));
}

const EXPECTED_TRANSCRIPT_SUMMARY: CompletionSummary = {
  usage: EXPECTED_USAGE,
  usageComplete: true,
  model: MODEL,
  finishReason: 'tool_calls',
  firstTokenAt: 1000,
  terminated: true,
  streamError: null,
  responseId: 'chatcmpl-abc123',
  events: TRANSCRIPT_EVENTS.length,
  oversized: false,
};

function inspect(chunks: Array<Buffer | string>, maxEventBytes?: number): CompletionSummary {
  const inspector = newInspector(CONSTANT_CLOCK, maxEventBytes);
  for (const chunk of chunks) inspector.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return inspector.finish();
}

test('extracts usage, model and finish reason from an OpenAI stream', () => {
  assert.deepEqual(inspect([transcript('\n')]), EXPECTED_TRANSCRIPT_SUMMARY);
});

// The reader sees only the framed events, so a split that frames the same events gives the same
// summary: each split is checked at the framer (../support/sse-splits.ts), the summary read whole.
test('one transcript split at every byte offset gives the same summary', () => {
  const events = framedEvents([transcript('\n')]);
  assert.equal(events.length, EXPECTED_TRANSCRIPT_SUMMARY.events);
  for (const lineEnd of ['\n', '\r\n', '\r']) {
    const bytes = transcript(lineEnd);
    assert.deepEqual(inspect([bytes]), EXPECTED_TRANSCRIPT_SUMMARY, `whole with ${JSON.stringify(lineEnd)}`);
    assert.deepEqual(splitsThatChangeTheEvents(bytes, events), [], `the offsets whose split frames other events, with ${JSON.stringify(lineEnd)}`);
    const oneByteChunks = Array.from(bytes, (byte) => Buffer.from([byte]));
    assert.deepEqual(inspect(oneByteChunks), EXPECTED_TRANSCRIPT_SUMMARY, `1-byte chunks with ${JSON.stringify(lineEnd)}`);
  }
});

test('the split check reports every offset when the events expected are not the ones framed: an empty report means the events matched', () => {
  const bytes = Buffer.from(': ping\r\n\r\ndata: {"a":1}\r\n\r\nevent: x\r\ndata: {"b":\r\ndata: 2}\r\n\r\ndata: [DONE]\r\n\r\n');
  const events = framedEvents([bytes]);
  assert.deepEqual(events.map(String), ['{"a":1}', '{"b":\n2}', '[DONE]']);
  assert.deepEqual(splitsThatChangeTheEvents(bytes, events), []);
  const everyOffset = Array.from({ length: bytes.length + 1 }, (_, at) => at);
  const changed = [...events];
  changed[1] = Buffer.from('{"b":2}');
  assert.deepEqual(splitsThatChangeTheEvents(bytes, changed), everyOffset, 'one event changed');
  assert.deepEqual(splitsThatChangeTheEvents(bytes, events.slice(0, -1)), everyOffset, 'one event fewer');
  assert.deepEqual(splitsThatChangeTheEvents(bytes, [...events, Buffer.from('[DONE]')]), everyOffset, 'one event more');
});

test('CRLF, LF and lone CR line endings frame identically', () => {
  const stream = (eol: string): string =>
    `: comment${eol}data: {"model":${eol}data: "m1",${eol}data: "choices":[]}${eol}${eol}data: [DONE]${eol}${eol}`;
  const expected = inspect([stream('\n')]);
  assert.equal(expected.model, 'm1');
  assert.equal(expected.events, 2);
  assert.deepEqual(inspect([stream('\r\n')]), expected);
  assert.deepEqual(inspect([stream('\r')]), expected);
});

test('a CR at the end of one chunk and LF at the start of the next are one line end', () => {
  // Read as two line ends, the LF would be an empty line dispatching half a JSON document.
  const summary = inspect(['data: {"choices":[],\r', '\ndata: "usage":{"prompt_tokens":3}}\r\n\r\n']);
  assert.equal(summary.events, 1);
  assert.deepEqual(summary.usage, { inputTokens: 3, outputTokens: null, reasoningTokens: null, cachedTokens: null, cacheWriteTokens: null });
});

test('a lone CR at the end of a chunk still ends the line', () => {
  const summary = inspect(['data: [DONE]\r', '\r']);
  assert.equal(summary.terminated, true);
  assert.equal(summary.events, 1);
});

test('multi-line data fields are joined with newline', () => {
  const joined = inspect(['data: {"model":\n', 'data:"m1"}\n\n']);
  assert.equal(joined.model, 'm1');
  assert.equal(joined.events, 1);
  // A raw newline inside a JSON string is invalid, so this only parses if the join is not "\n".
  assert.equal(inspect(['data: {"model":"a\ndata: b"}\n\n']).model, null);
});

test('only one space after the data colon is stripped', () => {
  assert.equal(inspect(['data:[DONE]\n\n']).terminated, true);
  assert.equal(inspect(['data: [DONE]\n\n']).terminated, true);
  assert.equal(inspect(['data:  [DONE]\n\n']).terminated, false);
});

test('comments and event/id/retry fields are ignored', () => {
  const plain = inspect([transcript('\n')]);
  const decorated = Buffer.from(
    ': OPENROUTER PROCESSING\n\nretry: 3000\n\n' +
      TRANSCRIPT_EVENTS.map((data, i) => `: ping\nevent: message\nid: ${i}\ndata: ${data}\nretry: 1000\n\n`).join(''),
  );
  assert.deepEqual(inspect([decorated]), plain);
});

test('an event without data is not dispatched', () => {
  assert.equal(inspect(['event: ping\nid: 1\n\n:\n\n\n\n']).events, 0);
  assert.equal(inspect(['data\n\n']).events, 1);
});

test('a stream without usage chunk yields usage null and terminated false', () => {
  const summary = inspect([`data: ${ROLE_CHUNK}\n\ndata: ${deltaChunk({ content: 'Hi' }, 'stop')}\n\n`]);
  assert.equal(summary.usage, null);
  assert.equal(summary.terminated, false);
  assert.equal(summary.finishReason, 'stop');
  assert.equal(summary.model, MODEL);
});

test('an event not terminated by an empty line is discarded at end of stream', () => {
  for (const tail of [`data: ${USAGE_CHUNK}`, `data: ${USAGE_CHUNK}\n`]) {
    const summary = inspect([tail]);
    assert.equal(summary.usage, null);
    assert.equal(summary.events, 0);
  }
});

test('usage written with whitespace between tokens is still found', () => {
  const pretty = JSON.stringify(JSON.parse(USAGE_CHUNK), null, 1).replaceAll('\n', ' ');
  assert.deepEqual(inspect([`data: ${pretty}\n\n`]).usage, EXPECTED_USAGE);
});

test('intermediate usage null does not replace a usage object', () => {
  const laterNull = chunkJson({ choices: [], usage: null });
  assert.deepEqual(inspect([`data: ${USAGE_CHUNK}\n\ndata: ${laterNull}\n\n`]).usage, EXPECTED_USAGE);
});

test('a byte order mark at the start of the stream is ignored', () => {
  assert.equal(inspect([Buffer.from([0xef]), Buffer.from([0xbb, 0xbf]), 'data: [DONE]\n\n']).terminated, true);
});

test('event data of exactly maxEventBytes is kept and one byte more is skipped but counted', () => {
  const line = `data: ${USAGE_CHUNK}`;
  const length = Buffer.byteLength(USAGE_CHUNK);
  const halves = [line.slice(0, 40), `${line.slice(40)}\n\n`];
  for (const chunks of [[`${line}\n\n`], halves]) {
    assert.deepEqual(inspect(chunks, length).usage, EXPECTED_USAGE);
    const skipped = inspect(chunks, length - 1);
    assert.equal(skipped.usage, null);
    assert.equal(skipped.oversized, true);
    assert.equal(skipped.events, 1);
  }
});

test('a giant line without newline keeps memory bounded and sets oversized', () => {
  const maxLineBytes = 64 * 1024;
  const inspector = newInspector(CONSTANT_CLOCK, maxLineBytes);
  const filler = Buffer.alloc(64 * 1024, 'a');
  inspector.push(Buffer.from('data: '));
  const arrayBuffersBefore = process.memoryUsage().arrayBuffers;
  for (let pushed = 0; pushed < 50 * 1024 * 1024; pushed += filler.length) inspector.push(filler);
  const growth = process.memoryUsage().arrayBuffers - arrayBuffersBefore;
  assert.ok(growth < 4 * maxLineBytes, `array buffers grew by ${growth} bytes`);

  inspector.push(Buffer.from(`\n\ndata: ${USAGE_CHUNK}\n\n`));
  const summary = inspector.finish();
  assert.equal(summary.oversized, true);
  assert.deepEqual(summary.usage, EXPECTED_USAGE);
  assert.equal(summary.events, 2);
});

test('an event whose data lines add up past the cap is skipped but counted', () => {
  const manyLines = 'data: {"usage":{"prompt_tokens":1}}\n'.repeat(100);
  const summary = inspect([`${manyLines}\ndata: [DONE]\n\n`], 1024);
  assert.equal(summary.oversized, true);
  assert.equal(summary.usage, null);
  assert.equal(summary.events, 2);
  assert.equal(summary.terminated, true);
});

test('firstTokenAt is the time of the first output-bearing event, not the role-only chunk', () => {
  let clock = 0;
  const inspector = newInspector(() => clock);
  const pushAt = (time: number, data: string): void => {
    clock = time;
    inspector.push(Buffer.from(`data: ${data}\n\n`));
  };
  pushAt(1, ROLE_CHUNK);
  pushAt(2, deltaChunk({ content: '' }));
  pushAt(3, deltaChunk({ content: 'Hi' }));
  pushAt(4, deltaChunk({ content: ' there' }));
  assert.equal(inspector.finish().firstTokenAt, 3);
});

test('reasoning, refusal and tool call deltas count as output', () => {
  const outputDeltas = [
    { reasoning_content: 'Let me think' },
    { reasoning: 'Let me think' },
    { refusal: 'I cannot help with that' },
    { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }] },
  ];
  for (const delta of outputDeltas) {
    let clock = 0;
    const inspector = newInspector(() => clock);
    inspector.push(Buffer.from(`data: ${deltaChunk({ role: 'assistant', content: '', tool_calls: [] })}\n\n`));
    clock = 7;
    inspector.push(Buffer.from(`data: ${deltaChunk(delta)}\n\n`));
    assert.equal(inspector.finish().firstTokenAt, 7, JSON.stringify(delta));
  }
});

test('an event split across pushes is timed when its terminating empty line arrives', () => {
  let clock = 0;
  const inspector = newInspector(() => clock);
  clock = 1;
  inspector.push(Buffer.from(`data: ${deltaChunk({ content: 'Hi' })}\n`));
  clock = 2;
  inspector.push(Buffer.from('\n'));
  assert.equal(inspector.finish().firstTokenAt, 2);
});

test('does not JSON.parse events that cannot carry usage', () => {
  const contentEvents = Array.from({ length: 100 }, (_, i) => `data: ${deltaChunk({ content: `word${i} ` })}\n\n`);
  const stream = [
    `data: ${ROLE_CHUNK}\n\n`, // parsed: model not known yet
    `data: ${deltaChunk({ content: '' })}\n\n`, // not parsed: empty content is no output
    `data: ${deltaChunk({ content: 'Hello' })}\n\n`, // parsed: first output
    ...contentEvents, // not parsed
    `data: ${deltaChunk({}, 'stop')}\n\n`, // parsed: finish reason
    `data: ${USAGE_CHUNK}\n\n`, // parsed: usage
    'data: [DONE]\n\n', // not parsed
  ];
  const realParse = JSON.parse;
  let parseCalls = 0;
  JSON.parse = ((...args: Parameters<typeof JSON.parse>) => {
    parseCalls++;
    return realParse(...args);
  }) as typeof JSON.parse;
  let summary: CompletionSummary;
  try {
    summary = inspect(stream);
  } finally {
    JSON.parse = realParse;
  }
  assert.equal(parseCalls, 4);
  assert.deepEqual(summary, {
    usage: EXPECTED_USAGE,
    usageComplete: true,
    model: MODEL,
    finishReason: 'stop',
    firstTokenAt: 1000,
    terminated: true,
    streamError: null,
    responseId: 'chatcmpl-abc123',
    events: stream.length,
    oversized: false,
  });
});

test('summarizeJsonCompletion reads usage, model and finish reason', () => {
  const body = JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    model: MODEL,
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'length' }],
    usage: {
      prompt_tokens: 42,
      completion_tokens: 17,
      total_tokens: 59,
      prompt_tokens_details: { cached_tokens: 8 },
      completion_tokens_details: { reasoning_tokens: 5 },
    },
  });
  assert.deepEqual(summarizeJsonCompletion(Buffer.from(body)), {
    usage: EXPECTED_USAGE,
    usageComplete: true,
    model: MODEL,
    finishReason: 'length',
    firstTokenAt: null,
    terminated: false,
    streamError: null,
    responseId: 'chatcmpl-1',
  });
});

test('summarizeJsonCompletion maps missing usage fields to null', () => {
  const withoutDetails = JSON.stringify({ model: MODEL, choices: [], usage: { prompt_tokens: 3, completion_tokens: 'x' } });
  assert.deepEqual(summarizeJsonCompletion(Buffer.from(withoutDetails)).usage, {
    inputTokens: 3,
    outputTokens: null,
    reasoningTokens: null,
    cachedTokens: null,
    cacheWriteTokens: null,
  });
  const withoutUsage = summarizeJsonCompletion(Buffer.from(JSON.stringify({ model: MODEL, choices: [] })));
  assert.equal(withoutUsage.usage, null);
  assert.equal(withoutUsage.model, MODEL);
  assert.equal(withoutUsage.finishReason, null);
});

test('summarizeJsonCompletion yields nulls for invalid JSON', () => {
  const allNull: CallSummary = {
    usage: null,
    usageComplete: false,
    model: null,
    finishReason: null,
    firstTokenAt: null,
    terminated: false,
    streamError: null,
  };
  for (const body of ['{"usage":', '', 'null', '[1,2]', '"text"', '\xff\xfe']) {
    assert.deepEqual(summarizeJsonCompletion(Buffer.from(body, 'latin1')), allNull, body);
  }
});
