// Log lines out to a file descriptor (stdout): the write itself, in a file of its own so that the
// rest of the logging (log.ts: the sinks, the records' fields, when lines go out) holds no
// capability module (scripts/kernel.json).
import { write as fsWrite, writeSync } from 'node:fs';

/** Writes all of `buf` to `fd` asynchronously (libuv's thread pool), then calls `done`. */
export function writeOut(fd: number, buf: Buffer, done: () => void, offset = 0): void {
  fsWrite(fd, buf, offset, buf.length - offset, null, (err, written) => {
    // A closed stdout (EPIPE) is not worth crashing over: the lines are lost either way.
    if (err || offset + written >= buf.length) return done();
    writeOut(fd, buf, done, offset + written);
  });
}

/** Writes all of `buf` to `fd` at once, synchronously: for an immediate exit. */
export function writeOutSync(fd: number, buf: Buffer): void {
  try {
    for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off);
  } catch {
    // stdout is gone; nothing more to do
  }
}
