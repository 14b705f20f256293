// Request records as the model gateway logs them, for feeding the metrics without a gateway
// (test/unit/proxy-metrics.test.ts, scripts/bench-metrics.ts).
import type { ModelRequestRecord } from '../../src/gateway/record.ts';

/** A non-streamed chat completion of bot-1 (workflow triage, run-1), 200, no usage; `over` replaces fields. */
export function modelRecord(over: Partial<ModelRequestRecord> = {}): ModelRequestRecord {
  return {
    event: 'request',
    listener: 'model',
    request_id: 'req-0001',
    upstream_request_id: null,
    trace_id: null,
    parent_id: null,
    provider: 'openai',
    cloud: null,
    api: 'chat_completions',
    model: 'gpt-4o',
    refused_model: null,
    response_model: null,
    method: 'POST',
    path: '/v1/chat/completions',
    status: 200,
    stream: false,
    duration_ms: 0,
    ttft_ms: null,
    input_tokens: null,
    output_tokens: null,
    reasoning_tokens: null,
    cached_tokens: null,
    cache_write_tokens: null,
    usage_complete: false,
    finish_reason: null,
    interrupted: null,
    attempts: 1,
    retries: 0,
    rate_limited: 0,
    instance_id: 'bot-1',
    workflow: 'triage',
    run_id: 'run-1',
    bytes_in: 0,
    bytes_out: 0,
    error: null,
    limit: null,
    charged_usd: null,
    charge_estimated: null,
    charge_basis: null,
    ...over,
  };
}
