// `serve` started in the test's own process, behind the same ProxyProcess interface as the bundle
// (proxy-process.ts): the same arguments and environment, the same log lines (written by the
// same sink, so a test reads the same text), the same shutdown order, started by stop(). A
// bundle start costs about 0.2 s of CPU (0.1 s of it Node's own start); this costs a few
// milliseconds, and about a hundred tests start a proxy.
//
// It serves here only when this process trusts the same CAs a bundle started with `env` would,
// beyond those both trust: Node reads NODE_EXTRA_CA_CERTS only when a process starts. npm test
// starts the test processes with the default test PKI's CA (scripts/test.mjs), which is what
// the tests' NODE_EXTRA_CA_CERTS names; otherwise (another CA, or a file run on its own) the
// bundle is started instead. A test that needs the process itself (its exit code, signals other
// than SIGTERM and SIGINT, its descriptors or memory, its working directory) uses startProxy.
import { readFileSync } from 'node:fs';
import { parseCommandLine, type ServeOptions } from '../../src/config/cli.ts';
import type { LineWriter } from '../../src/http/line-writer.ts';
import { jsonLineSink } from '../../src/http/log.ts';
import type { LogEvent } from '../../src/run/log-events.ts';
import { logLevel } from '../../src/run/log-levels.ts';
import { startServing } from '../../src/run/serve.ts';
import { shutdownOrder } from '../../src/run/shutdown.ts';
import { proxyEnv, Records, serveArgs, startProxy, type LogRecord, type ProxyProcess, type StartOptions } from './proxy-process.ts';

type Exit = { code: number | null; signal: NodeJS.Signals | null };

/**
 * Whether `serve` here would behave as a bundle started with `env`: the variables Node itself
 * reads at start (NODE_TLS_REJECT_UNAUTHORIZED, NODE_OPTIONS, ...) are this process's, not
 * `env`'s, so any of them but NODE_EXTRA_CA_CERTS needs the bundle; and that one must name the
 * CA this process trusts (see above).
 */
function servesHereLikeTheBundle(env: Readonly<Record<string, string>>): boolean {
  if (Object.keys(env).some((name) => name.startsWith('NODE_') && name !== 'NODE_EXTRA_CA_CERTS')) return false;
  return trustsLikeThisProcess(env);
}

/** Whether a bundle started with `env` would trust no CA this process does not (see above). */
function trustsLikeThisProcess(env: Readonly<Record<string, string>>): boolean {
  const wanted = env.NODE_EXTRA_CA_CERTS;
  if (wanted === undefined) return true;
  const here = process.env.NODE_EXTRA_CA_CERTS;
  if (here === undefined) return false;
  try {
    return readFileSync(wanted, 'utf8') === readFileSync(here, 'utf8');
  } catch {
    return false; // a file that cannot be read: the bundle is the one to say what it does then
  }
}

/** A proxy's log lines in a test process, handed to `write` as they come: none pending, none dropped. */
export function linesAsTheyCome(write: (line: string) => void): LineWriter {
  return { write, dropped: () => 0, drain: () => Promise.resolve(), flushSync: () => {} };
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

/** The proxy's `serve`, in this process when it trusts the same CAs (see above), else the bundle. */
export async function startServe(opts: StartOptions): Promise<ProxyProcess> {
  if (opts.cwd !== undefined) throw new Error('startServe: a working directory of its own needs the bundle (startProxy)');
  if (!servesHereLikeTheBundle(opts.env)) return startProxy(opts);
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
