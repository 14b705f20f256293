// Log lines out to a file descriptor (stdout), in a file of its own so that the rest of the
// logging (log.ts: the sinks, the records' fields) holds no capability module (scripts/kernel.json).
import { write as fsWrite, writeSync } from 'node:fs';

/**
 * How long a request's line may wait for others to share its write. A write is a hand-over to
 * libuv's thread pool, a system call and a wake-up of the log's reader, whatever it carries: at
 * one call at a time a write per line cost about 150 µs of the event loop a call on two shared
 * cores (npm run profile, issue 44), more than all the gateway's own steps, and a write every
 * 10 ms still about 6% of a call's CPU against one every 100 ms.
 */
const LOG_BATCH_MS = 100;

export interface LineWriter {
  /**
   * `batched`: the line may wait up to LOG_BATCH_MS to share a write (the access log, a line per
   * request); otherwise it goes out at the next turn of the event loop, with every line before it.
   */
  write(line: string, batched?: boolean): void;
  /** Lines dropped because the reader fell more than the buffer limit behind. */
  dropped(): number;
  /** Resolves once everything written so far is out: before a normal exit. */
  drain(): Promise<void>;
  /** Writes whatever is pending, synchronously: for an immediate exit (order not guaranteed). */
  flushSync(): void;
}

/**
 * Log lines for a file descriptor that never block the event loop. On Linux a write to a pipe
 * from process.stdout is synchronous, so a slow log collector would stall every request. Here
 * lines go out in asynchronous writes (libuv's thread pool), in order, one write at a time: the
 * access log's lines at most one write every LOG_BATCH_MS, any other line at the next turn of the
 * loop. If the reader falls more than `maxPendingBytes` behind, new lines are dropped and counted
 * instead of growing memory without bound.
 */
export function asyncLineWriter(fd: number, maxPendingBytes: number): LineWriter {
  let pending: string[] = [];
  let pendingBytes = 0;
  let writing = false;
  /** A line that may not wait is pending: the next write goes at the next turn, not at the batch's time. */
  let prompt = false;
  let dropped = 0;
  const drained: (() => void)[] = [];

  const writeAll = (buf: Buffer, offset: number, done: () => void): void => {
    fsWrite(fd, buf, offset, buf.length - offset, null, (err, written) => {
      // A closed stdout (EPIPE) is not worth crashing over: the lines are lost either way.
      if (err || offset + written >= buf.length) return done();
      writeAll(buf, offset + written, done);
    });
  };
  let batchTimer: NodeJS.Timeout | undefined;
  let soon: NodeJS.Immediate | undefined;
  const soonFlush = (): void => {
    soon = undefined;
    if (prompt) flush(); // else a write since took the line that asked for this turn
  };
  /** The next write, when nothing is being written: at the next turn for a prompt line, else at the batch's time. */
  const schedule = (): void => {
    if (prompt) soon ??= setImmediate(soonFlush);
    else batchTimer ??= setTimeout(flush, LOG_BATCH_MS);
  };
  const flush = (): void => {
    clearTimeout(batchTimer);
    batchTimer = undefined;
    if (writing || pending.length === 0) return;
    writing = true;
    prompt = false;
    const buf = Buffer.from(pending.join(''));
    pending = [];
    pendingBytes = 0;
    writeAll(buf, 0, () => {
      writing = false;
      if (pending.length === 0) for (const d of drained.splice(0)) d();
      else if (drained.length > 0) flush(); // someone waits for everything to be out
      else schedule();
    });
  };

  return {
    write(line, batched = false) {
      if (pendingBytes + line.length > maxPendingBytes) {
        dropped++;
        return;
      }
      pending.push(line);
      pendingBytes += line.length;
      if (!batched) prompt = true;
      if (!writing) schedule();
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
