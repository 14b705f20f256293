import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clockTickMs, escapeLabelValue, formatValue, OVERFLOW_VALUE, Registry, runCoarseClock, seriesExpired } from '../../src/metrics/registry.ts';

/** The exposition's lines, without the empty string after the final newline. */
function lines(text: string): string[] {
  assert.ok(text.endsWith('\n'), 'the exposition ends with a newline');
  return text.slice(0, -1).split('\n');
}

/** The sample lines of one metric name (exactly that name before `{` or ` `). */
function samples(text: string, name: string): string[] {
  return lines(text).filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
}

/** The value of the one sample line that starts with `prefix` (a name and its label set). */
function valueOf(text: string, prefix: string): string {
  const found = lines(text).filter((l) => l.startsWith(`${prefix} `));
  assert.equal(found.length, 1, `exactly one sample ${prefix}\n${text}`);
  return found[0]!.slice(prefix.length + 1);
}

// ---- registration ----

test('metric names are validated at registration: bad characters and a leading digit are rejected', () => {
  const r = new Registry(10);
  for (const name of ['bad-name_total', 'bad name_total', 'bad.name_total', '1abc_total', '9_total', '', 'é_total', 'a{b}_total']) {
    assert.throws(() => r.counter(name, 'help'), /invalid metric name/, JSON.stringify(name));
  }
  for (const name of ['bad-gauge', '0gauge']) assert.throws(() => r.gauge(name, 'help'), /invalid metric name/, name);
  assert.throws(() => r.histogram('2hist_seconds', 'help', [], [1]), /invalid metric name/);
});

test('metric names may contain colons, underscores and digits after the first character', () => {
  const r = new Registry(10);
  r.counter('ns:sub:requests_total', 'help');
  r.counter(':leading_colon_total', 'help');
  r.gauge('_leading_underscore', 'help');
  r.histogram('job:latency_seconds2', 'help', [], [1]);
  const text = r.expose();
  for (const name of ['ns:sub:requests_total', ':leading_colon_total', '_leading_underscore', 'job:latency_seconds2']) {
    assert.ok(text.includes(`# TYPE ${name} `), name);
  }
});

test('a metric name registers only once', () => {
  const r = new Registry(10);
  r.counter('x_total', 'help');
  assert.throws(() => r.counter('x_total', 'help'), /registered twice/);
  r.gauge('y', 'help');
  assert.throws(() => r.histogram('y', 'help', [], [1]), /registered twice/);
});

test('counters must end in _total and non-counters must not', () => {
  const r = new Registry(10);
  assert.throws(() => r.counter('requests', 'help'), /must end in _total/);
  assert.throws(() => r.counter('requests_totals', 'help'), /must end in _total/);
  assert.throws(() => r.gauge('in_flight_total', 'help'), /only counters end in _total/);
  assert.throws(() => r.histogram('latency_total', 'help', [], [1]), /only counters end in _total/);
  r.counter('requests_total', 'help');
  r.gauge('in_flight', 'help');
  r.histogram('latency_seconds', 'help', [], [1]);
});

test('label names are validated: bad characters and a leading digit are rejected', () => {
  const r = new Registry(10);
  let i = 0;
  for (const label of ['bad-label', 'bad label', 'a:b', 'a.b', '1abc', '', 'é']) {
    assert.throws(() => r.counter(`c${i++}_total`, 'help', [label]), /invalid label name/, JSON.stringify(label));
    assert.throws(() => r.gauge(`g${i++}`, 'help', ['ok', label]), /invalid label name/, JSON.stringify(label));
    assert.throws(() => r.histogram(`h${i++}_seconds`, 'help', [label], [1]), /invalid label name/, JSON.stringify(label));
  }
  r.counter('fine_total', 'help', ['_x', 'a1', 'Upper_Case', 'le']);
});

test('label names starting with __ are reserved', () => {
  const r = new Registry(10);
  assert.throws(() => r.counter('a_total', 'help', ['__name__']), /invalid label name/);
  assert.throws(() => r.gauge('b', 'help', ['__x']), /invalid label name/);
  assert.throws(() => r.histogram('c_seconds', 'help', ['__'], [1]), /invalid label name/);
  r.counter('d_total', 'help', ['_single_leading_underscore']);
});

test('duplicate label names are rejected', () => {
  const r = new Registry(10);
  assert.throws(() => r.counter('a_total', 'help', ['x', 'y', 'x']), /duplicate label name/);
  assert.throws(() => r.gauge('b', 'help', ['z', 'z']), /duplicate label name/);
  assert.throws(() => r.histogram('c_seconds', 'help', ['w', 'w'], [1]), /duplicate label name/);
});

test("'le' is reserved for histograms: a histogram may not declare it, other kinds may", () => {
  const r = new Registry(10);
  assert.throws(() => r.histogram('a_seconds', 'help', ['le'], [1]), /"le" is reserved/);
  assert.throws(() => r.histogram('b_seconds', 'help', ['route', 'le'], [1]), /"le" is reserved/);
  r.counter('c_total', 'help', ['le']);
  r.gauge('d', 'help', ['le']);
});

test('histogram buckets must be non-empty, finite and strictly increasing', () => {
  const r = new Registry(10);
  const bad: number[][] = [[], [1, 1], [2, 1], [0.1, 0.5, 0.3], [1, Infinity], [-Infinity, 1], [NaN], [1, NaN, 2]];
  for (const buckets of bad) {
    assert.throws(() => r.histogram('h_seconds', 'help', [], buckets), /buckets must be finite and strictly increasing/, JSON.stringify(buckets));
  }
  r.histogram('h_seconds', 'help', [], [-1, 0, 0.5, 1e9]);
});

// ---- exposition format ----

test('label values are escaped backslash first, then double quote and newline', () => {
  // Raw characters in, raw characters out: a \ " b \ n c \ \  →  a \\ \" b \\ n c \\ \\
  assert.equal(escapeLabelValue(String.raw`a\"b\nc\\`), String.raw`a\\\"b\\nc\\\\`);
  // With a real newline: a \ " b <LF> c \  →  a \\ \" b \n c \\
  assert.equal(escapeLabelValue('a\\"b\nc\\'), String.raw`a\\\"b\nc\\`);
  // A backslash followed by n is not a newline, and escaping the backslash first keeps them apart.
  assert.equal(escapeLabelValue('\\n'), String.raw`\\n`);
  assert.equal(escapeLabelValue('\n'), String.raw`\n`);
  assert.equal(escapeLabelValue('plain value: 1/2 @ {x}'), 'plain value: 1/2 @ {x}');

  const r = new Registry(10);
  const c = r.counter('escapes_total', 'help', ['v']);
  c.inc([String.raw`a\"b\nc\\`]);
  c.inc(['a\\"b\nc\\'], 2);
  const text = r.expose();
  assert.deepEqual(samples(text, 'escapes_total'), [String.raw`escapes_total{v="a\\\"b\\nc\\\\"} 1`, String.raw`escapes_total{v="a\\\"b\nc\\"} 2`]);
});

test('HELP text escapes backslash and newline (and leaves double quotes alone)', () => {
  const r = new Registry(10);
  r.gauge('helpful', 'a\\b\nc "quoted" \\n');
  const help = lines(r.expose()).filter((l) => l.startsWith('# HELP helpful '));
  assert.deepEqual(help, [String.raw`# HELP helpful a\\b\nc "quoted" \\n`]);
});

test('each family has one HELP and one TYPE line, before its samples, and its lines are contiguous', () => {
  const r = new Registry(10);
  const c = r.counter('req_total', 'Requests.', ['code']);
  const g = r.gauge('in_flight', 'In flight.', ['pool']);
  const h = r.histogram('lat_seconds', 'Latency.', ['route'], [0.1, 1]);
  // Interleave the recording so that insertion order alone would not group anything.
  c.inc(['200']);
  g.set(['a'], 3);
  h.observe(['/x'], 0.05);
  c.inc(['500']);
  g.set(['b'], 1);
  h.observe(['/y'], 2);
  c.inc(['200']);
  const text = r.expose();

  const seen = new Set<string>();
  let current: string | undefined;
  let kind: string | undefined;
  let expectType = false;
  for (const line of lines(text)) {
    if (line.startsWith('# HELP ')) {
      assert.equal(expectType, false, `HELP without TYPE before: ${line}`);
      const name = line.split(' ')[2]!;
      assert.ok(!seen.has(name), `${name}: a second HELP, or the family's lines are not contiguous`);
      seen.add(name);
      current = name;
      expectType = true;
      continue;
    }
    if (line.startsWith('# TYPE ')) {
      const [, , name, k] = line.split(' ');
      assert.ok(expectType && name === current, `TYPE ${name} must follow its own HELP`);
      kind = k;
      expectType = false;
      continue;
    }
    assert.ok(current !== undefined && !expectType, `a sample before its family's HELP and TYPE: ${line}`);
    const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)![0];
    const allowed = kind === 'histogram' ? [`${current}_bucket`, `${current}_sum`, `${current}_count`] : [current];
    assert.ok(allowed.includes(name), `${line} is not a sample of the family ${current} being exposed`);
  }
  assert.deepEqual([...seen], ['proxy_metric_series_overflow_total', 'req_total', 'in_flight', 'lat_seconds']);
  assert.equal(lines(text).filter((l) => l.startsWith('# TYPE ')).length, 4);
  assert.equal(valueOf(text, 'req_total{code="200"}'), '2');
});

test('histogram _bucket lines are cumulative in increasing le order, end with le="+Inf" equal to _count, then _sum and _count', () => {
  const r = new Registry(10);
  const buckets = [0.1, 0.5, 1, 5];
  const h = r.histogram('lat_seconds', 'help', ['route'], buckets);
  for (const v of [0.05, 0.3, 0.3, 0.7, 3, 3, 3, 9, 100]) h.observe(['/a'], v);
  h.observe(['/b'], 0.2);
  const text = r.expose();
  const family = lines(text).filter((l) => l.startsWith('lat_seconds'));
  for (const route of ['/a', '/b']) {
    const own = family.filter((l) => l.includes(`route="${route}"`));
    const bucketLines = own.slice(0, buckets.length + 1);
    const les = bucketLines.map((l) => /le="([^"]*)"/.exec(l)![1]);
    assert.deepEqual(les, [...buckets.map(String), '+Inf'], route);
    for (const l of bucketLines) assert.ok(l.startsWith('lat_seconds_bucket{'), l);
    const counts = bucketLines.map((l) => Number(l.split(' ').at(-1)));
    for (let i = 1; i < counts.length; i++) assert.ok(counts[i]! >= counts[i - 1]!, `cumulative: ${counts.join(',')}`);
    assert.ok(own[buckets.length + 1]!.startsWith(`lat_seconds_sum{route="${route}"} `), own[buckets.length + 1]);
    assert.ok(own[buckets.length + 2]!.startsWith(`lat_seconds_count{route="${route}"} `), own[buckets.length + 2]);
    assert.equal(own.length, buckets.length + 3);
    assert.equal(counts.at(-1), Number(own[buckets.length + 2]!.split(' ')[1]), '+Inf bucket equals _count');
  }
  // The same series, line by line: the series' lines are contiguous.
  assert.deepEqual(family.slice(0, 7), [
    'lat_seconds_bucket{route="/a",le="0.1"} 1',
    'lat_seconds_bucket{route="/a",le="0.5"} 3',
    'lat_seconds_bucket{route="/a",le="1"} 4',
    'lat_seconds_bucket{route="/a",le="5"} 7',
    'lat_seconds_bucket{route="/a",le="+Inf"} 9',
    'lat_seconds_sum{route="/a"} 119.35',
    'lat_seconds_count{route="/a"} 9',
  ]);
});

test('an observation exactly on a bucket boundary falls in that bucket (le is inclusive)', () => {
  const r = new Registry(10);
  const h = r.histogram('b_seconds', 'help', [], [1, 2, 5]);
  h.observe([], 2);
  h.observe([], 5);
  h.observe([], 1);
  const text = r.expose();
  assert.equal(valueOf(text, 'b_seconds_bucket{le="1"}'), '1');
  assert.equal(valueOf(text, 'b_seconds_bucket{le="2"}'), '2');
  assert.equal(valueOf(text, 'b_seconds_bucket{le="5"}'), '3');
  assert.equal(valueOf(text, 'b_seconds_bucket{le="+Inf"}'), '3');
});

test('the exposition ends with exactly one newline', () => {
  const r = new Registry(10);
  assert.ok(r.expose().endsWith('\n'));
  r.counter('a_total', 'help').inc([]);
  const text = r.expose();
  assert.ok(text.endsWith('a_total 1\n'), text);
  assert.ok(!text.endsWith('\n\n'));
  assert.ok(!text.includes('\n\n'), 'no blank lines');
});

// ---- recording ----

test('counter inc with a negative (or NaN) value throws and leaves the counter unchanged', () => {
  const r = new Registry(10);
  const c = r.counter('a_total', 'help', ['k']);
  c.inc(['x'], 5);
  assert.throws(() => c.inc(['x'], -1), /only goes up/);
  assert.throws(() => c.inc(['x'], -0.001), /only goes up/);
  assert.throws(() => c.inc(['x'], NaN), /only goes up/);
  c.inc(['x'], 0);
  assert.equal(valueOf(r.expose(), 'a_total{k="x"}'), '5');
});

test('a wrong number of label values throws', () => {
  const r = new Registry(10);
  const c = r.counter('c_total', 'help', ['a', 'b']);
  const g = r.gauge('g', 'help', ['a']);
  const h = r.histogram('h_seconds', 'help', ['a', 'b'], [1]);
  assert.throws(() => c.inc(['x']), /expected 2 label values/);
  assert.throws(() => c.inc(['x', 'y', 'z']), /expected 2 label values/);
  assert.throws(() => c.inc([]), /expected 2 label values/);
  assert.throws(() => g.set([], 1), /expected 1 label values/);
  assert.throws(() => g.add(['x', 'y'], 1), /expected 1 label values/);
  assert.throws(() => h.observe(['x'], 1), /expected 2 label values/);
  const z = r.counter('z_total', 'help');
  assert.throws(() => z.inc(['x']), /expected 0 label values/);
  // Nothing was created by the failed calls.
  assert.equal(c.size + g.size + h.size + z.size, 0);
});

test('series cap: past maxSeriesPerFamily, new label sets fold into one overflow series whose every label is __overflow__', () => {
  const N = 3;
  const r = new Registry(N);
  const c = r.counter('capped_total', 'help', ['who', 'what']);
  for (let i = 0; i < N; i++) c.inc([`w${i}`, 'x']);
  assert.equal(c.size, N);
  c.inc(['w3', 'x']); // the N+1-th distinct label set
  assert.equal(c.size, N + 1);
  for (let i = 4; i < 50; i++) c.inc([`w${i}`, `y${i}`], 2);
  assert.equal(c.size, N + 1, 'the family never grows past N + 1 (its overflow series)');
  const text = r.expose();
  assert.equal(OVERFLOW_VALUE, '__overflow__');
  assert.equal(valueOf(text, 'capped_total{who="__overflow__",what="__overflow__"}'), String(1 + 46 * 2));
  assert.equal(samples(text, 'capped_total').length, N + 1);
  // Each folded observation counts once, whatever its increment.
  assert.equal(valueOf(text, 'proxy_metric_series_overflow_total{metric="capped_total"}'), String(1 + 46));
});

test('series cap: a histogram and a gauge fold the same way, each counted under its own family name', () => {
  const r = new Registry(2);
  const h = r.histogram('capped_seconds', 'help', ['route'], [1]);
  const g = r.gauge('capped_gauge', 'help', ['pool']);
  for (const route of ['a', 'b', 'c', 'd', 'c']) h.observe([route], 0.5);
  for (const pool of ['a', 'b', 'c']) g.add([pool], 1);
  assert.equal(h.size, 3);
  assert.equal(g.size, 3);
  const text = r.expose();
  assert.equal(valueOf(text, 'capped_seconds_count{route="__overflow__"}'), '3');
  assert.equal(valueOf(text, 'capped_seconds_bucket{route="__overflow__",le="1"}'), '3');
  assert.equal(valueOf(text, 'capped_gauge{pool="__overflow__"}'), '1');
  assert.equal(valueOf(text, 'proxy_metric_series_overflow_total{metric="capped_seconds"}'), '3');
  assert.equal(valueOf(text, 'proxy_metric_series_overflow_total{metric="capped_gauge"}'), '1');
});

test('series cap: existing series keep being updated after the cap is reached', () => {
  const r = new Registry(2);
  const c = r.counter('kept_total', 'help', ['k']);
  const h = r.histogram('kept_seconds', 'help', ['k'], [1]);
  c.inc(['a']);
  c.inc(['b']);
  h.observe(['a'], 0.5);
  h.observe(['b'], 0.5);
  c.inc(['c']); // folds
  h.observe(['c'], 0.5); // folds
  c.inc(['a'], 10);
  c.inc(['b'], 20);
  h.observe(['a'], 2);
  const text = r.expose();
  assert.equal(valueOf(text, 'kept_total{k="a"}'), '11');
  assert.equal(valueOf(text, 'kept_total{k="b"}'), '21');
  assert.equal(valueOf(text, 'kept_total{k="__overflow__"}'), '1');
  assert.equal(valueOf(text, 'kept_seconds_count{k="a"}'), '2');
  assert.equal(valueOf(text, 'kept_seconds_sum{k="a"}'), '2.5');
  assert.equal(valueOf(text, 'proxy_metric_series_overflow_total{metric="kept_total"}'), '1');
  assert.equal(valueOf(text, 'proxy_metric_series_overflow_total{metric="kept_seconds"}'), '1');
});

test('onCollect callbacks run before each exposition, in registration order', () => {
  const r = new Registry(10);
  const g = r.gauge('collected', 'help');
  const calls: string[] = [];
  let n = 0;
  r.onCollect(() => {
    calls.push('first');
    g.set([], ++n);
  });
  r.onCollect(() => calls.push('second'));
  assert.deepEqual(calls, [], 'not called at registration');
  assert.equal(valueOf(r.expose(), 'collected'), '1');
  assert.equal(valueOf(r.expose(), 'collected'), '2');
  assert.deepEqual(calls, ['first', 'second', 'first', 'second']);
});

test('formatValue writes +Inf, -Inf, NaN, integers and floats the way Prometheus reads them', () => {
  assert.equal(formatValue(Infinity), '+Inf');
  assert.equal(formatValue(-Infinity), '-Inf');
  assert.equal(formatValue(NaN), 'NaN');
  assert.equal(formatValue(0), '0');
  assert.equal(formatValue(42), '42');
  assert.equal(formatValue(-3), '-3');
  assert.equal(formatValue(1234567890123), '1234567890123');
  assert.equal(formatValue(0.5), '0.5');
  assert.equal(formatValue(-2.25), '-2.25');
  assert.equal(formatValue(0.1 + 0.2), '0.30000000000000004');
  assert.equal(formatValue(1.5e-7), '1.5e-7');
  for (const v of [0.1, 1.5e-7, 123.456, 1e21, -7.25]) assert.equal(Number(formatValue(v)), v, 'round-trips');
});

test('the overflow counter is never capped, so overflowing many families cannot recurse', () => {
  const r = new Registry(1);
  const a = r.counter('a_total', 'a', ['x']);
  const b = r.counter('b_total', 'b', ['x']);
  for (const v of ['1', '2', '3']) {
    a.inc([v]);
    b.inc([v]);
  }
  const text = r.expose();
  assert.match(text, /proxy_metric_series_overflow_total\{metric="a_total"\} 2/);
  assert.match(text, /proxy_metric_series_overflow_total\{metric="b_total"\} 2/);
});

test('a wrong number of label values throws even when the joined key matches a series', () => {
  const r = new Registry(10);
  const none = r.counter('none_total', 'n');
  none.inc([]);
  assert.throws(() => none.inc(['']), /expected 0 label values/);
  const two = r.counter('two_total', 't', ['a', 'b']);
  two.inc(['x', 'y']);
  assert.throws(() => two.inc(['x\u0000y']), /expected 2 label values/);
});

test('label values containing the key separator cannot collide with another label set', () => {
  const r = new Registry(10);
  const d = r.counter('d_total', 'd', ['a', 'b']);
  d.inc(['p\u0000q', 'r']);
  d.inc(['p', 'q\u0000r']);
  const lines = r.expose().split('\n').filter((l) => l.startsWith('d_total{'));
  assert.equal(lines.length, 2);
  assert.ok(lines.every((l) => !l.includes('\u0000')));
});

test('a NaN observation is counted only in the +Inf bucket', () => {
  const r = new Registry(10);
  const h = r.histogram('h_seconds', 'h', [], [1, 2]);
  h.observe([], Number.NaN);
  const text = r.expose();
  assert.match(text, /h_seconds_bucket\{le="1"\} 0/);
  assert.match(text, /h_seconds_bucket\{le="2"\} 0/);
  assert.match(text, /h_seconds_bucket\{le="\+Inf"\} 1/);
});

test('the exposition in pieces is the same text as in one piece, each piece ending in a newline', () => {
  const r = new Registry(100);
  const c = r.counter('c_total', 'c', ['i']);
  const h = r.histogram('h_seconds', 'h', ['i'], [0.1, 1]);
  for (let i = 0; i < 50; i++) {
    c.inc([String(i)], i);
    h.observe([String(i)], i / 10);
  }
  const whole = r.expose();
  const pieces = [...r.exposeChunks(7)];
  assert.ok(pieces.length > 20);
  assert.ok(pieces.every((p) => p.endsWith('\n')));
  assert.equal(pieces.join(''), whole);
});

// ---- series TTL (the registry's coarse clock is the injected clock: tests set it with tick) ----

test('series TTL: after a flood past the cap has gone quiet for the TTL, a new identity gets its own series', () => {
  const r = new Registry(3, 1000);
  const c = r.counter('req_total', 'help', ['instance_id']);
  r.tick(0);
  for (let i = 0; i < 10; i++) c.inc([`flood-${i}`]);
  assert.equal(c.size, 4, 'three series and the overflow series');
  r.tick(1000);
  c.inc(['early']);
  assert.match(r.expose(), /req_total\{instance_id="__overflow__"\} 8/, 'within the TTL the flood still holds the cap');
  r.tick(2001);
  c.inc(['late']);
  const text = r.expose();
  assert.deepEqual(samples(text, 'req_total'), ['req_total{instance_id="late"} 1'], 'the flood and its overflow series are gone');
  assert.equal(c.size, 1);
});

test('series TTL: a series updated within the TTL stays, one not updated for longer leaves the exposition', () => {
  const r = new Registry(10, 1000);
  const c = r.counter('a_total', 'help', ['k']);
  const h = r.histogram('h_seconds', 'help', ['k'], [1]);
  r.tick(0);
  c.inc(['busy']);
  c.inc(['quiet']);
  h.observe(['quiet'], 0.5);
  r.tick(900);
  c.inc(['busy']);
  r.tick(1500);
  const text = r.expose();
  assert.deepEqual(samples(text, 'a_total'), ['a_total{k="busy"} 2']);
  assert.deepEqual(lines(text).filter((l) => l.startsWith('h_seconds')), []);
  assert.ok(text.includes('# TYPE h_seconds histogram'), 'the family itself stays, with no series');
});

test('series TTL: the coarse clock reads the time when it starts, so a series recorded before its first tick is as old as it is, not as old as the process (runCoarseClock)', () => {
  const r = new Registry(10, 1000);
  const c = r.counter('a_total', 'help', ['k']);
  const timer = runCoarseClock(r, () => 3_600_000); // a process up for an hour
  clearInterval(timer);
  c.inc(['early']);
  r.tick(3_600_100); // the first interval tick
  assert.deepEqual(samples(r.expose(), 'a_total'), ['a_total{k="early"} 1']);
  r.tick(3_601_001);
  assert.deepEqual(samples(r.expose(), 'a_total'), [], 'and it leaves once it is older than the TTL');
});

test('series TTL: a counter that comes back after expiring starts from zero', () => {
  const r = new Registry(10, 1000);
  const c = r.counter('a_total', 'help', ['k']);
  r.tick(0);
  c.inc(['x'], 41);
  assert.equal(valueOf(r.expose(), 'a_total{k="x"}'), '41');
  r.tick(5000);
  assert.deepEqual(samples(r.expose(), 'a_total'), []);
  c.inc(['x']);
  assert.equal(valueOf(r.expose(), 'a_total{k="x"}'), '1');
});

test('series TTL: a gauge holding a non-zero value never expires (streams in flight); at zero it expires like any series', () => {
  const r = new Registry(10, 1000);
  const g = r.gauge('in_flight', 'help', ['model']);
  r.tick(0);
  g.add(['long'], 1);
  g.add(['short'], 1);
  g.add(['short'], -1);
  r.tick(60_000);
  assert.deepEqual(samples(r.expose(), 'in_flight'), ['in_flight{model="long"} 1'], 'a stream open for longer than the TTL is still counted');
  g.add(['long'], -1);
  assert.equal(valueOf(r.expose(), 'in_flight{model="long"}'), '0', 'its close counts down from 1, not from 0');
  r.tick(62_000);
  assert.deepEqual(samples(r.expose(), 'in_flight'), []);
});

test('series TTL: a family without labels and the overflow counter never expire; TTL 0 expires nothing', () => {
  const r = new Registry(1, 1000);
  const plain = r.counter('plain_total', 'help');
  const c = r.counter('c_total', 'help', ['k']);
  r.tick(0);
  plain.inc([]);
  c.inc(['a']);
  c.inc(['b']); // folds
  r.tick(10_000);
  const text = r.expose();
  assert.equal(valueOf(text, 'plain_total'), '1');
  assert.equal(valueOf(text, 'proxy_metric_series_overflow_total{metric="c_total"}'), '1');
  assert.deepEqual(samples(text, 'c_total'), []);

  const never = new Registry(10, 0);
  const n = never.counter('n_total', 'help', ['k']);
  n.inc(['a']);
  never.tick(1e12);
  assert.equal(valueOf(never.expose(), 'n_total{k="a"}'), '1');
});

test('seriesExpired and clockTickMs: older than the TTL and holding no value; the clock ticks at a tenth of the TTL, 10 ms to 1 s', () => {
  assert.equal(seriesExpired(0, 1000, 1000, false), false, 'exactly the TTL is not yet older');
  assert.equal(seriesExpired(0, 1001, 1000, false), true);
  assert.equal(seriesExpired(0, 1001, 1000, true), false);
  assert.equal(seriesExpired(0, 1e12, 0, false), false);
  assert.equal(clockTickMs(3_600_000), 1000);
  assert.equal(clockTickMs(2000), 200);
  assert.equal(clockTickMs(50), 10);
});
