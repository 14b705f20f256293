// A request body that stops arriving. The head has its own timeout (--header-timeout) and an idle
// connection between requests its own (--idle-timeout); without this, a client that sends a
// complete head, one body byte and then nothing holds its connection, and a file descriptor, for
// as long as it likes. Shared by both listeners: the git proxy's streamed bodies (forward.ts) and
// the gateway's buffered ones (gateway/handler.ts).
import type { Readable } from 'node:stream';

/**
 * Calls `onStall` once when no byte of `body` has arrived for `ms` while the proxy was reading
 * it. Time the proxy itself is not reading (a paused body: backpressure from a slow upstream)
 * never counts against the client. Stops by itself when the body ends or is destroyed; 0 turns
 * it off. Call it where the body starts to be consumed: it listens to 'data'. Returns what
 * stops the watch before that (a reader that hands the body on to another).
 */
export function watchBodyIdle(body: Readable, ms: number, onStall: () => void): () => void {
  if (ms <= 0 || body.readableEnded) return () => {};
  let lastByteAt = performance.now();
  const onData = () => {
    lastByteAt = performance.now();
  };
  const check = () => {
    if (body.readableEnded || body.destroyed) return;
    const now = performance.now();
    // Paused by us: the client cannot send, so the clock restarts when we read again.
    if (body.isPaused()) lastByteAt = now;
    const left = lastByteAt + ms - now;
    if (left > 0) {
      timer = setTimeout(check, left);
      return;
    }
    stop();
    onStall();
  };
  let timer = setTimeout(check, ms);
  // Every listener goes with the watch: none may keep `onStall` (and what it refers to) alive
  // for the rest of the connection.
  const stop = () => {
    clearTimeout(timer);
    body.off('data', onData);
    body.off('end', stop);
    body.off('close', stop);
  };
  body.on('data', onData);
  body.once('end', stop);
  body.once('close', stop);
  return stop;
}
