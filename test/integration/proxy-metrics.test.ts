// promtool, Prometheus's own checker, accepts the proxy's exposition: the one behind the golden
// file (test/support/metrics-golden.ts), and one with overflow series and identity labels in
// every model family. The metric families themselves are test/unit/proxy-metrics.test.ts.
//
// It needs promtool (Debian/Ubuntu: apt-get install prometheus; CI installs it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createProxyMetrics } from '../../src/metrics/proxy-metrics.ts';
import { gitRecord, goldenExposition, MODEL_RECORDS, PRICES } from '../support/metrics-golden.ts';
import { modelRecord } from '../support/records.ts';

function promtoolCheck(text: string): void {
  const result = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (result.error) {
    assert.fail(`could not run promtool (${result.error.message}): install it (Debian/Ubuntu: apt-get install prometheus) — this test requires it`);
  }
  assert.equal(result.status, 0, `promtool check metrics failed (status ${result.status}):\n${result.stdout}${result.stderr}\n--- exposition ---\n${text}`);
}

test('promtool check metrics accepts the exposition', () => {
  promtoolCheck(goldenExposition());
  // And one with overflow series and identity labels in every model family. (At most 14
  // families overflow here, fewer than the cap of 20 series of the overflow counter itself.)
  const metrics = createProxyMetrics({ maxSeriesPerFamily: 20, seriesTtlMs: 0, runIdLabel: true, prices: PRICES });
  for (let i = 0; i < 25; i++) {
    metrics.model(MODEL_RECORDS[0]!);
    metrics.model(modelRecord({ ...MODEL_RECORDS[4]!, instance_id: `bot-${i}`, run_id: `run-${i}` }));
    metrics.git(gitRecord({ host: `h${i}.example`, error: 'dns', status: 502 }));
  }
  const text = metrics.registry.expose();
  assert.ok(text.includes('__overflow__'), 'the cap was reached');
  promtoolCheck(text);
});
