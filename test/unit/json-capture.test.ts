// JsonCapture reads a few values out of a document of any size with bounded memory.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { JsonCapture } from '../../src/gateway/json-capture.ts';

function capture(pieces: readonly (string | Buffer)[], paths: readonly string[], maxValueBytes?: number): ReadonlyMap<string, unknown> {
  const c = new JsonCapture(paths, maxValueBytes);
  for (const p of pieces) c.push(typeof p === 'string' ? Buffer.from(p) : p);
  return c.finish();
}

const COMPLETED = JSON.stringify({
  type: 'response.completed',
  sequence_number: 99,
  response: { id: 'resp_1', status: 'completed', model: 'gpt-5', output: [{ type: 'message', content: [{ type: 'output_text', text: 'say "usage": {"input_tokens": 1}' }] }], usage: { input_tokens: 10, output_tokens: 5 }, user: null },
});

test('JsonCapture reads the values at the wanted paths, and nothing named alike elsewhere', () => {
  const v = capture([COMPLETED], ['type', 'response.usage', 'response.model', 'response.missing']);
  assert.equal(v.get('type'), 'response.completed');
  assert.deepEqual(v.get('response.usage'), { input_tokens: 10, output_tokens: 5 });
  assert.equal(v.get('response.model'), 'gpt-5');
  assert.equal(v.has('response.missing'), false);
});

test('JsonCapture gives the same values whatever the chunking', () => {
  const whole = capture([COMPLETED], ['type', 'response.usage', 'response.status']);
  const bytes = Buffer.from(COMPLETED);
  for (let at = 0; at <= bytes.length; at++) {
    assert.deepEqual(capture([bytes.subarray(0, at), bytes.subarray(at)], ['type', 'response.usage', 'response.status']), whole, `split at ${at}`);
  }
});

test('JsonCapture drops a wanted value over its cap, and keeps the others', () => {
  const doc = JSON.stringify({ response: { usage: { input_tokens: 1 }, model: 'x'.repeat(100) } });
  const v = capture([doc], ['response.usage', 'response.model'], 50);
  assert.equal(v.has('response.model'), false);
  assert.deepEqual(v.get('response.usage'), { input_tokens: 1 });
});

test('JsonCapture reads the usage at the end of a multi-megabyte event with bounded memory', () => {
  const text = Buffer.from('x'.repeat(64 * 1024));
  const c = new JsonCapture(['type', 'response.usage']);
  c.push(Buffer.from('{"type":"response.completed","response":{"output":[{"type":"message","content":[{"type":"output_text","text":"'));
  const before = process.memoryUsage().arrayBuffers;
  for (let sent = 0; sent < 32 * 1024 * 1024; sent += text.length) c.push(text);
  const growth = process.memoryUsage().arrayBuffers - before;
  c.push(Buffer.from('"}]}],"usage":{"input_tokens":7,"output_tokens":3}}}'));
  const v = c.finish();
  assert.ok(growth < 1024 * 1024, `array buffers grew by ${growth} bytes for 32 MiB of output`);
  assert.equal(v.get('type'), 'response.completed');
  assert.deepEqual(v.get('response.usage'), { input_tokens: 7, output_tokens: 3 });
});
