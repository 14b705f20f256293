// Reading what a process holds: it writes a heap snapshot on SIGUSR2 (started with
// NODE_OPTIONS=--heapsnapshot-signal=SIGUSR2, in a directory of the caller's choosing); a
// snapshot begins with a full collection and holds only reachable objects.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Signals `signal()` and resolves with the path of the new, complete snapshot in `dir`. */
export async function takeHeapSnapshot(dir: string, signal: () => void): Promise<string> {
  const before = new Set(readdirSync(dir));
  signal();
  for (let i = 0; i < 600; i++) {
    await sleep(100);
    const fresh = readdirSync(dir).filter((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    if (fresh.length !== 1) continue;
    const file = join(dir, fresh[0]!);
    try {
      JSON.parse(readFileSync(file, 'utf8'));
      return file;
    } catch {
      // still being written
    }
  }
  throw new Error(`no complete heap snapshot in ${dir} after 60 s`);
}

/** How many array buffers of at least `minBytes` a heap snapshot holds (all reachable). */
export function largeArrayBuffers(file: string, minBytes: number): number {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as { snapshot: { meta: { node_fields: string[] } }; nodes: number[]; strings: string[] };
  const fields = snap.snapshot.meta.node_fields;
  const [name, size, width] = [fields.indexOf('name'), fields.indexOf('self_size'), fields.length];
  let n = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    if (snap.nodes[i + size]! >= minBytes && snap.strings[snap.nodes[i + name]!] === 'system / JSArrayBufferData') n++;
  }
  return n;
}
