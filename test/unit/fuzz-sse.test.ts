// Fuzzes the SSE inspector the way the gateway uses it: the relay forwards each upstream chunk
// untouched and hands the same Buffer to the inspector, which only observes. Random transcripts
// (comments, event/id/retry fields, multi-line data, LF/CRLF/CR line ends, multi-byte UTF-8,
// a usage chunk or not, a byte order mark, an unterminated last event) are pushed whole and
// under random chunkings: the summary must not depend on where the chunks fall or on which
// line ends were used, the bytes relayed must be the transcript, and no Buffer may change.
// Deterministic: the seed is in the test name.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chatCompletions } from '../../src/gateway/protocols/chat-completions.ts';
import type { CallSummary } from '../../src/gateway/protocols/protocol.ts';
import { SseFramer } from '../../src/gateway/sse.ts';

type CompletionSummary = CallSummary & { events: number; oversized: boolean };
import { fuzzSeed, mulberry32, type Rng } from '../support/prng.ts';
import { countingReader } from '../support/counting-reader.ts';

const SEED = fuzzSeed(0x55e0_f022);
const TRANSCRIPTS = 3000;
const CONSTANT_CLOCK = (): number => 1234;

const WORDS = ['Hello', ' world', 'é', 'ünïcødé', '🌍', '日本語', ' \\"quoted\\"', '\\n', 'data: not a field', ': not a comment', '\u2028', 'x'.repeat(40), ''];
const MODELS = ['gpt-4o', 'gpt-4o-mini-2024-07-18', 'modèle-ü'];
const FINISH = ['stop', 'length', 'tool_calls', 'content_filter'];

function usageChunk(rng: Rng, model: string): Record<string, unknown> {
  const usage: Record<string, unknown> = { prompt_tokens: rng.int(5000), completion_tokens: rng.int(5000), total_tokens: rng.int(10000) };
  if (rng.chance(0.5)) usage.prompt_tokens_details = { cached_tokens: rng.int(100) };
  if (rng.chance(0.5)) usage.completion_tokens_details = { reasoning_tokens: rng.int(100) };
  if (rng.chance(0.1)) usage.prompt_tokens = rng.pick([-1, 1.5, '7', null]);
  return { id: 'chatcmpl-f', object: 'chat.completion.chunk', model, choices: [], usage };
}

function deltaChunk(rng: Rng, model: string): Record<string, unknown> {
  const delta: Record<string, unknown> = {};
  const kind = rng.int(6);
  if (kind === 0) delta.role = 'assistant';
  if (kind <= 2) delta.content = Array.from({ length: rng.int(4) }, () => rng.pick(WORDS)).join('');
  if (kind === 3) delta.reasoning_content = rng.pick(WORDS);
  if (kind === 4) delta.tool_calls = rng.chance(0.3) ? [] : [{ index: 0, function: { arguments: '{"city":"Zürich"}' } }];
  const chunk: Record<string, unknown> = { id: 'chatcmpl-f', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: rng.chance(0.15) ? rng.pick(FINISH) : null }] };
  if (rng.chance(0.9)) chunk.model = model;
  if (rng.chance(0.3)) chunk.usage = null;
  return chunk;
}

/** The data of one event: JSON (compact, or pretty over several data lines), [DONE], or junk. */
function eventData(rng: Rng, model: string): string {
  const r = rng.next();
  if (r < 0.05) return '[DONE]';
  if (r < 0.1) return rng.pick(['not json', '{"model": "truncated', '[1,2]', '', '{"usage": {"prompt_tokens": 3}']);
  const obj = r < 0.2 ? usageChunk(rng, model) : deltaChunk(rng, model);
  return rng.chance(0.3) ? JSON.stringify(obj, null, rng.pick([1, 2, '\t'])) : JSON.stringify(obj);
}

/** An SSE transcript as a list of lines (line ends are added later). */
function transcriptLines(rng: Rng): string[] {
  const model = rng.pick(MODELS);
  const lines: string[] = [];
  for (let n = rng.int(15); n > 0; n--) {
    if (rng.chance(0.2)) lines.push(rng.pick([': keep-alive', ':', ': 🌍 comment', 'event: message', 'id: 42', 'retry: 1000', 'unknown-field: x', 'data']));
    if (rng.chance(0.1)) lines.push('event: completion');
    if (rng.chance(0.1)) lines.push(`id: ${rng.int(1000)}`);
    for (const part of eventData(rng, model).split('\n')) lines.push(`${rng.chance(0.2) ? 'data:' : 'data: '}${part}`);
    if (rng.chance(0.05)) lines.push(': comment inside an event');
    lines.push('');
  }
  if (rng.chance(0.3)) lines.push(`data: ${JSON.stringify(usageChunk(rng, model))}`, ''); // a final usage chunk
  if (rng.chance(0.5)) lines.push('data: [DONE]', '');
  if (rng.chance(0.1)) lines.push(`data: ${JSON.stringify(usageChunk(rng, model))}`); // never terminated: discarded
  return lines;
}

/**
 * Joins lines with random line ends. An empty line ended by LF right after a line ended by CR
 * would read as one CRLF, which changes the events; such an empty line gets CR or CRLF instead,
 * so every rendering has the same events as the all-LF one.
 */
function render(lines: readonly string[], rng: Rng | undefined, bom: boolean): Buffer {
  let text = bom ? '\ufeff' : '';
  let previous = '\n';
  for (const line of lines) {
    let end = rng ? rng.pick(['\n', '\r\n', '\r']) : '\n';
    if (previous === '\r' && line === '' && end === '\n') end = '\r\n';
    text += line + end;
    previous = end;
  }
  return Buffer.from(text, 'utf8');
}

/** Cut points: random sizes, one byte at a time, or around every CR, LF and multi-byte character. */
function chunkings(bytes: Buffer, rng: Rng): Buffer[][] {
  const cut = (points: number[]): Buffer[] => {
    const sorted = [...new Set(points.filter((p) => p > 0 && p < bytes.length))].sort((a, b) => a - b);
    // Each chunk is its own Buffer object over a copy of the transcript, as a socket delivers
    // slices of its read buffer; an empty one now and then.
    const copy = Buffer.from(bytes);
    const chunks: Buffer[] = [];
    let from = 0;
    for (const p of [...sorted, bytes.length]) {
      if (rng.chance(0.02)) chunks.push(Buffer.alloc(0));
      chunks.push(copy.subarray(from, p));
      from = p;
    }
    return chunks;
  };
  const random = cut(Array.from({ length: rng.int(20) }, () => rng.int(bytes.length)));
  const tricky: number[] = [];
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b === 0x0a || b === 0x0d || b >= 0x80) tricky.push(i, i + 1);
  }
  const aroundLineEnds = cut(tricky.filter(() => rng.chance(0.5)));
  const result = [random, aroundLineEnds];
  if (bytes.length <= 1024) result.push(cut(Array.from({ length: bytes.length }, (_, i) => i)));
  return result;
}

/**
 * An independent model of the framing, from the lines themselves: the events dispatched (those
 * with at least one data line, ended by an empty line) and whether one of them was [DONE]. Only
 * used with the default line cap, where no line is dropped.
 */
function framingOf(lines: readonly string[]): { events: number; done: boolean } {
  let events = 0;
  let done = false;
  let data: string[] | undefined;
  for (const line of lines) {
    if (line === '') {
      if (data !== undefined) {
        events++;
        if (data.join('\n') === '[DONE]') done = true;
      }
      data = undefined;
    } else if (line === 'data' || line.startsWith('data:')) {
      const value = line.slice(5);
      (data ??= []).push(value.startsWith(' ') ? value.slice(1) : value);
    }
  }
  return { events, done };
}

/**
 * Pushes the chunks, which together are `original`, as the gateway does (it writes each chunk to
 * the client and hands the same Buffer to the inspector); `mutated` when, after the last push,
 * the chunks no longer hold `original`: what the gateway relayed is not what upstream sent.
 */
function inspect(chunks: readonly Buffer[], original: Buffer, maxEventBytes: number): { summary: CompletionSummary; mutated: boolean } {
  const reader = chatCompletions.newStreamReader(CONSTANT_CLOCK);
  const counting = countingReader(reader);
  const framer = new SseFramer(counting.reader, maxEventBytes);
  for (const chunk of chunks) framer.push(chunk);
  const summary: CompletionSummary = { ...reader.summary(), ...counting.counts };
  return { summary, mutated: !Buffer.concat(chunks as Buffer[]).equals(original) };
}

test(`fuzz: ${TRANSCRIPTS} random SSE transcripts give one summary whatever the chunking and line ends; bytes pass untouched (seed ${SEED})`, (t) => {
  const startedAt = performance.now();
  const rng = mulberry32(SEED);
  const failures: string[] = [];
  let runs = 0;
  let withUsage = 0;
  let oversized = 0;
  for (let i = 0; i < TRANSCRIPTS && failures.length < 10; i++) {
    const lines = transcriptLines(rng);
    const bom = rng.chance(0.05);
    // Mostly the default cap; sometimes a small one, so that dropping long events is fuzzed too.
    const maxEventBytes = rng.chance(0.8) ? 1024 * 1024 : rng.between(8, 400);
    const reference = render(lines, undefined, bom);
    const transcript = render(lines, rng, bom);
    const pristine = Buffer.from(transcript);
    const whole = inspect([transcript], pristine, maxEventBytes);
    const allLf = inspect([reference], Buffer.from(reference), maxEventBytes);
    runs += 2;
    const where = `transcript #${i} (maxEventBytes ${maxEventBytes}) ${JSON.stringify(transcript.toString('utf8').slice(0, 300))}`;
    if (!transcript.equals(pristine) || whole.mutated) failures.push(`${where}: the inspector changed the bytes it was given`);
    try {
      assert.deepEqual(whole.summary, allLf.summary);
    } catch {
      failures.push(`${where}: line ends changed the summary: ${JSON.stringify(whole.summary)} vs all-LF ${JSON.stringify(allLf.summary)}`);
    }
    if (maxEventBytes === 1024 * 1024) {
      const expected = framingOf(lines);
      if (whole.summary.events !== expected.events || whole.summary.terminated !== expected.done) {
        failures.push(`${where}: ${whole.summary.events} events, terminated ${whole.summary.terminated}; the lines say ${expected.events}, ${expected.done}`);
      }
    }
    if (whole.summary.usage !== null) withUsage++;
    if (whole.summary.oversized) oversized++;
    for (const chunks of chunkings(transcript, rng)) {
      runs++;
      const chunked = inspect(chunks, pristine, maxEventBytes);
      if (chunked.mutated) failures.push(`${where}: the inspector changed a chunk: relayed bytes differ from the transcript`);
      try {
        assert.deepEqual(chunked.summary, whole.summary);
      } catch {
        const sizes = chunks.map((c) => c.length).join(',');
        failures.push(`${where}: chunks [${sizes}] gave ${JSON.stringify(chunked.summary)}, whole gave ${JSON.stringify(whole.summary)}`);
      }
    }
  }
  const ms = Math.round(performance.now() - startedAt);
  t.diagnostic(`seed ${SEED}: ${TRANSCRIPTS} transcripts, ${runs} inspector runs, ${withUsage} with usage, ${oversized} with an oversized event, ${ms} ms`);
  assert.deepEqual(failures, [], `seed ${SEED}: reproduce with FUZZ_SEED=${SEED}`);
  assert.ok(withUsage >= TRANSCRIPTS * 0.1 && withUsage <= TRANSCRIPTS * 0.9, `${withUsage} transcripts carried usage: both kinds must be fuzzed`);
  assert.ok(oversized > 0, 'some transcripts must exceed the event cap');
});
