// Every log event is a named type (src/run/log-events.ts, LogEvent); log-events.types.ts checks
// the types at compile time. These check what the type check cannot see: the event names written
// in src/ against the union's, that no module writes through an untyped sink, that the operator's
// list in docs/operations.md is the same, and what the sink writes of an event.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { jsonLineSink, type LogSink } from '../../src/http/log.ts';
import type { LogEvent } from '../../src/run/log-events.ts';
import { LOG_EVENT_NAMES } from './log-events.types.ts';

const ROOT = join(__dirname, '..', '..');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

const sources = sourceFiles(join(ROOT, 'src')).map((file) => ({ file: relative(ROOT, file), text: readFileSync(file, 'utf8') }));

// `event: '...'` as an object literal's or a type's field: at the start of a line or after `{`
// or `,` (not a parameter such as a stream's `once(event: 'drain')`).
const EVENT_FIELD = /(?:^|[{,])\s*(?:readonly\s+)?event: '([^']*)'/gm;

test('log events: every event name written in src/ is one of LogEvent, and each of LogEvent is written in src/', () => {
  const written = new Map<string, string>();
  for (const { file, text } of sources) for (const m of text.matchAll(EVENT_FIELD)) if (!written.has(m[1]!)) written.set(m[1]!, file);
  const names = new Set<string>(LOG_EVENT_NAMES);
  const unknown = [...written].filter(([name]) => !names.has(name)).map(([name, file]) => `${name} (${file})`);
  assert.deepEqual(unknown, [], 'add the event to LogEvent (src/run/log-events.ts), LOG_EVENT_NAMES and docs/operations.md');
  assert.deepEqual(LOG_EVENT_NAMES.filter((name) => !written.has(name)), [], 'an event nothing writes: remove it from LogEvent, LOG_EVENT_NAMES and docs/operations.md');
});

test('log events: no module of src/ writes through a sink of untyped records (LogSink<LogRecord> only where the JSON sink is made)', () => {
  const untyped = sources.filter(({ file, text }) => file !== join('src', 'http', 'log.ts') && /LogSink<LogRecord>|LogSink<\s*\{/.test(text)).map(({ file }) => file);
  assert.deepEqual(untyped, []);
  const main = sources.find(({ file }) => file === join('src', 'main.ts'))!.text;
  assert.match(main, /const log: LogSink<LogEvent> = jsonLineSink\(/, 'main.ts narrows the JSON sink to LogEvent');
});

test('log events: docs/operations.md lists exactly the events of LogEvent, in the same order', () => {
  const doc = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
  const start = doc.indexOf('\n## Logs\n');
  assert.ok(start >= 0, 'docs/operations.md has its Logs section');
  const end = doc.indexOf('\n## ', start + 1);
  const section = doc.slice(start, end < 0 ? undefined : end);
  const listed = [...section.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
  assert.deepEqual(listed, [...LOG_EVENT_NAMES]);
});

test('log events: the sink writes time, then the event\'s fields as given, and leaves out a field whose value is undefined', () => {
  const lines: string[] = [];
  const log: LogSink<LogEvent> = jsonLineSink((l) => lines.push(l), () => new Date('2026-11-26T06:00:00.000Z'));
  log({ event: 'sa_keys_loaded', from: 'https://issuer.example/keys', kids: ['a'], skipped: undefined });
  log({ event: 'limits_store', state: 'up', store: '127.0.0.1:6379', reason: undefined, failure_policy: 'closed' });
  log({ event: 'shutdown', signal: 'SIGTERM', phase: 'draining', grace_ms: 25000 });
  assert.deepEqual(lines, [
    '{"time":"2026-11-26T06:00:00.000Z","event":"sa_keys_loaded","from":"https://issuer.example/keys","kids":["a"]}\n',
    '{"time":"2026-11-26T06:00:00.000Z","event":"limits_store","state":"up","store":"127.0.0.1:6379","failure_policy":"closed"}\n',
    '{"time":"2026-11-26T06:00:00.000Z","event":"shutdown","signal":"SIGTERM","phase":"draining","grace_ms":25000}\n',
  ]);
});
