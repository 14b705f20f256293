// Start-up: tracing, when the OTEL_* variables name a collector (src/telemetry/settings.ts): the
// sampler, the exporter and its connection (through the egress proxy for https://), the spans
// each listener's requests make, and what the shutdown flushes. Its start is logged once (where,
// how sampled, never a header), and the exports' failing and recovering as they change.
import { VERSION } from '../config/version.ts';
import type { ModelRequestRecord, ModelSpanFacts } from '../gateway/record.ts';
import type { GitRequestRecord, GitSpanFacts } from '../git/record.ts';
import type { SpanSink } from '../http/lifecycle.ts';
import type { LogSink } from '../http/log.ts';
import { collectorAgent, postToCollector } from '../http/otlp-client.ts';
import { tunnelRouteForUrl, type Egress } from '../http/tunnel.ts';
import { SpanExporter, type ExporterCounts } from '../telemetry/exporter.ts';
import { attributes, exportRequestBody } from '../telemetry/otlp.ts';
import { parseTracingEnv } from '../telemetry/settings.ts';
import { gitSpans, modelSpans } from '../telemetry/spans.ts';
import { tracer } from '../telemetry/tracer.ts';
import type { LogEvent } from './log-events.ts';

export interface Telemetry {
  readonly model: SpanSink<ModelRequestRecord, ModelSpanFacts>;
  readonly git: SpanSink<GitRequestRecord, GitSpanFacts>;
  readonly counts: () => ExporterCounts;
  /** At shutdown, once the listeners have drained: what is queued is sent within `withinMs`. */
  readonly flush: (withinMs: number) => Promise<void>;
  readonly stop: () => void;
}

export function openTelemetry(env: NodeJS.ProcessEnv, egress: Egress, log: LogSink<LogEvent>): Telemetry | undefined {
  const settings = parseTracingEnv(env, VERSION);
  if (settings === undefined) return undefined;
  const { url } = settings;
  const endpoint = `${url.origin}${url.pathname}`;
  const agent = collectorAgent(url, egress);
  const resource = attributes(settings.resource);
  const scope = { name: 'credential-proxy', version: VERSION };
  const exporter = new SpanExporter(
    (spans) => exportRequestBody(resource, scope, spans),
    (body, timeoutMs) => postToCollector(url, agent, settings.headers, body, timeoutMs),
    { ...settings.batch, maxBatch: Math.min(settings.batch.maxBatch, settings.batch.maxQueue), exportTimeoutMs: settings.exportTimeoutMs },
    (change) => log({ event: 'traces_export', endpoint, ...change }),
  );
  const tracing = tracer(settings.sampler);
  const egressLabel = tunnelRouteForUrl(egress, url)?.proxy.label ?? 'direct';
  log({ event: 'tracing', endpoint, parent_based: settings.sampler.parentBased, ratio: settings.sampler.ratio, headers: Object.keys(settings.headers), egress: egressLabel });
  return {
    model: { tracing, span: (rec, call) => exporter.add(modelSpans(rec, call)) },
    git: { tracing, span: (rec, call) => exporter.add(gitSpans(rec, call)) },
    counts: () => exporter.counts(),
    flush: (withinMs) => exporter.flush(withinMs),
    stop: () => {
      exporter.stop();
      agent.destroy();
    },
  };
}
