// The shipped Grafana dashboard (grafana/dashboard.json) shows only metrics the proxy exports:
// every metric name in every panel's query is a family of the proxy's registry (a histogram's
// _bucket, _sum or _count included), and the operator's signals have their panels: limits,
// spend, the shared store, revocations and security refusals, filtered by a `workflow` variable.
// (test/integration/metrics.test.ts runs every query against a real Prometheus.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createProxyMetrics } from '../../src/metrics/proxy-metrics.ts';
import { modelRecord } from '../support/records.ts';

interface Dashboard {
  templating: { list: { name: string; query?: string }[] };
  panels: { title: string; targets: { expr: string }[] }[];
}

const dashboard = JSON.parse(readFileSync(join(__dirname, '..', '..', 'grafana', 'dashboard.json'), 'utf8')) as Dashboard;

/** Every family the proxy exports, with a histogram's series names. */
function exportedNames(): Set<string> {
  const metrics = createProxyMetrics({ maxSeriesPerFamily: 10, seriesTtlMs: 0, runIdLabel: false, prices: { get: () => undefined } });
  const names = new Set<string>();
  for (const m of metrics.registry.expose().matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(m[1]!);
    if (m[2] === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${m[1]}${suffix}`);
  }
  return names;
}

/** The metric names a PromQL expression reads: identifiers of our prefixes, outside label matchers' values. */
function metricNames(expr: string): string[] {
  const withoutStrings = expr.replace(/"[^"]*"/g, '""');
  return [...withoutStrings.matchAll(/\b((?:model_gateway|git_proxy|proxy|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1]!);
}

test('dashboard: every panel\'s query names only metrics the proxy exports', () => {
  const exported = exportedNames();
  const unknown: string[] = [];
  let names = 0;
  for (const panel of dashboard.panels) {
    for (const { expr } of panel.targets) {
      for (const name of metricNames(expr)) {
        names++;
        if (!exported.has(name)) unknown.push(`${panel.title}: ${name}`);
      }
    }
  }
  for (const v of dashboard.templating.list) for (const name of metricNames(v.query ?? '')) if (!exported.has(name)) unknown.push(`variable ${v.name}: ${name}`);
  assert.deepEqual(unknown, []);
  assert.ok(names >= 30, `metric names read: ${names}`);
});

test('dashboard: panels for limits, spend, the store, revocations, security refusals and the request bodies held', () => {
  const read = (name: string) => dashboard.panels.filter((p) => p.targets.some((t) => metricNames(t.expr).includes(name))).map((p) => p.title);
  for (const name of [
    'model_gateway_limit_refusals_total',
    'model_gateway_limit_charged_usd_total',
    'model_gateway_limits_store_up',
    'model_gateway_limits_store_errors_total',
    'model_gateway_limits_store_state_lost_total',
    'proxy_revoked_tokens_refused_total',
    'model_gateway_refusals_total',
    'git_proxy_scope_refusals_total',
    'git_proxy_upstream_credential_rejected_total',
    'proxy_connections_refused_total',
    'proxy_log_lines_dropped_total',
    'proxy_request_body_bytes_held',
    'model_gateway_request_bodies_refused_total',
  ]) {
    assert.ok(read(name).length > 0, `no panel reads ${name}`);
  }
});

test('dashboard: a workflow variable filters every model panel whose metric carries the workflow label', () => {
  const variable = dashboard.templating.list.find((v) => v.name === 'workflow');
  assert.ok(variable, 'a workflow variable');
  assert.equal(variable.query, 'label_values(model_gateway_requests_total, workflow)');
  const withWorkflowLabel = ['model_gateway_requests_total', 'model_gateway_request_duration_seconds_bucket', 'model_gateway_tokens_total', 'model_gateway_cost_usd_total', 'model_gateway_limit_refusals_total', 'model_gateway_limit_charged_usd_total', 'model_gateway_refusals_total'];
  for (const panel of dashboard.panels) {
    for (const { expr } of panel.targets) {
      if (metricNames(expr).some((n) => withWorkflowLabel.includes(n))) assert.match(expr, /workflow=~"\$workflow"/, `${panel.title}: ${expr}`);
    }
  }
});

test('dashboard: namespace and replica variables (from proxy_build_info) filter every query, so one replica or one namespace of a fleet can be looked at alone', () => {
  const byName = new Map(dashboard.templating.list.map((v) => [v.name, v.query]));
  assert.equal(byName.get('namespace'), 'label_values(proxy_build_info, namespace)');
  assert.equal(byName.get('replica'), 'label_values(proxy_build_info{namespace=~"$namespace"}, pod)');
  const unfiltered: string[] = [];
  for (const panel of dashboard.panels) {
    for (const { expr } of panel.targets) {
      const selectors = [...expr.matchAll(/\b(?:model_gateway|git_proxy|proxy|process|nodejs)_[a-z0-9_]+(\{[^}]*\})?/g)];
      for (const s of selectors) if (!(s[1] ?? '').includes('namespace=~"$namespace", pod=~"$replica"')) unfiltered.push(`${panel.title}: ${s[0]}`);
    }
  }
  assert.deepEqual(unfiltered, []);
});

test('metrics: proxy_build_info is 1 with the version, commit and Node.js version; --metrics-drop-instance-id leaves instance_id out of every model family (the record keeps it)', () => {
  const metrics = createProxyMetrics({ maxSeriesPerFamily: 10, seriesTtlMs: 0, runIdLabel: false, dropInstanceId: true, prices: { get: () => undefined }, build: { version: '0.1.0', commit: 'abc123', node: 'v20.20.2' } });
  assert.match(metrics.registry.expose(), /^proxy_build_info\{version="0\.1\.0",commit="abc123",node="v20\.20\.2"\} 1$/m);
  metrics.model(modelRecord({ instance_id: 'ns-a/pod-1', retries: 1, rate_limited: 1, input_tokens: 5 }));
  const text = metrics.registry.expose();
  assert.ok(!text.includes('instance_id'), 'no series names instance_id');
  assert.match(text, /^model_gateway_requests_total\{provider="openai",model="gpt-4o",workflow="triage",api="chat_completions",status="200"\} 1$/m);
});
