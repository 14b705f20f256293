// Transcripts of the OpenAI Responses API stream, in the shape OpenAI sends them
// (https://platform.openai.com/docs/api-reference/responses-streaming): `event: <type>` and
// `data: <json with type and sequence_number>`, the whole response repeated in the final
// response.completed / response.incomplete / response.failed event. Shared by the unit tests
// of the protocol module and the gateway's integration tests.
export type Event = Record<string, unknown> & { type: string };
export const MODEL = 'gpt-5-2025-08-07';
export const USAGE = { input_tokens: 120, input_tokens_details: { cached_tokens: 64 }, output_tokens: 40, output_tokens_details: { reasoning_tokens: 16 }, total_tokens: 160 };

export function sse(events: readonly Event[], lineEnd = '\n'): Buffer {
  return Buffer.from(events.map((e, i) => `event: ${e.type}${lineEnd}data: ${JSON.stringify({ ...e, sequence_number: i })}${lineEnd}${lineEnd}`).join(''));
}

export function responseObject(status: string, output: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { id: 'resp_1', object: 'response', created_at: 1_700_000_000, status, error: null, incomplete_details: null, model: MODEL, output, usage: status === 'in_progress' ? null : USAGE, store: false, ...extra };
}

export const MESSAGE = { id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Hello there.', annotations: [] }] };
const START: Event[] = [
  { type: 'response.created', response: responseObject('in_progress', []) },
  { type: 'response.in_progress', response: responseObject('in_progress', []) },
  { type: 'response.output_item.added', output_index: 0, item: { id: 'rs_1', type: 'reasoning', summary: [] } },
  { type: 'response.output_item.done', output_index: 0, item: { id: 'rs_1', type: 'reasoning', summary: [], encrypted_content: 'gAAAAB' } },
];
export const TEXT: Event[] = [
  ...START,
  { type: 'response.output_item.added', output_index: 1, item: { ...MESSAGE, status: 'in_progress', content: [] } },
  { type: 'response.content_part.added', item_id: 'msg_1', output_index: 1, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } },
  { type: 'response.output_text.delta', item_id: 'msg_1', output_index: 1, content_index: 0, delta: '', logprobs: [] },
  { type: 'response.output_text.delta', item_id: 'msg_1', output_index: 1, content_index: 0, delta: 'Hello', logprobs: [] },
  { type: 'response.output_text.delta', item_id: 'msg_1', output_index: 1, content_index: 0, delta: ' there.', logprobs: [] },
  { type: 'response.output_text.done', item_id: 'msg_1', output_index: 1, content_index: 0, text: 'Hello there.', logprobs: [] },
  { type: 'response.content_part.done', item_id: 'msg_1', output_index: 1, content_index: 0, part: MESSAGE.content[0]! },
  { type: 'response.output_item.done', output_index: 1, item: MESSAGE },
  { type: 'response.completed', response: responseObject('completed', [MESSAGE]) },
];
const CALL = { id: 'fc_1', type: 'function_call', status: 'completed', arguments: '{"command":"echo hi"}', call_id: 'call_1', name: 'shell_command' };
export const TOOL_CALL: Event[] = [
  ...START,
  { type: 'response.output_item.added', output_index: 1, item: { ...CALL, status: 'in_progress', arguments: '' } },
  { type: 'response.function_call_arguments.delta', item_id: 'fc_1', output_index: 1, delta: '{"command":' },
  { type: 'response.function_call_arguments.delta', item_id: 'fc_1', output_index: 1, delta: '"echo hi"}' },
  { type: 'response.function_call_arguments.done', item_id: 'fc_1', output_index: 1, arguments: CALL.arguments },
  { type: 'response.output_item.done', output_index: 1, item: CALL },
  { type: 'response.completed', response: responseObject('completed', [CALL]) },
];
export const INCOMPLETE: Event[] = [...TEXT.slice(0, -1), { type: 'response.incomplete', response: responseObject('incomplete', [MESSAGE], { incomplete_details: { reason: 'max_output_tokens' } }) }];
export const FAILED: Event[] = [...START, { type: 'response.failed', response: responseObject('failed', [], { error: { code: 'server_error', message: 'The model failed.' }, usage: null }) }];
export const ERROR_EVENT: Event[] = [START[0]!, { type: 'error', code: 'rate_limit_exceeded', message: 'Rate limit reached', param: null }];
export const CUT: Event[] = TEXT.slice(0, 8); // ends after the first delta with text

