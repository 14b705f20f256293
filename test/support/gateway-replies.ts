// What the gateway tests read back from the built bundle: the error object of an answer in
// OpenAI's format, and the access log record of one request.
import type { Reply } from './http-client.ts';
import type { LogRecord, ProxyProcess } from './proxy-process.ts';

export interface OpenAiError {
  message: string;
  type: string;
  code: string;
  param: string | null;
}

/** The `error` object of an OpenAI-format error body. */
export const errorOf = (r: Reply): OpenAiError => (JSON.parse(r.body.toString()) as { error: OpenAiError }).error;

/** The `request` log line of the request the gateway numbered `requestId` (its x-client-request-id). */
export function recordFor(proxy: ProxyProcess, requestId: string): Promise<LogRecord> {
  return proxy.waitForRecord((r) => r.event === 'request' && r.request_id === requestId, `the record of ${requestId}`);
}
