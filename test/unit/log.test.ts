import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { asyncLineWriter, elapsedMs, jsonLineSink, LOG_BATCH_MS, recordFields } from '../../src/http/log.ts';

const dir = mkdtempSync(join(tmpdir(), 'log-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function withFile(name: string): { fd: number; read(): string; close(): void } {
  const path = join(dir, name);
  const fd = openSync(path, 'w');
  return { fd, read: () => readFileSync(path, 'utf8'), close: () => closeSync(fd) };
}

test('log lines are written asynchronously, in order, and drain() waits for all of them', async () => {
  const f = withFile('order.log');
  const w = asyncLineWriter(f.fd, 1 << 20);
  const expected: string[] = [];
  for (let i = 0; i < 5000; i++) {
    const line = `{"n":${i}}\n`;
    expected.push(line);
    w.write(line);
  }
  assert.equal(f.read(), '', 'nothing is written synchronously by write()');
  await w.drain();
  assert.equal(f.read(), expected.join(''));
  assert.equal(w.dropped(), 0);
  f.close();
});

test('lines are written as their UTF-8 bytes, whatever they hold and however long: text past the first block of pending bytes, a line longer than a block, non-ASCII and lone surrogates as Buffer.from writes them', async () => {
  const f = withFile('bytes.log');
  const w = asyncLineWriter(f.fd, 1 << 24);
  const lines = ['plain\n', `${'x'.repeat(70_000)}\n`, 'path…/caf\u00e9 \u{1F600}\n', 'lone \ud800 surrogate\n', ...Array.from({ length: 2000 }, (_, i) => `{"n":${i},"s":"${'é'.repeat(i % 50)}"}\n`)];
  for (const [i, line] of lines.entries()) w.write(line, i % 3 !== 0);
  await w.drain();
  assert.equal(readFileSync(join(dir, 'bytes.log')).equals(Buffer.from(lines.join(''))), true);
  f.close();
});

test('a reader too far behind loses new lines, counted, instead of growing memory', async () => {
  const f = withFile('drop.log');
  const w = asyncLineWriter(f.fd, 100);
  for (let i = 0; i < 20; i++) w.write('0123456789\n'); // 11 bytes each: 9 fit in 100
  assert.equal(w.dropped(), 11);
  await w.drain();
  assert.equal(f.read(), '0123456789\n'.repeat(9));
  f.close();
});

test('flushSync writes pending lines at once, for an immediate exit', () => {
  const f = withFile('sync.log');
  const w = asyncLineWriter(f.fd, 1 << 20);
  w.write('a\n');
  w.write('b\n');
  w.flushSync();
  assert.equal(f.read(), 'a\nb\n');
  f.close();
});

test('a JSON log line starts with the time and ends with a newline', () => {
  const lines: string[] = [];
  jsonLineSink((l) => lines.push(l), { now: () => new Date('2026-01-02T03:04:05.678Z') })({ event: 'request', status: 200 });
  assert.equal(lines[0], '{"time":"2026-01-02T03:04:05.678Z","level":"info","event":"request","status":200}\n');
  assert.equal(elapsedMs(1, 2.0004567), 1);
  assert.equal(elapsedMs(0, 1.23456789), 1.235);
});

test('a log line holds each field as JSON.stringify writes it, the null and undefined ones left out, inside an object too', () => {
  const record = {
    event: 'request',
    text: 'a "quoted" \\ line\nwith \u2028 and \u0000',
    count: 42,
    fraction: 0.125,
    negative: -0,
    not_a_number: Number.NaN,
    yes: true,
    no: false,
    absent: null,
    unset: undefined,
    Upper9: null,
    nested: { kept: 'x', gone: null, list: [1, null, 'y'] },
    list: ['a', 'b'],
  };
  const lines: string[] = [];
  jsonLineSink((line) => lines.push(line), { now: () => new Date(0) })(record);
  const line = lines[0]!;
  assert.equal(line, `{"time":"1970-01-01T00:00:00.000Z","level":"info"${recordFields(record)}}\n`);
  assert.deepEqual(JSON.parse(line), {
    time: '1970-01-01T00:00:00.000Z',
    level: 'info',
    event: 'request',
    text: record.text,
    count: 42,
    fraction: 0.125,
    negative: 0,
    yes: true,
    no: false,
    nested: { kept: 'x', list: [1, null, 'y'] },
    list: ['a', 'b'],
  });
  // Field by field, exactly as JSON.stringify of the whole record less its null fields.
  const plain = { event: 'request', request_id: 'r-1', status: 200, duration_ms: 0.734, error: null, stream: false, limit: { tokens: 5, usd: null } };
  assert.equal(recordFields(plain), JSON.stringify({ ...plain, error: undefined, limit: { tokens: 5 } }).replace(/^\{/, ',').slice(0, -1));
});

test('an access-log line waits LOG_BATCH_MS for others to share its write, no longer; any other line goes out at the next turn and takes the waiting ones with it', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'setImmediate'] });
  // The writes as the writer starts them, each done when the test says (no file, no thread pool: nothing to wait for).
  const writes: { text: string; done: () => void }[] = [];
  const w = asyncLineWriter(1, 1 << 20, (_fd, buf, done) => void writes.push({ text: buf.toString('utf8'), done }));
  w.write('a\n', true);
  w.write('b\n', true);
  t.mock.timers.tick(LOG_BATCH_MS - 1);
  assert.equal(writes.length, 0, `nothing written before ${LOG_BATCH_MS} ms`);
  t.mock.timers.tick(1);
  assert.deepEqual(writes.map((x) => x.text), ['a\nb\n'], `both lines in one write at ${LOG_BATCH_MS} ms`);
  writes[0]!.done();
  // A line that may not wait goes at the next turn, with the access-log line waiting before it.
  w.write('c\n', true);
  w.write('d\n');
  t.mock.timers.tick(0);
  assert.deepEqual(writes.map((x) => x.text), ['a\nb\n', 'c\nd\n'], 'a prompt line takes the waiting ones with it, without the wait');
  // One write at a time: what is written meanwhile waits for the write in progress to end.
  w.write('e\n');
  t.mock.timers.tick(LOG_BATCH_MS);
  assert.equal(writes.length, 2, 'nothing else starts while a write is in progress');
  writes[1]!.done();
  t.mock.timers.tick(0);
  assert.deepEqual(writes.map((x) => x.text), ['a\nb\n', 'c\nd\n', 'e\n']);
});

test('access-log lines may wait for a shared write, other lines do not: both come out in the order written', async () => {
  const f = withFile('batched.log');
  const w = asyncLineWriter(f.fd, 1 << 20);
  w.write('a\n', true);
  w.write('b\n');
  w.write('c\n', true);
  assert.equal(f.read(), '', 'nothing is written synchronously by write()');
  await w.drain();
  assert.equal(f.read(), 'a\nb\nc\n');
  const batched: boolean[] = [];
  jsonLineSink((_line, b) => batched.push(b))({ event: 'request', status: 200 });
  jsonLineSink((_line, b) => batched.push(b))({ event: 'listening', listener: 'git' });
  assert.deepEqual(batched, [true, false], "a request's record may wait; a listening line may not");
  f.close();
});

test('lines given to writeLater are made at the end of the turn, together and in order, before any line written after them', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'setImmediate'] });
  const writes: { text: string; done: () => void }[] = [];
  const w = asyncLineWriter(1, 1 << 20, (_fd, buf, done) => void writes.push({ text: buf.toString('utf8'), done }));
  const made: string[] = [];
  const later = (text: string) => () => (made.push(text), text);
  w.writeLater(later('a\n'));
  w.writeLater(later('b\n'));
  assert.deepEqual(made, [], 'nothing is made while the turn goes on');
  t.mock.timers.tick(0);
  assert.deepEqual(made, ['a\n', 'b\n'], 'made together at the end of the turn, in order');
  assert.equal(writes.length, 0, 'made lines are access-log lines: they wait for the batch');
  t.mock.timers.tick(LOG_BATCH_MS);
  assert.deepEqual(writes.map((x) => x.text), ['a\nb\n']);
  writes[0]!.done();
  // A line written before the turn's end comes after the ones given to writeLater before it.
  w.writeLater(later('c\n'));
  w.write('d\n');
  assert.deepEqual(made, ['a\n', 'b\n', 'c\n'], 'the waiting line is made before the line written after it');
  t.mock.timers.tick(0);
  assert.deepEqual(writes.map((x) => x.text), ['a\nb\n', 'c\nd\n']);
});

test('drain and flushSync make the lines given to writeLater first: a shutdown loses none of the last records', async () => {
  const f = withFile('later.log');
  const w = asyncLineWriter(f.fd, 1 << 20);
  w.writeLater(() => 'a\n');
  w.flushSync();
  assert.equal(f.read(), 'a\n', 'flushSync, in the same turn, wrote the line not yet made');
  w.writeLater(() => 'b\n');
  await w.drain();
  assert.equal(f.read(), 'a\nb\n', 'drain waited for the line not yet made');
  f.close();
});

test('a line whose making throws is counted as dropped, and the lines made with it still go out', async () => {
  const f = withFile('later-throws.log');
  const w = asyncLineWriter(f.fd, 1 << 20);
  w.writeLater(() => 'a\n');
  w.writeLater(() => {
    throw new Error('a record that cannot be written');
  });
  w.writeLater(() => 'c\n');
  await w.drain();
  assert.equal(f.read(), 'a\nc\n');
  assert.equal(w.dropped(), 1);
  f.close();
});

test("with `later`, a request's line is made there, with the time it was written at; any other line is written at once", () => {
  const lines: string[] = [];
  const makes: (() => string)[] = [];
  let clock = Date.parse('2026-11-29T10:00:00.000Z');
  const sink = jsonLineSink((line) => lines.push(line), { now: () => new Date(clock), later: (make) => makes.push(make) });
  sink({ event: 'request', status: 200 });
  sink({ event: 'listening', listener: 'git' });
  assert.equal(makes.length, 1, "the request's line is given to later");
  assert.deepEqual(lines, ['{"time":"2026-11-29T10:00:00.000Z","level":"info","event":"listening","listener":"git"}\n']);
  clock += 5_000;
  assert.equal(makes[0]!(), '{"time":"2026-11-29T10:00:00.000Z","level":"info","event":"request","status":200}\n', 'the time is when the record was written, not when its line is made');
});
