// Every log event is a named type (src/run/log-events.ts, LogEvent); log-events.types.ts checks
// the types at compile time. These check what the type check cannot see: the event names written
// in src/ against the union's, that no module writes through an untyped sink, that the operator's
// list in docs/operations.md is the same, and what the sink writes of an event.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { jsonLineSink, type LogLevel, type LogSink } from '../../src/http/log.ts';
import type { LogEvent } from '../../src/run/log-events.ts';
import { logLevel, requestLevel } from '../../src/run/log-levels.ts';
import { modelRecord } from '../support/records.ts';
import { gitRecord } from '../../src/git/record.ts';
import { newExchange } from '../../src/http/forward.ts';
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
  const log: LogSink<LogEvent> = jsonLineSink((l) => lines.push(l), { now: () => new Date('2026-11-26T06:00:00.000Z') });
  log({ event: 'sa_keys_loaded', from: 'https://issuer.example/keys', kids: ['a'], skipped: undefined });
  log({ event: 'limits_store', state: 'up', store: '127.0.0.1:6379', reason: undefined, failure_policy: 'closed' });
  log({ event: 'shutdown', signal: 'SIGTERM', phase: 'draining', grace_ms: 25000 });
  assert.deepEqual(lines, [
    '{"time":"2026-11-26T06:00:00.000Z","level":"info","event":"sa_keys_loaded","from":"https://issuer.example/keys","kids":["a"]}\n',
    '{"time":"2026-11-26T06:00:00.000Z","level":"info","event":"limits_store","state":"up","store":"127.0.0.1:6379","failure_policy":"closed"}\n',
    '{"time":"2026-11-26T06:00:00.000Z","level":"info","event":"shutdown","signal":"SIGTERM","phase":"draining","grace_ms":25000}\n',
  ]);
});

test('log levels: every line carries its level, and --log-level writes that level and the ones above it, nothing below', () => {
  const written = (minimum: LogLevel) => {
    const lines: string[] = [];
    const log = jsonLineSink<LogEvent>((l) => lines.push(l), { levelOf: logLevel, minimum });
    log({ event: 'pipelined_dropped', listener: 'git', requests: 2 });
    log(modelRecord());
    log(modelRecord({ status: 400, error: 'model_not_allowed' }));
    log(modelRecord({ status: 502, error: 'connect_refused' }));
    return lines.map((l) => (JSON.parse(l) as { level: string }).level);
  };
  assert.deepEqual(written('debug'), ['debug', 'info', 'warn', 'error']);
  assert.deepEqual(written('info'), ['info', 'warn', 'error']);
  assert.deepEqual(written('warn'), ['warn', 'error']);
  assert.deepEqual(written('error'), ['error']);
});

test('log levels: a request record is info; refused (4xx), left by its client (status 0, client_aborted) or cut by a shutdown is warn; a 5xx, or a 2xx the upstream then cut or failed, is error', () => {
  assert.equal(requestLevel({ status: 200, error: null }), 'info');
  assert.equal(requestLevel({ status: 401, error: undefined }), 'info', "git's credential challenge: no error");
  for (const [status, error] of [[400, 'model_not_allowed'], [429, 'rate_limited'], [403, 'repo_not_in_scope'], [0, 'client_aborted'], [200, 'client_aborted'], [200, 'shutdown'], [0, 'shutdown']] as const) assert.equal(requestLevel({ status, error }), 'warn', `${status} ${error}`);
  for (const [status, error] of [[502, 'connect_refused'], [504, 'response_timeout'], [500, 'internal_error'], [503, 'request_bodies_full'], [200, 'truncated'], [200, 'idle_timeout'], [200, 'overloaded_error']] as const) assert.equal(requestLevel({ status, error }), 'error', `${status} ${error}`);
  assert.equal(logLevel({ event: 'limits_store', state: 'down', store: 's', failure_policy: 'closed' }), 'error');
  assert.equal(logLevel({ event: 'limits_store', state: 'up', store: 's', failure_policy: 'closed' }), 'info');
});

test('log lines: a field whose value is null is left out (a request line loses its empty fields); a string that spells ,"x":null is written as it is', () => {
  const lines: string[] = [];
  const log = jsonLineSink<LogEvent>((l) => lines.push(l), { now: () => new Date('2026-11-26T06:00:00.000Z'), levelOf: logLevel });
  const rec = modelRecord({ refused_model: ',"x":null}', finish_reason: 'stop' });
  log(rec);
  const line = JSON.parse(lines[0]!) as Record<string, unknown>;
  assert.equal(line.refused_model, ',"x":null}');
  assert.equal(line.finish_reason, 'stop');
  for (const [field, value] of Object.entries(rec)) assert.equal(field in line, value !== null, field);
  assert.ok(!lines[0]!.replace(JSON.stringify(',"x":null}'), '').includes(':null'), lines[0]);
});

test('log records: the Logs section of docs/operations.md names every field of the model and the git record (a line leaves out its null fields, so the docs keep the whole schema)', () => {
  const doc = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
  const start = doc.indexOf('\n## Logs\n');
  const section = doc.slice(start, doc.indexOf('\n## ', start + 1));
  const git = gitRecord({ requestId: 'r', method: 'GET', target: '/', startedAt: 0, trace: undefined, span: undefined, host: 'h', route: 'info-refs', identity: undefined, tokenError: undefined, challenge: false, exchange: newExchange() }, { status: 200, error: undefined }, 1);
  const undocumented = [...Object.keys(modelRecord()), ...Object.keys(git)].filter((field) => !section.includes(`\`${field}\``));
  assert.deepEqual(undocumented, []);
});
