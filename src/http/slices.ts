// A body in hand, written upstream in slices with backpressure (the shared forwarding core's upstream leg, ./forward.ts).

/**
 * The most a body in hand is written upstream in one write. Node's TLS layer keeps a buffer as
 * large as the largest single write for the life of the socket, pooled between calls too: one
 * `end(body)` of a 31 MiB model call left 31 MiB behind on that connection for as long as it lived.
 */
export const BODY_SLICE_BYTES = 64 * 1024;

/** What writeInSlices needs of a request: a writable with backpressure (a ClientRequest is one). */
export interface SliceSink {
  readonly destroyed: boolean;
  write(chunk: Buffer): boolean;
  end(chunk: Buffer): unknown;
  once(event: 'drain' | 'close', listener: () => void): unknown;
  off(event: 'drain', listener: () => void): unknown;
}

/**
 * Writes `bytes` in slices of at most BODY_SLICE_BYTES, the next slice only after 'drain' when
 * a write reports a full buffer, the last one with end(); `onWritten` counts each slice handed
 * over. A sink destroyed meanwhile (a failure, the client gone) gets nothing more, and the body
 * is let go then: only the one closure here refers to it, and only until the last slice is
 * handed over or the sink closes (SECURITY rule 52: nothing that lives as long as the stream
 * keeps it). An empty body is an end() with no bytes.
 */
export function writeInSlices(sink: SliceSink, bytes: Buffer, onWritten: (n: number) => void): void {
  let rest: Buffer | undefined = bytes;
  let at = 0;
  const next = (): void => {
    while (rest !== undefined) {
      if (sink.destroyed) break;
      const slice = rest.subarray(at, at + BODY_SLICE_BYTES);
      at += slice.length;
      onWritten(slice.length);
      if (at >= rest.length) {
        rest = undefined;
        sink.end(slice);
        return;
      }
      if (!sink.write(slice)) {
        sink.once('drain', next);
        return;
      }
    }
    rest = undefined;
  };
  sink.once('close', () => {
    rest = undefined;
    sink.off('drain', next);
  });
  next();
}
