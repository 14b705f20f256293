// Caps on what one client may hold: open connections per listener (in total and per source
// address), and requests in progress per key (the git listener's workload instance). The
// counting is written once here; the listener and the git handler decide with it.

/** 0 means no cap. */
export interface ConnectionCaps {
  /** Client connections one listener holds at once. */
  readonly total: number;
  /** Client connections one source address holds on one listener. */
  readonly perClient: number;
}

export type ConnectionVerdict = 'accept' | 'total' | 'per_client';

/**
 * The metrics listener's own caps, whatever the proxy listeners' flags say: it answers only
 * monitoring (a few scrapers and the kubelet's probes, each holding one connection or
 * none), so a small total leaves it the descriptors a full proxy listener cannot take, and a
 * per-address cap keeps one client that can reach the port from holding all of it, so that
 * /healthz and scrapes still answer while the proxy listeners are full.
 */
export const METRICS_LISTENER_CAPS: ConnectionCaps = { total: 64, perClient: 16 };

/**
 * Pure: whether a new connection is accepted, given the connections the listener already holds
 * (in total, and from this client's address). The per-client cap is checked first, so that
 * the one client holding too many is the one named, even when the listener is also full.
 */
export function connectionVerdict(open: number, openFromClient: number, caps: ConnectionCaps): ConnectionVerdict {
  if (caps.perClient > 0 && openFromClient >= caps.perClient) return 'per_client';
  if (caps.total > 0 && open >= caps.total) return 'total';
  return 'accept';
}

/**
 * Counts held per key (a client address, a workload instance). A key with nothing held is
 * removed, so the map holds only keys with something in progress.
 */
export class KeyedCounts {
  readonly #held = new Map<string, number>();
  #total = 0;

  get total(): number {
    return this.#total;
  }

  of(key: string): number {
    return this.#held.get(key) ?? 0;
  }

  /** Takes one for `key` if it holds fewer than `limit` (0: no limit); false when full. */
  tryAcquire(key: string, limit: number): boolean {
    const held = this.of(key);
    if (limit > 0 && held >= limit) return false;
    this.#held.set(key, held + 1);
    this.#total++;
    return true;
  }

  /** Gives back one taken by tryAcquire. */
  release(key: string): void {
    const held = this.of(key);
    if (held === 0) return;
    if (held === 1) this.#held.delete(key);
    else this.#held.set(key, held - 1);
    this.#total--;
  }
}

/** How often at most a listener logs refused connections or handshakes (the rest are summed into the next line). */
const REFUSAL_LOG_INTERVAL_MS = 10_000;

/**
 * Refusals a client can cause at will (connections past a cap, failed TLS handshakes) are logged
 * at most once an interval, so that a flood of them cannot flood the log: the first at once,
 * then the next one an interval later, which says how many there were since the last line.
 */
export class LogInterval {
  #since = 0;
  #loggedAt = -Infinity;

  constructor(private readonly intervalMs: number = REFUSAL_LOG_INTERVAL_MS) {}

  /** One more refusal at `nowMs` (monotonic): how many to report in a line now (this one included), or undefined to stay quiet. */
  note(nowMs: number): number | undefined {
    this.#since++;
    if (nowMs - this.#loggedAt < this.intervalMs) return undefined;
    const count = this.#since;
    this.#since = 0;
    this.#loggedAt = nowMs;
    return count;
  }
}

/** Descriptors the process keeps for itself (log, files, DNS, the upstream pools' idle sockets). */
const RESERVED_DESCRIPTORS = 64;

/**
 * Pure: a start-up warning when the connection caps let clients take more file descriptors
 * than the process may open (a proxied request holds two: the client's and the upstream's; a
 * metrics connection one), so that the cap, not the descriptor limit, is what a client holding
 * connections meets first. Only the totals count: a per-client cap bounds one address, never
 * the sum. `softLimit` is RLIMIT_NOFILE (undefined: unknown, no warning); `metricsCaps` is
 * undefined when the metrics listener is off.
 */
export function descriptorWarning(softLimit: number | undefined, proxyListeners: number, caps: ConnectionCaps, metricsCaps: ConnectionCaps | undefined): string | undefined {
  if (softLimit === undefined || proxyListeners === 0) return undefined;
  const fix = `raise the limit (ulimit -n) or lower --max-connections`;
  if (caps.total === 0) return `--max-connections is 0 (no cap): clients may take all ${softLimit} file descriptors the process may open; ${fix}`;
  const metrics = metricsCaps?.total ?? 0;
  const needed = proxyListeners * caps.total * 2 + metrics + RESERVED_DESCRIPTORS;
  if (needed <= softLimit) return undefined;
  const fits = Math.max(1, Math.floor((softLimit - RESERVED_DESCRIPTORS - metrics) / (2 * proxyListeners)));
  return `--max-connections ${caps.total} on ${proxyListeners} proxy listener(s)${metricsCaps ? ` and the metrics listener's ${metrics}` : ''} may need ${needed} file descriptors, above the process limit of ${softLimit}: ${fix} to ${fits}`;
}

/** Pure: the soft "Max open files" limit from the text of /proc/self/limits (Linux), if there. */
export function softOpenFilesLimit(procLimits: string): number | undefined {
  const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(procLimits);
  if (!m || m[1] === 'unlimited') return undefined;
  return Number(m[1]);
}
