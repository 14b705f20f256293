// What the bench's processes (orchestrator, upstreams, load generator) agree on: the request and
// response bodies, the pack-upload byte pattern, the SSE chunk format, and a clock they share.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { textTranscript } from '../../test/support/anthropic-upstream.ts';
import { ROOT } from '../../test/support/proxy-process.ts';
import { encodeSse, textTranscript as responsesTranscript, type SseEvent } from '../../test/support/responses-upstream.ts';

export const MiB = 1024 * 1024;
export const MODEL = 'bench-model';
/** The model of the Messages scenario, served by an Anthropic-kind provider. */
export const CLAUDE_MODEL = 'bench-claude';
export const GIT_REPO_PATH = '/o/r.git';
export const REFS_QUERY = '?service=git-upload-pack';

/**
 * Microseconds on CLOCK_MONOTONIC (what process.hrtime reads on Linux): one clock for every
 * process on the machine, so an SSE chunk stamped by the upstream process can be timed on
 * arrival in the load-generator process.
 */
export function monoUs(): number {
  const [s, ns] = process.hrtime();
  return s * 1e6 + ns / 1e3;
}

/**
 * The 1 MiB block the pack upload repeats: deterministic from a seed, incompressible. Block i of
 * an upload is this block with its first 4 bytes replaced by i (big-endian), so no two blocks are
 * alike and a reordered, dropped or duplicated block is detected.
 */
export function patternBlock(seed: string): Buffer {
  const block = Buffer.allocUnsafe(MiB);
  for (let k = 0; k < MiB / 32; k++) createHash('sha256').update(`${seed}:${k}`).digest().copy(block, k * 32);
  return block;
}

const pktText = (s: string) => (Buffer.byteLength(s) + 4).toString(16).padStart(4, '0') + s;

/**
 * What a pack upload begins with, as git's does: one command (a branch the proxy's rules allow),
 * the flush, and the pack's signature, so that the proxy reads and decides a real command list
 * before the pattern's blocks stream through.
 */
export const PUSH_HEAD = Buffer.from(
  `${pktText(`${'0'.repeat(40)} ${'1'.repeat(40)} refs/heads/bench/upload\0report-status side-band-64k quiet object-format=sha1 agent=git/2.39.5\n`)}0000PACK`,
  'latin1',
);

/** Checks, as it streams, that a body is PUSH_HEAD, then exactly blocks 0, 1, 2, ... of the pattern (memcmp). */
export class PatternCheck {
  bytes = 0;
  ok = true;
  #head = 0;
  private readonly block: Buffer;
  constructor(base: Buffer) {
    this.block = Buffer.from(base);
  }
  update(whole: Buffer): void {
    let chunk = whole;
    if (this.#head < PUSH_HEAD.length) {
      const n = Math.min(PUSH_HEAD.length - this.#head, chunk.length);
      if (!chunk.subarray(0, n).equals(PUSH_HEAD.subarray(this.#head, this.#head + n))) this.ok = false;
      this.#head += n;
      chunk = chunk.subarray(n);
    }
    let p = 0;
    while (p < chunk.length) {
      const inBlock = this.bytes % MiB;
      if (inBlock === 0) this.block.writeUInt32BE(Math.floor(this.bytes / MiB) >>> 0, 0);
      const n = Math.min(chunk.length - p, MiB - inBlock);
      if (this.ok && !chunk.subarray(p, p + n).equals(this.block.subarray(inBlock, inBlock + n))) this.ok = false;
      p += n;
      this.bytes += n;
    }
  }
}

function pktLine(s: string): string {
  return (s.length + 4).toString(16).padStart(4, '0') + s;
}

/** A small, well-formed upload-pack ref advertisement (smart HTTP, protocol v0): about 600 bytes. */
export function refAdvertisement(): Buffer {
  const sha = (n: number) => createHash('sha1').update(String(n)).digest('hex');
  const caps = 'multi_ack thin-pack side-band side-band-64k ofs-delta shallow deepen-since deepen-not deepen-relative no-progress include-tag multi_ack_detailed symref=HEAD:refs/heads/main object-format=sha1 agent=git/2.39.5';
  const refs = ['refs/heads/main', 'refs/heads/feature/bench', 'refs/tags/v1.0.0', 'refs/tags/v1.1.0'];
  return Buffer.from(
    pktLine('# service=git-upload-pack\n') + '0000' + pktLine(`${sha(0)} HEAD\0${caps}\n`) + refs.map((r, i) => pktLine(`${sha(i + 1)} ${r}\n`)).join('') + '0000',
  );
}

/** The 30 KB non-streamed chat request. */
export function chatRequestBody(): Buffer {
  return Buffer.from(JSON.stringify({ model: MODEL, messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'y'.repeat(30 * 1024) }] }));
}
export const CHAT_CONTENT_BYTES = 30 * 1024;

/** The 1 KB non-streamed answer, with a usage block like a real one. */
export function chatAnswer(): Buffer {
  const base = {
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: 1,
    model: MODEL,
    choices: [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 7700, completion_tokens: 180, total_tokens: 7880, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } },
  };
  const without = JSON.stringify(base).length;
  base.choices[0]!.message.content = 'z'.repeat(1024 - without);
  return Buffer.from(JSON.stringify(base));
}

/** A streamed chat request; the upstream reads its pacing from the message text. */
export function streamRequestBody(intervalMs: number, durationMs: number): Buffer {
  return Buffer.from(
    JSON.stringify({ model: MODEL, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: `bench-stream interval_ms=${intervalMs} duration_ms=${durationMs}` }] }),
  );
}
export function parseStreamParams(content: string): { intervalMs: number; durationMs: number } | undefined {
  const m = /^bench-stream interval_ms=(\d+) duration_ms=(\d+)$/.exec(content);
  return m ? { intervalMs: Number(m[1]), durationMs: Number(m[2]) } : undefined;
}

/**
 * One content chunk as OpenAI sends it, plus `i` (its index in the stream) and `t` (monoUs() when
 * the upstream wrote it), last so the stamp is taken at the latest moment.
 */
const CHUNK_HEAD = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}],"i":`;
export function sseContentChunk(i: number): string {
  return `${CHUNK_HEAD}${i},"t":${monoUs().toFixed(1)}}\n\n`;
}
export function sseFinalChunks(n: number): string {
  return (
    `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"n":${n}}\n\n` +
    `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":${n},"total_tokens":${12 + n}},"n":${n}}\n\n` +
    'data: [DONE]\n\n'
  );
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
export function median(xs: number[]): number {
  return percentile(Float64Array.from(xs).sort(), 50);
}

/** Latency samples (ms) that grow without re-boxing; summarised once, at the end. */
export class Samples {
  private buf = new Float64Array(1024);
  length = 0;
  push(v: number): void {
    if (this.length === this.buf.length) {
      const next = new Float64Array(this.buf.length * 2);
      next.set(this.buf);
      this.buf = next;
    }
    this.buf[this.length++] = v;
  }
  append(other: Float64Array): void {
    for (let i = 0; i < other.length; i++) this.push(other[i]!);
  }
  values(): Float64Array {
    return this.buf.slice(0, this.length);
  }
  sorted(): Float64Array {
    return this.values().sort();
  }
}

export interface LatencySummary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}
export function summarize(values: Float64Array): LatencySummary {
  const s = Float64Array.from(values).sort();
  let sum = 0;
  for (let i = 0; i < s.length; i++) sum += s[i]!;
  return { n: s.length, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s[s.length - 1] ?? NaN, mean: sum / s.length };
}

// ---- the Messages scenario: one Anthropic-format stream -------------------------------------

/** A Messages request as Claude Code sends one (streamed), about 2 KB. */
export function messagesRequestBody(): Buffer {
  return Buffer.from(
    JSON.stringify({
      model: CLAUDE_MODEL,
      max_tokens: 4096,
      stream: true,
      system: [{ type: 'text', text: 'You are a terse assistant.' }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'z'.repeat(2000) }] }],
      tools: [{ name: 'Bash', description: 'Runs a shell command', input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } }],
    }),
  );
}

/**
 * The events the upstream answers with, from the transcript builder of the tests' Anthropic fake
 * (test/support/anthropic-upstream.ts): message_start, content_block_start, ping, 40 text
 * deltas, content_block_stop, message_delta, message_stop.
 */
export function messagesEvents(): SseEvent[] {
  // 40 pieces of 12 characters: deltas() cuts the text into 12-character deltas.
  const text = Array.from({ length: 40 }, (_, i) => ` token${String(i).padStart(6, '0')}`).join('');
  return textTranscript(text, { model: CLAUDE_MODEL });
}

/** The whole stream, as the client must receive it byte for byte. */
export function messagesStream(): Buffer {
  return Buffer.from(encodeSse(messagesEvents()));
}

// ---- the Responses scenario: one turn over HTTP and over a WebSocket (issue 40) ---------------

/**
 * A turn as Codex 0.169 sends it (test/fixtures/recorded-socket/: its instructions, its tools,
 * about 17 KB), the model the bench's: as a WebSocket `response.create` message, and as the body
 * of `POST /v1/responses` (the same fields without `type`).
 */
export function responsesTurn(): { readonly socket: Buffer; readonly http: Buffer } {
  const recorded = JSON.parse(readFileSync(join(ROOT, 'test', 'fixtures', 'recorded-socket', 'codex-0.169.0.json'), 'utf8')) as { messages: { body: Record<string, unknown> }[] };
  const { type, previous_response_id: _previous, ...fields } = recorded.messages[1]!.body;
  const body = { ...fields, model: MODEL, stream: true };
  return { socket: Buffer.from(JSON.stringify({ type, ...body })), http: Buffer.from(JSON.stringify(body)) };
}

/** The events of the answer: the Responses fake's transcript of a text answer of 40 deltas, fixed ids. */
export function responsesEvents(): SseEvent[] {
  const text = Array.from({ length: 40 }, (_, i) => ` token${String(i).padStart(6, '0')}`).join('');
  return responsesTranscript(text, { model: MODEL });
}
