// Start-up, the process-wide parts: the nets under the handlers, and the shutdown order the
// signals start (installed before any listener is announced).
import type { LineWriter, LogSink } from '../http/log.ts';
import type { LogEvent } from './log-events.ts';
import type { Listener } from '../http/server.ts';

/** At a forced shutdown, how long the calls cut get to record and charge themselves before the process exits. */
const FORCED_CUT_DEADLINE_MS = 1000;

/**
 * A bug reached by one request must not take every other request down with it: log it and keep
 * serving. Handlers catch their own errors; this is the net under them.
 */
export function installProcessNets(log: LogSink<LogEvent>): void {
  process.on('uncaughtException', (err: Error) => log({ event: 'uncaught_exception', error: err?.name ?? 'Error', detail: String(err?.message ?? err) }));
  process.on('unhandledRejection', (reason: unknown) => log({ event: 'unhandled_rejection', detail: String((reason as Error)?.message ?? reason) }));
}

/** The listeners a shutdown stops: the proxy listeners first, the metrics listener after them. */
export interface Shutdown {
  addProxy(listener: Listener): void;
  setMetrics(listener: Listener): void;
  /** The proxy listeners started so far. */
  readonly proxies: readonly Listener[];
  /**
   * Runs `release` as the order ends, just before the exit: for what would outlive the listeners
   * in a process that goes on (a test's): the store's connection, timers, the lag monitor.
   */
  onExit(release: () => void): void;
  /** Runs `flush` once the proxy listeners have drained, with what is left of the grace (the spans' last export). */
  onDrained(flush: (withinMs: number) => Promise<void>): void;
  /**
   * The first call drains (the proxy listeners stop accepting and get the grace period to finish,
   * then the metrics listener closes, then `exit(0)`); the second is a forced cut.
   */
  stop(signal: NodeJS.Signals): void;
}

/**
 * The shutdown order, with the end of the process given as `exit`: what SIGTERM and SIGINT start
 * (installShutdown), and what a test starts by calling `stop` on a proxy serving in its own process.
 */
export function shutdownOrder(graceMs: number, log: LogSink<LogEvent>, lines: LineWriter, exit: (code: number) => void): Shutdown {
  const proxies: Listener[] = [];
  const releases: (() => void)[] = [];
  const flushes: ((withinMs: number) => Promise<void>)[] = [];
  let metricsListener: Listener | undefined;
  let stopping = false;
  const end = () => {
    for (const release of releases.splice(0)) {
      try {
        release();
      } catch {
        // What was not released goes with the process; the exit is not held back for it.
      }
    }
    exit(0);
  };
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      // Forced: every connection is cut now, and each call still open ends as a cut one:
      // recorded, charged and its slot given back (bounded wait), before the process exits.
      log({ event: 'shutdown', signal, phase: 'forced' });
      void Promise.all(proxies.map((l) => l.cut(FORCED_CUT_DEADLINE_MS))).finally(() => {
        lines.flushSync();
        end();
      });
      return;
    }
    stopping = true;
    const began = performance.now();
    // The proxy listeners stop accepting at once (closed first, announced after: whoever reads
    // "draining" can no longer get a connection in). The metrics listener stays up until they
    // have drained, answering /healthz with 503, so probes and scrapes see the drain.
    const closing = proxies.map((l) => l.close(graceMs));
    metricsListener?.markDraining();
    log({ event: 'shutdown', signal, phase: 'draining', grace_ms: graceMs });
    Promise.all(closing)
      .then(() => Promise.all(flushes.map((flush) => flush(graceMs - (performance.now() - began)).catch(() => {}))))
      .then(() => metricsListener?.close(0))
      .then(() => {
        log({ event: 'shutdown', signal, phase: 'done' });
        return lines.drain();
      })
      .then(end);
  };
  return {
    addProxy: (listener) => void proxies.push(listener),
    setMetrics: (listener) => void (metricsListener = listener),
    proxies,
    onExit: (release) => void releases.push(release),
    onDrained: (flush) => void flushes.push(flush),
    stop,
  };
}

/** SIGTERM and SIGINT start the shutdown order, which ends the process. */
export function installShutdown(graceMs: number, log: LogSink<LogEvent>, lines: LineWriter): Shutdown {
  const order = shutdownOrder(graceMs, log, lines, (code) => process.exit(code));
  process.on('SIGTERM', order.stop);
  process.on('SIGINT', order.stop);
  return order;
}
