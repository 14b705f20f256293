// Log lines out to a file descriptor (stdout), in a file of its own so that the rest of the
// logging (log.ts: the sinks, the records' fields) holds no capability module (scripts/kernel.json).
import { write as fsWrite, writeSync } from 'node:fs';

export interface LineWriter {
  write(line: string): void;
  /** Lines dropped because the reader fell more than the buffer limit behind. */
  dropped(): number;
  /** Resolves once everything written so far is out: before a normal exit. */
  drain(): Promise<void>;
  /** Writes whatever is pending, synchronously: for an immediate exit (order not guaranteed). */
  flushSync(): void;
}

/**
 * How long a line may wait for others to share its write. Each write is a hand-over to libuv's
 * thread pool and wakes the log's reader: at one call at a time, a write per line cost the
 * event loop about 150 µs a call on two shared cores (npm run profile, issue 44), more than
 * everything else the gateway does for a call.
 */
const LOG_BATCH_MS = 10;

/**
 * Log lines for a file descriptor that never block the event loop. On Linux a write to a pipe
 * from process.stdout is synchronous, so a slow log collector would stall every request. Here
 * lines collected within LOG_BATCH_MS go out in one asynchronous write (libuv's thread pool), in
 * order. If the reader falls more than `maxPendingBytes` behind, new lines are dropped and
 * counted instead of growing memory without bound.
 */
export function asyncLineWriter(fd: number, maxPendingBytes: number): LineWriter {
  let pending: string[] = [];
  let pendingBytes = 0;
  let writing = false;
  let dropped = 0;
  const drained: (() => void)[] = [];

  const writeAll = (buf: Buffer, offset: number, done: () => void): void => {
    fsWrite(fd, buf, offset, buf.length - offset, null, (err, written) => {
      // A closed stdout (EPIPE) is not worth crashing over: the lines are lost either way.
      if (err || offset + written >= buf.length) return done();
      writeAll(buf, offset + written, done);
    });
  };
  const flush = (): void => {
    if (writing || pending.length === 0) return;
    writing = true;
    const buf = Buffer.from(pending.join(''));
    pending = [];
    pendingBytes = 0;
    writeAll(buf, 0, () => {
      writing = false;
      flush();
      if (!writing && pending.length === 0) for (const d of drained.splice(0)) d();
    });
  };

  return {
    write(line) {
      if (pendingBytes + line.length > maxPendingBytes) {
        dropped++;
        return;
      }
      pending.push(line);
      pendingBytes += line.length;
      if (pending.length === 1 && !writing) setTimeout(flush, LOG_BATCH_MS);
    },
    dropped: () => dropped,
    drain() {
      if (!writing && pending.length === 0) return Promise.resolve();
      return new Promise((resolve) => {
        drained.push(resolve);
        flush();
      });
    },
    flushSync() {
      if (pending.length === 0) return;
      const buf = Buffer.from(pending.join(''));
      pending = [];
      pendingBytes = 0;
      try {
        for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off);
      } catch {
        // stdout is gone; nothing more to do
      }
    },
  };
}
