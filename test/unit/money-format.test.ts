// Cost figures without float noise: money counters add whole nano-dollars and show micro-dollars;
// the request record's charged_usd is rounded to the micro-dollar the budgets are charged in.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { microDollars } from '../../src/limits/prices.ts';
import { Registry } from '../../src/metrics/registry.ts';

test('cost figures without float noise: a money counter given 0.1 and 0.2 shows 0.3, not 0.30000000000000004', () => {
  const registry = new Registry(10);
  const cost = registry.usdCounter('test_cost_usd_total', 'Cost.', ['who']);
  cost.inc(['a'], 0.1);
  cost.inc(['a'], 0.2);
  for (let i = 0; i < 1000; i++) cost.inc(['b'], 0.0000118);
  const text = registry.expose();
  assert.match(text, /^test_cost_usd_total\{who="a"\} 0\.3$/m);
  assert.match(text, /^test_cost_usd_total\{who="b"\} 0\.0118$/m);
  assert.throws(() => cost.inc(['a'], -1), /only goes up/);
});

test('cost figures without float noise: a money counter keeps what is below a micro-dollar per call and shows the sum to the micro-dollar', () => {
  const registry = new Registry(10);
  const cost = registry.usdCounter('test_cost_usd_total', 'Cost.');
  for (let i = 0; i < 10; i++) cost.inc([], 0.0000004); // 0.4 micro-dollars each
  assert.match(registry.expose(), /^test_cost_usd_total 0\.000004$/m);
});

test('cost figures without float noise: microDollars rounds to the micro-dollar and prints the short decimal', () => {
  assert.equal(String(microDollars(0.1 + 0.2)), '0.3');
  assert.equal(String(microDollars(0.0015987500000000001)), '0.001599');
  assert.equal(microDollars(0), 0);
  assert.equal(String(microDollars(12.3456789)), '12.345679');
});
