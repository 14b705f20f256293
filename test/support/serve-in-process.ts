// `serve` started in the test's own process, behind the same ProxyProcess interface as the bundle
// (proxy-process.ts): the same arguments and environment, the same log lines (written by the
// same sink, so a test reads the same text), the same shutdown order, started by stop(). A
// bundle start costs about 0.2 s of CPU (0.1 s of it Node's own start); this costs a few
// milliseconds, and about a hundred tests start a proxy.
//
// It serves only an environment this process can stand for, and refuses any other, saying why:
// it never starts the bundle instead, so a test knows which it tested. Node reads its own
// variables (NODE_EXTRA_CA_CERTS, NODE_OPTIONS, NODE_TLS_REJECT_UNAUTHORIZED, ...) only when a
// process starts: a test's NODE_EXTRA_CA_CERTS must name a CA this process already trusts (npm
// test starts the test processes trusting the default test PKI's CA, scripts/test.mjs), and any
// other NODE_* variable needs the bundle. A test that needs the process itself (its exit code,
// signals other than SIGTERM and SIGINT, its descriptors or memory, its working directory, a
// variable node reads at start) starts the bundle with startProxy, and its file is listed in
// test/support/process-tests.ts.
import { readFileSync } from 'node:fs';
import { parseCommandLine, type ServeOptions } from '../../src/config/cli.ts';
import { jsonLineSink, type LineWriter } from '../../src/http/log.ts';
import type { LogEvent } from '../../src/run/log-events.ts';
import { logLevel } from '../../src/run/log-levels.ts';
import { startServing } from '../../src/run/serve.ts';
import { shutdownOrder } from '../../src/run/shutdown.ts';
import { proxyEnv, Records, serveArgs, type LogRecord, type ProxyProcess, type StartOptions } from './proxy-process.ts';

type Exit = { code: number | null; signal: NodeJS.Signals | null };

/**
 * Why `serve` here would not behave as a bundle started with `env`, or undefined when it would:
 * the variables node itself reads at start are this process's, not `env`'s (see above);
 * `trusted` is this process's NODE_EXTRA_CA_CERTS.
 */
export function differenceFromTheBundle(env: Readonly<Record<string, string>>, trusted: string | undefined): string | undefined {
  const read = Object.keys(env).find((name) => name.startsWith('NODE_') && name !== 'NODE_EXTRA_CA_CERTS');
  if (read !== undefined) return `${read} is read by node only when a process starts, so this process cannot stand for a bundle started with it: start the bundle (startProxy) and list the test file in test/support/process-tests.ts`;
  const wanted = env.NODE_EXTRA_CA_CERTS;
  if (wanted === undefined) return undefined;
  const runThrough = 'npm test and node scripts/test.mjs start the test processes trusting the default test PKI\'s CA (makeTestPki())';
  if (trusted === undefined) return `NODE_EXTRA_CA_CERTS names ${wanted}, and this test process trusts no extra CA: run the file through node scripts/test.mjs (${runThrough})`;
  let same: boolean;
  try {
    same = readFileSync(wanted, 'utf8') === readFileSync(trusted, 'utf8');
  } catch (err) {
    return `NODE_EXTRA_CA_CERTS: ${(err as Error).message}`;
  }
  return same ? undefined : `NODE_EXTRA_CA_CERTS names ${wanted}, a CA this test process does not trust (it trusts ${trusted}): ${runThrough}; a peer the proxy must not trust uses makeTestPki('other')`;
}

/** A proxy's log lines in a test process, handed to `write` as they come: none pending, none dropped. */
export function linesAsTheyCome(write: (line: string) => void): LineWriter {
  return { write, writeLater: (make) => write(make()), dropped: () => 0, drain: () => Promise.resolve(), flushSync: () => {} };
}

/** `serve` in this process as src/run/serve.ts starts it, its log lines handed to `write`: the shutdown order's exit is `exited`. */
export interface ServingHere {
  /** Start-up: resolves when every listener is up, rejects as the bundle would exit 1. */
  readonly started: Promise<void>;
  /** Starts the shutdown order (drain, then a cut on a second call). */
  stop(signal: NodeJS.Signals): void;
  /** Resolves with the code the order exits with. */
  readonly exited: Promise<number>;
  /** False from the order's exit on. */
  running(): boolean;
}

export function serveHere(options: ServeOptions, env: NodeJS.ProcessEnv, write: (line: string) => void): ServingHere {
  const lines = linesAsTheyCome(write);
  const log = jsonLineSink<LogEvent>(write, { levelOf: logLevel, minimum: options.logLevel });
  let running = true;
  let exit!: (code: number) => void;
  const exited = new Promise<number>((resolve) => (exit = resolve));
  const shutdown = shutdownOrder(options.shutdownGraceMs, log, lines, (code) => {
    running = false;
    exit(code);
  });
  return { started: startServing(options, env, log, lines, shutdown), stop: (signal) => shutdown.stop(signal), exited, running: () => running };
}

/** The proxy's `serve` in this process; an environment this process cannot stand for is refused (see above), never given the bundle. */
export async function startServe(opts: StartOptions): Promise<ProxyProcess> {
  if (opts.cwd !== undefined) throw new Error('startServe: a working directory of its own needs the bundle (startProxy)');
  const difference = differenceFromTheBundle(opts.env, process.env.NODE_EXTRA_CA_CERTS);
  if (difference !== undefined) throw new Error(`startServe: ${difference}`);
  const { args, listeners } = serveArgs(opts);
  const cli = parseCommandLine(args);
  if (cli.command !== 'serve') throw new Error(`startServe: ${cli.command} is not serve (runProxyCommand runs the other commands)`);

  let out = '';
  let exit!: (e: Exit) => void;
  const exited = new Promise<Exit>((resolve) => (exit = resolve));
  const records = new Records(exited, () => out);
  // Start-up writes its first lines before it first waits: the records are there for them.
  const here = serveHere(cli.options, proxyEnv(opts.env), (line) => {
    out += line;
    records.add(JSON.parse(line) as LogRecord);
  });
  void here.exited.then((code) => exit({ code, signal: null }));
  // What started so far is stopped by the order (the bundle would have exited 1), then the failure says what was output.
  const refused = async (message: string): Promise<never> => {
    const said = out;
    here.stop('SIGTERM');
    await exited;
    throw new Error(`${message}; output:\n${said}`);
  };

  await here.started.catch((err: Error) => refused(`proxy: ${err.message}`));
  const ports: Record<string, number> = {};
  for (const rec of records.all) if (rec.event === 'listening') ports[String(rec.listener)] = Number(String(rec.address).split(':').pop());
  // The listeners the test waits for, as startProxy waits for them: each must have announced itself.
  for (const name of listeners) {
    if (ports[name] === undefined) await refused(`startServe: the ${name} listener did not start`);
  }

  const waitForRecord = (match: (r: LogRecord) => boolean, what?: string) => records.wait(match, what);
  const signal = (sig: NodeJS.Signals): void => {
    if (sig !== 'SIGTERM' && sig !== 'SIGINT') throw new Error(`startServe: ${sig} needs the bundle (startProxy)`);
    if (here.running()) here.stop(sig);
  };
  const needsBundle = (what: string) => (): never => {
    throw new Error(`startServe: ${what} needs the bundle (startProxy)`);
  };
  return {
    get pid(): number {
      return needsBundle('a process id')();
    },
    ports,
    output: () => out,
    records: () => records.all,
    waitForRecord,
    peakRssBytes: needsBundle('peak memory'),
    stop(sig: NodeJS.Signals = 'SIGTERM') {
      signal(sig);
      return exited;
    },
    listeningPorts: needsBundle('the listening descriptors'),
    signal,
    exited,
  };
}
