// Telemetry, not policy: the values at a few paths (say, response.usage) read out of a JSON
// document that arrives in pieces and may be megabytes long (the Responses API's final event),
// keeping only those values in memory. Nothing it reads changes what is forwarded (the relay
// forwards the bytes itself); the usage it reads is recorded and charged.
import { decodeKey, JsonTokenizer } from '../json/tokenizer.ts';

/**
 * Captures the values at the given dotted paths (object keys only, e.g. "response.usage") from
 * a JSON document pushed in pieces. Memory: the wanted values, each up to maxValueBytes (a value
 * over that is dropped), plus one key up to 256 bytes; never the rest of the document.
 */
export class JsonCapture {
  private readonly wanted: ReadonlySet<string>;
  /** Every proper prefix of a wanted path: the containers worth following. */
  private readonly prefixes: ReadonlySet<string>;
  private readonly maxValueBytes: number;
  private readonly tokenizer: JsonTokenizer;
  /** Path of each open container when it is on the way to a wanted path, else null. */
  private readonly paths: (string | null)[] = [];
  /** The path the next value will have, when wanted or on the way, else null. */
  private nextPath: string | null = '';
  /** Capture in progress: the path, the container depth it started at, the bytes so far. */
  private capturing: { path: string; depth: number; parts: Buffer[]; bytes: number; tooLarge: boolean } | undefined;
  private chunk: Buffer = Buffer.alloc(0);
  private chunkFrom = 0;
  private readonly values = new Map<string, unknown>();

  constructor(paths: readonly string[], maxValueBytes = 64 * 1024) {
    this.wanted = new Set(paths);
    const prefixes = new Set<string>(['']);
    for (const p of paths) {
      const parts = p.split('.');
      for (let k = 1; k < parts.length; k++) prefixes.add(parts.slice(0, k).join('.'));
    }
    this.prefixes = prefixes;
    this.maxValueBytes = maxValueBytes;
    this.tokenizer = new JsonTokenizer(
      {
        open: (_opensObject, at) => {
          const path = this.nextPath;
          if (path !== null && this.wanted.has(path) && !this.capturing) this.startCapture(path, at);
          this.paths.push(path !== null && this.prefixes.has(path) ? path : null);
          this.nextPath = null;
        },
        close: (end) => {
          this.paths.pop();
          if (this.capturing && this.capturing.depth === this.paths.length) this.endCapture(end);
          this.nextPath = null;
        },
        key: (raw) => {
          const parent = this.paths[this.paths.length - 1];
          if (parent === null || parent === undefined) {
            this.nextPath = null;
            return;
          }
          const path = parent === '' ? decodeKey(raw) : `${parent}.${decodeKey(raw)}`;
          this.nextPath = this.wanted.has(path) || this.prefixes.has(path) ? path : null;
        },
        scalarStart: (at) => {
          const path = this.nextPath;
          if (path !== null && this.wanted.has(path) && !this.capturing) this.startCapture(path, at);
          this.nextPath = null;
        },
        scalarEnd: (end) => {
          if (this.capturing && this.capturing.depth === this.paths.length) this.endCapture(end);
        },
      },
      256,
    );
  }

  push(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.chunk = bytes;
    this.chunkFrom = 0;
    this.tokenizer.push(bytes);
    if (this.capturing) this.keep(bytes.subarray(this.chunkFrom));
  }

  /** The captured values, parsed; a path that was absent, too large or not JSON is missing. */
  finish(): ReadonlyMap<string, unknown> {
    this.tokenizer.end(this.chunk.length);
    return this.values;
  }

  private startCapture(path: string, at: number): void {
    this.capturing = { path, depth: this.paths.length, parts: [], bytes: 0, tooLarge: false };
    this.chunkFrom = at;
  }

  private keep(bytes: Buffer): void {
    const c = this.capturing!;
    if (c.tooLarge) return;
    if (c.bytes + bytes.length > this.maxValueBytes) {
      c.tooLarge = true;
      c.parts = [];
      return;
    }
    // Copied: the chunk belongs to the relay and may be reused once this call returns.
    c.parts.push(Buffer.from(bytes));
    c.bytes += bytes.length;
  }

  private endCapture(end: number): void {
    const c = this.capturing!;
    this.keep(this.chunk.subarray(this.chunkFrom, end));
    this.capturing = undefined;
    this.chunkFrom = end;
    if (c.tooLarge) return;
    try {
      this.values.set(c.path, JSON.parse(Buffer.concat(c.parts, c.bytes).toString('utf8')));
    } catch {
      // not JSON after all: the value stays missing
    }
  }
}
