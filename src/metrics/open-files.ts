// The process's open file descriptors, for their gauge: the one read of the file system the
// metrics make (Linux's /proc/self/fd), in a file of its own so that the rest of metrics/ holds
// no capability module (scripts/kernel.json).
import { readdirSync } from 'node:fs';

/** How many descriptors the process has open, or undefined where /proc/self/fd cannot be read (not Linux). */
export function openFileCount(): number | undefined {
  try {
    return readdirSync('/proc/self/fd').length - 1; // minus the descriptor readdir used
  } catch {
    return undefined;
  }
}
