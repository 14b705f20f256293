// Socket settings both listeners and the upstream pools share.

/**
 * Bytes a socket may buffer before backpressure (Node's default is 16 KiB). With the default, a
 * large push moves one 64 KiB read at a time and both processes wait on each other; a larger
 * mark keeps the pipe full. It is a threshold, not an allocation: idle connections cost nothing.
 */
import type { Socket } from 'node:net';

/** Connections a forced shutdown cut: a request on one ends as `shutdown`, not as a client that left. */
const cutByShutdown = new WeakSet<Socket>();

export function markCutByShutdown(socket: Socket): void {
  cutByShutdown.add(socket);
}

export function wasCutByShutdown(socket: Socket | null | undefined): boolean {
  return socket != null && cutByShutdown.has(socket);
}

export const STREAM_HIGH_WATER_MARK = 256 * 1024;
