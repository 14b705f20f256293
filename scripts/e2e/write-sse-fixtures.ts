// Writes test/fixtures/sse/*.sse from the same builders the HTTPS fakes stream from, plus
// expected.json: what a stream inspector should read from each (outcome, end, usage, error, first
// output), so unit tests can feed every transcript split at every byte offset and compare.
//   npx tsx scripts/e2e/write-sse-fixtures.ts          (rewrites the files)
//   npx tsx scripts/e2e/write-sse-fixtures.ts --check  (exit 1 if a file differs from the builders)
// Fixed ids and numbers: the output is the same on every run.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PLAIN_ANSWER, pickShellTool } from '../../test/support/agent-turns.ts';
import * as anthropic from '../../test/support/anthropic-upstream.ts';
import * as responses from '../../test/support/responses-transcripts.ts';
import { ROOT } from '../../test/support/proxy-process.ts';

const DIR = join(ROOT, 'test', 'fixtures', 'sse');

/** A small request in Codex's shape: the response object echoes its parameters. */
const RESPONSES_REQUEST = {
  model: 'gpt-5.5',
  stream: true,
  store: false,
  include: ['reasoning.encrypted_content'],
  reasoning: { effort: 'medium' },
  tool_choice: 'auto',
  parallel_tool_calls: true,
  prompt_cache_key: '01a20000-0000-7000-8000-00000000e2e0',
  tools: [{ type: 'function', name: 'exec_command', description: 'Runs a command in a PTY.', strict: false, parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'], additionalProperties: false } }],
  input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Run echo e2e-tool-ok (e2e tool turn)' }] }],
};
const RESPONSES_TOOL = pickShellTool([{ name: 'exec_command', schema: RESPONSES_REQUEST.tools[0]!.parameters }])!;
const ANTHROPIC_TOOL = pickShellTool([{ name: 'Bash', schema: { type: 'object', properties: { command: { type: 'string' }, description: { type: 'string' } }, required: ['command'] } }])!;
const FAILED_TEXT = 'Partial answer that will fail.';

const r = { model: RESPONSES_REQUEST.model, request: RESPONSES_REQUEST, ids: responses.FIXED_IDS };
const a = { model: 'claude-sonnet-5', ids: anthropic.FIXED_IDS };
const ru = (u: responses.ResponsesUsage | null) => u && { input: u.input_tokens, cached: u.input_tokens_details.cached_tokens, output: u.output_tokens, reasoning: u.output_tokens_details.reasoning_tokens };
const au = (u: Partial<anthropic.AnthropicUsage>) => ({ input: u.input_tokens ?? null, cache_read: u.cache_read_input_tokens ?? null, cache_creation: u.cache_creation_input_tokens ?? null, output: u.output_tokens ?? null });

/**
 * File name, wire text, and what an inspector should conclude from it: the outcome; how the model
 * stopped (the Responses status, or the incomplete reason; Anthropic's stop_reason), null when no
 * terminal event says; the error class; the usage as reported and whether it is final; and the
 * type of the first event that carries output (a non-empty delta), null when none does.
 */
const FIXTURES: { file: string; wire: string; expect: Record<string, unknown> }[] = [
  {
    file: 'responses-text.sse',
    wire: responses.encodeSse(responses.textTranscript(PLAIN_ANSWER, r)),
    expect: { outcome: 'completed', finish_reason: 'completed', usage: ru(responses.TEXT_USAGE), usage_complete: true, first_output: 'response.output_text.delta' },
  },
  {
    file: 'responses-tool-call.sse',
    wire: responses.encodeSse(responses.toolCallTranscript(RESPONSES_TOOL, r)),
    expect: { outcome: 'completed', finish_reason: 'completed', usage: ru(responses.TOOL_USAGE), usage_complete: true, first_output: 'response.function_call_arguments.delta' },
  },
  {
    file: 'responses-incomplete.sse',
    wire: responses.encodeSse(responses.incompleteTranscript(PLAIN_ANSWER, r)),
    expect: { outcome: 'incomplete', finish_reason: 'max_output_tokens', usage: ru(responses.usage(1200, 0, 16, 0)), usage_complete: true, first_output: 'response.output_text.delta' },
  },
  {
    file: 'responses-failed.sse',
    wire: responses.encodeSse(responses.failedTranscript(FAILED_TEXT, r)),
    // response.failed carries status "failed" and usage null; one delta went out before it.
    expect: { outcome: 'failed', finish_reason: 'failed', error: 'server_error', usage: null, usage_complete: false, first_output: 'response.output_text.delta' },
  },
  {
    file: 'responses-error-event.sse',
    wire: responses.encodeSse(responses.errorEventTranscript(r)),
    // An error event ends the stream: no terminal response event, so no status, and no output before it.
    expect: { outcome: 'error', finish_reason: null, error: 'rate_limit_exceeded', usage: null, usage_complete: false, first_output: null },
  },
  {
    file: 'responses-cut.sse',
    wire: responses.cutWire(PLAIN_ANSWER, r),
    expect: { outcome: 'interrupted', finish_reason: null, usage: null, usage_complete: false, first_output: 'response.output_text.delta', note: 'ends in the middle of the third output_text.delta event' },
  },
  {
    file: 'anthropic-text.sse',
    wire: anthropic.encodeSse(anthropic.textTranscript(PLAIN_ANSWER, a)),
    expect: { outcome: 'completed', stop_reason: 'end_turn', usage: au(anthropic.TEXT_USAGE), usage_complete: true, first_output: 'content_block_delta' },
  },
  {
    file: 'anthropic-tool-use.sse',
    wire: anthropic.encodeSse(anthropic.toolUseTranscript(ANTHROPIC_TOOL, a)),
    expect: { outcome: 'completed', stop_reason: 'tool_use', usage: au(anthropic.TOOL_USAGE), usage_complete: true, first_output: 'content_block_delta' },
  },
  {
    file: 'anthropic-error-event.sse',
    wire: anthropic.encodeSse(anthropic.errorEventTranscript(PLAIN_ANSWER, a)),
    // Only message_start's usage arrived: the input side, and output_tokens as counted then (1).
    // No message_delta, so no stop_reason; one text delta went out before the error.
    expect: { outcome: 'error', stop_reason: null, error: 'overloaded_error', usage: au({ ...anthropic.TEXT_USAGE, output_tokens: 1 }), usage_complete: false, first_output: 'content_block_delta' },
  },
  {
    file: 'anthropic-cut.sse',
    wire: anthropic.cutWire(PLAIN_ANSWER, a),
    expect: { outcome: 'interrupted', stop_reason: null, usage: au({ ...anthropic.TEXT_USAGE, output_tokens: 1 }), usage_complete: false, first_output: 'content_block_delta', note: 'ends in the middle of the third content_block_delta event' },
  },
];

function main(): void {
  const check = process.argv.includes('--check');
  const expected = `${JSON.stringify(Object.fromEntries(FIXTURES.map((f) => [f.file, f.expect])), null, 2)}\n`;
  const files = [...FIXTURES.map((f) => ({ file: f.file, text: f.wire })), { file: 'expected.json', text: expected }];
  if (check) {
    const stale = files.filter((f) => !existsSync(join(DIR, f.file)) || readFileSync(join(DIR, f.file), 'utf8') !== f.text);
    for (const f of stale) process.stderr.write(`test/fixtures/sse/${f.file} differs from the builders: run npx tsx scripts/e2e/write-sse-fixtures.ts\n`);
    process.exit(stale.length === 0 ? 0 : 1);
  }
  mkdirSync(DIR, { recursive: true });
  for (const f of files) writeFileSync(join(DIR, f.file), f.text);
  process.stdout.write(`wrote ${files.length} files in test/fixtures/sse/\n`);
}

main();
