// The protocol table (src/gateway/protocols/table.ts): what the model listener's `listening` line
// says it serves.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PROTOCOLS, servedApis } from '../../src/gateway/protocols/table.ts';

test('the listening line lists each API once: the cloud routes speak Messages, which is named once', () => {
  assert.deepEqual(servedApis(PROTOCOLS, ['openai', 'anthropic', 'anthropic-vertex', 'anthropic-bedrock']), ['chat_completions', 'responses', 'messages']);
});

test('the listening line lists only the APIs of the configured providers\' kinds: no Messages without an Anthropic-kind provider', () => {
  assert.deepEqual(servedApis(PROTOCOLS, ['openai']), ['chat_completions', 'responses']);
  assert.deepEqual(servedApis(PROTOCOLS, ['anthropic-bedrock']), ['messages']);
  assert.deepEqual(servedApis(PROTOCOLS, []), []);
});
