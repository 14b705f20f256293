// The shutdown order (src/run/shutdown.ts) with its listeners and the end of the process in the
// test's hands: which listener is closed when, what is logged, and when the process would exit.
// The bundle's own signals are tested in test/integration/lifecycle.test.ts and forced-shutdown.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LineWriter } from '../../src/http/log.ts';
import type { Listener } from '../../src/http/server.ts';
import type { LogEvent } from '../../src/run/log-events.ts';
import { shutdownOrder } from '../../src/run/shutdown.ts';

/** A listener that writes each call into `steps` and finishes its close or cut when `release` is called. */
function fakeListener(name: string, steps: string[]) {
  const pending: (() => void)[] = [];
  const listener = {
    name,
    markDraining: () => void steps.push(`${name}: draining`),
    close: (graceMs: number) => {
      steps.push(`${name}: close ${graceMs}`);
      return new Promise<void>((resolve) => pending.push(resolve));
    },
    cut: (deadlineMs: number) => {
      steps.push(`${name}: cut ${deadlineMs}`);
      return new Promise<void>((resolve) => pending.push(resolve));
    },
  } as unknown as Listener;
  return { listener, release: () => pending.splice(0).forEach((r) => r()) };
}

function order() {
  const steps: string[] = [];
  const lines: LineWriter = { write: () => {}, writeLater: () => {}, dropped: () => 0, drain: async () => void steps.push('lines: drained'), flushSync: () => void steps.push('lines: flushed') };
  let exited!: (code: number) => void;
  const exit = new Promise<number>((resolve) => (exited = resolve));
  const log = (e: LogEvent) => void steps.push(`log: ${'phase' in e ? e.phase : e.event}`);
  const shutdown = shutdownOrder(30_000, log, lines, (code) => {
    steps.push(`exit ${code}`);
    exited(code);
  });
  const git = fakeListener('git', steps);
  const model = fakeListener('model', steps);
  const metrics = fakeListener('metrics', steps);
  shutdown.addProxy(git.listener);
  shutdown.addProxy(model.listener);
  shutdown.setMetrics(metrics.listener);
  shutdown.onExit(() => void steps.push('released'));
  return { shutdown, steps, exit, git, model, metrics };
}

test('shutdown order: the first stop closes the proxy listeners at once, the metrics listener only once they have drained, releases what would outlive them, then exits 0', async () => {
  const { shutdown, steps, exit, git, model, metrics } = order();
  shutdown.stop('SIGTERM');
  assert.deepEqual(steps, ['git: close 30000', 'model: close 30000', 'metrics: draining', 'log: draining']);
  git.release();
  await new Promise((r) => setImmediate(r));
  assert.ok(!steps.includes('metrics: close 0'), 'the metrics listener stays while a proxy listener drains');
  model.release();
  await new Promise((r) => setImmediate(r));
  assert.equal(steps.at(-1), 'metrics: close 0');
  metrics.release();
  assert.equal(await exit, 0);
  assert.deepEqual(steps.slice(4), ['metrics: close 0', 'log: done', 'lines: drained', 'released', 'exit 0']);
});

test('shutdown order: a second stop while draining cuts every proxy connection, flushes the log and exits 0 once the cut calls have ended', async () => {
  const { shutdown, steps, exit, git, model } = order();
  shutdown.stop('SIGTERM');
  shutdown.stop('SIGINT');
  assert.deepEqual(steps.slice(4), ['log: forced', 'git: cut 1000', 'model: cut 1000']);
  git.release();
  await new Promise((r) => setImmediate(r));
  assert.ok(!steps.includes('exit 0'), 'not before every cut call has ended');
  model.release();
  assert.equal(await exit, 0);
  assert.deepEqual(steps.slice(-3), ['lines: flushed', 'released', 'exit 0'], 'the log flushed, what outlives the listeners released, then the exit');
});
