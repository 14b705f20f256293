// The recorded-format stream transcripts (test/fixtures/sse/, written by
// scripts/e2e/write-sse-fixtures.ts) and a plain reading of their bytes on the test's side, with
// no code of the gateway: so the unit tests can check expected.json against what the files
// really stream before they check the stream readers against expected.json.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const SSE_FIXTURES = join(__dirname, '..', 'fixtures', 'sse');

/** expected.json, by file name; each protocol's test types its own entries. */
export function expectedSummaries<T>(): Record<string, T> {
  return JSON.parse(readFileSync(join(SSE_FIXTURES, 'expected.json'), 'utf8')) as Record<string, T>;
}

export interface RawEvent {
  /** The `event:` line's value. */
  readonly event: string | null;
  /** The `data:` line as JSON; null for an event the stream did not finish (a cut). */
  readonly data: Record<string, unknown> | null;
  /** The event's bytes, its blank line included. */
  readonly raw: string;
}

/** Splits a fixture (one `event:` and one `data:` line per event, `\n` line ends) into its events. */
export function rawEvents(text: string): RawEvent[] {
  return text
    .split(/(?<=\n\n)/)
    .filter((raw) => raw !== '')
    .map((raw) => {
      const event = /^event: (.*)$/m.exec(raw)?.[1] ?? null;
      const line = /^data: (.*)$/m.exec(raw)?.[1];
      let data: Record<string, unknown> | null = null;
      if (raw.endsWith('\n\n') && line !== undefined) data = JSON.parse(line) as Record<string, unknown>;
      return { event, data, raw };
    });
}
