// What redacting a relayed answer costs the event loop: a StreamRedactor over 200-byte SSE events
// (one push each, as a provider writes them), over 64 KiB chunks of such events, over a 64 KiB
// chunk of JSON-escaped text (backslashes, percent signs and ampersands, where every escaped form
// must be looked at), and the EventStreamGuard over Bedrock chunk frames. None of them carries
// the key: this is the price every clean answer pays. A 168-character key, as a long bearer
// token is. Median of 7 rounds, in µs per push. The last case is the first push after the key
// changed (a minted credential rotates): what setting up the search for a new key costs, paid on
// the event loop.
//
//   npx tsx scripts/bench-redact.ts
import { CHUNK_HEADERS, encodeFrame } from '../test/support/eventstream-frame.ts';
import { StreamRedactor } from '../src/http/redact.ts';
import { EventStreamGuard } from '../src/gateway/eventstream.ts';
import { redactorOf } from '../test/support/secrets.ts';

const KEY = `ya29.${'c'.repeat(8)}${Buffer.from(Array.from({ length: 116 }, (_, i) => (i * 37 + 11) & 0xff)).toString('base64url')}`.slice(0, 168);
const ROUNDS = 7;

const event = (i: number) => `data: {"id":"chatcmpl-${i}","object":"chat.completion.chunk","model":"gpt-5.5","choices":[{"index":0,"delta":{"content":"word ${i} and more"}}]}\n\n`.padEnd(200, ' ');
const sseEvent = Buffer.from(event(1).slice(0, 198) + '\n\n');
const sseChunk = Buffer.from(Array.from({ length: 328 }, (_, i) => event(i)).join('').slice(0, 64 * 1024 - 2) + '\n\n');
const escapedEvent = (i: number) => `data: {"delta":{"text":"line ${i}\\n\\u00e9t\\u00e9 50% & more \\"quoted\\" a\\/b"}}\n\n`;
const escapedChunk = Buffer.from(Array.from({ length: 1200 }, (_, i) => escapedEvent(i)).join('').slice(0, 64 * 1024 - 2) + '\n\n');

const frame = (payload: Buffer): Buffer => encodeFrame(CHUNK_HEADERS, payload);
const delta = JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello there, a few words of text.' } });
const bedrockFrame = frame(Buffer.from(JSON.stringify({ bytes: Buffer.from(delta).toString('base64'), p: 'abcdefghij' })));

/** µs per push, median of the rounds. */
function measure(pushes: number, push: () => void): number {
  for (let i = 0; i < Math.min(pushes, 1000); i++) push(); // warm up
  const rounds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = performance.now();
    for (let i = 0; i < pushes; i++) push();
    rounds.push(((performance.now() - start) * 1000) / pushes);
  }
  rounds.sort((a, b) => a - b);
  return rounds[ROUNDS >> 1]!;
}

let rotations = 0;
const cases: [string, number, number, () => void][] = [
  ['StreamRedactor, one 200-byte SSE event', sseEvent.length, 200_000, ((r) => () => r.push(sseEvent))(new StreamRedactor([KEY], true))],
  ['StreamRedactor, 64 KiB of SSE events', sseChunk.length, 2_000, ((r) => () => r.push(sseChunk))(new StreamRedactor([KEY], true))],
  ['StreamRedactor, 64 KiB of JSON-escaped events', escapedChunk.length, 2_000, ((r) => () => r.push(escapedChunk))(new StreamRedactor([KEY], true))],
  ['StreamRedactor, 64 KiB of a plain JSON body', sseChunk.length, 2_000, ((r) => () => r.push(sseChunk))(new StreamRedactor([KEY], false))],
  ['StreamRedactor, 64 KiB of JSON-escaped events, the first push with a new key', escapedChunk.length, 5, () => new StreamRedactor([`${KEY.slice(0, -8)}${String(++rotations).padStart(8, '0')}`], true).push(escapedChunk)],
  [`EventStreamGuard, one ${bedrockFrame.length}-byte chunk frame`, bedrockFrame.length, 100_000, ((g) => () => g.push(bedrockFrame))(new EventStreamGuard(redactorOf(KEY)))],
];
console.log(`key of ${KEY.length} characters; median of ${ROUNDS} rounds; node ${process.version}`);
console.log('| what | bytes | µs per push | MB/s |');
console.log('|---|---:|---:|---:|');
for (const [name, bytes, pushes, push] of cases) {
  const us = measure(pushes, push);
  console.log(`| ${name} | ${bytes} | ${us.toFixed(2)} | ${(bytes / us).toFixed(0)} |`);
}
