// Runs the BUILT bundle (dist/proxy.js) as a child process, the way it runs in production,
// and collects everything it prints so that tests can assert on log lines and on secrets.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import assert from 'node:assert/strict';
import { join } from 'node:path';

// Test files run as CommonJS under tsx (package.json has no "type"), like the bundle.
export const ROOT = join(__dirname, '..', '..');
export const BUNDLE = join(ROOT, 'dist', 'proxy.js');
/**
 * The node that runs the bundle: PROXY_NODE when set (npm run test:node-lines sets it to each
 * supported line's binary, scripts/node-lines.ts), else the one running the tests.
 */
export const PROXY_NODE = process.env.PROXY_NODE || process.execPath;
/** Options for that node, before the bundle: PROXY_NODE_ARGS, split at spaces (test:node-lines makes deprecations throw). */
const PROXY_NODE_ARGS = (process.env.PROXY_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');

export type LogRecord = Record<string, unknown>;

/** A proxy's environment in tests: `env` and this process's PATH, nothing else of it. */
export const proxyEnv = (env: Readonly<Record<string, string>>): Record<string, string> => ({ PATH: process.env.PATH ?? '/usr/bin:/bin', ...env });

/** The log records a proxy printed, and waits for the ones still to come: one for the bundle and one for serve in this process. */
export class Records {
  readonly all: LogRecord[] = [];
  #waiters: { match: (r: LogRecord) => boolean; resolve: (r: LogRecord) => void }[] = [];

  /** `ended` resolves when no record can come any more; `output` is what the proxy said, for the error then. */
  constructor(
    private readonly ended: Promise<unknown>,
    private readonly output: () => string,
  ) {}

  add(rec: LogRecord): void {
    this.all.push(rec);
    for (let i = this.#waiters.length - 1; i >= 0; i--) {
      if (this.#waiters[i]!.match(rec)) this.#waiters.splice(i, 1)[0]!.resolve(rec);
    }
  }

  /** Resolves with the first record (already printed or still to come) that matches. */
  wait(match: (r: LogRecord) => boolean, what = 'log record'): Promise<LogRecord> {
    const seen = this.all.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      this.#waiters.push({ match, resolve });
      void this.ended.then((how) => reject(new Error(`the proxy ended (${JSON.stringify(how)}) before printing ${what}; output:\n${this.output()}`)));
    });
  }
}

export interface ProxyProcess {
  readonly pid: number;
  /** Ports of the listeners that announced themselves, by listener name. */
  readonly ports: Readonly<Record<string, number>>;
  /** Everything printed on stdout and stderr so far. */
  output(): string;
  records(): LogRecord[];
  /** Resolves with the first record (already printed or still to come) that matches. */
  waitForRecord(match: (r: LogRecord) => boolean, what?: string): Promise<LogRecord>;
  /** Peak resident set size of the proxy process so far, from /proc (Linux). */
  peakRssBytes(): number;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** TCP ports the process listens on, from /proc (Linux). */
  listeningPorts(): number[];
  /** Sends a signal without waiting. */
  signal(signal: NodeJS.Signals): void;
  /** Resolves when the process has exited, however that came about, and everything it printed has been read. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface StartOptions {
  env: Record<string, string>;
  args?: string[];
  /** Proxy listener names to wait for (default: ['git']); 'metrics' too, unless it is off. */
  listeners?: string[];
  /** The proxy's working directory (default: the test's); a heap snapshot is written there. */
  cwd?: string;
}

/** The arguments a proxy is started with, and the listeners its start waits for (startProxy, startServe). */
export function serveArgs(opts: Pick<StartOptions, 'args' | 'listeners'>): { args: string[]; listeners: string[] } {
  const args = [...(opts.args ?? ['--git-auth-listen', '127.0.0.1:0'])];
  // Many proxies run at once in tests: the metrics listener gets a free port too.
  if (!args.some((a) => a.startsWith('--metrics-listen'))) args.push('--metrics-listen', '127.0.0.1:0');
  const metricsOff = args.some((a, i) => a === '--metrics-listen=off' || (a === '--metrics-listen' && args[i + 1] === 'off'));
  return { args, listeners: [...(opts.listeners ?? ['git']), ...(metricsOff ? [] : ['metrics'])] };
}

export async function startProxy(opts: StartOptions): Promise<ProxyProcess> {
  const { args, listeners } = serveArgs(opts);
  const child = spawn(PROXY_NODE, [...PROXY_NODE_ARGS, BUNDLE, ...args], {
    env: proxyEnv(opts.env),
    cwd: opts.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let pending = '';
  // 'close', not 'exit': the process may have exited while its last lines are still in the pipe;
  // once stdout and stderr have ended, every line it wrote is in records() and output().
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal })),
  );
  const records = new Records(exited, () => out);
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (s: string) => (out += s));
  child.stdout.on('data', (s: string) => {
    out += s;
    pending += s;
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      let rec: LogRecord;
      try {
        rec = JSON.parse(line) as LogRecord;
      } catch {
        continue;
      }
      records.add(rec);
    }
  });
  const waitForRecord = (match: (r: LogRecord) => boolean, what?: string) => records.wait(match, what);

  const ports: Record<string, number> = {};
  // The metrics listener is announced last: once it is up, everything is.
  for (const name of listeners) {
    const rec = await waitForRecord((r) => r.event === 'listening' && r.listener === name, `the ${name} listening line`);
    ports[name] = Number(String(rec.address).split(':').pop());
  }

  return {
    pid: child.pid!,
    ports,
    output: () => out,
    records: () => records.all,
    waitForRecord,
    peakRssBytes() {
      const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      return Number(m?.[1] ?? 0) * 1024;
    },
    stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
    listeningPorts: () => listeningPorts(child.pid!),
    signal: (signal) => void child.kill(signal),
    exited,
  };
}

/** Runs a one-shot subcommand of the bundle (git-config, --help, ...) to completion. */
export function runProxyCommand(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(PROXY_NODE, [...PROXY_NODE_ARGS, BUNDLE, ...args], {
      env: proxyEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Fails if any of the given strings appears in text (pass derived forms, e.g. basic-auth base64, too). */
export function assertNoSecrets(text: string, secrets: readonly string[], where: string): void {
  for (const s of secrets) {
    if (s.length > 0 && text.includes(s)) throw new Error(`a secret leaked into ${where}`);
  }
}

/** A TCP socket of a process, from /proc/PID/net/tcp{,6}: its ports and its state (st: 01 established, 0A listen, ...). */
export interface TcpSocket {
  readonly localPort: number;
  readonly remotePort: number;
  readonly state: string;
}

/** The TCP sockets in the process's network namespace, by inode (a descriptor `socket:[INODE]` names one). */
export function tcpSockets(pid: number): Map<string, TcpSocket> {
  const byInode = new Map<string, TcpSocket>();
  const port = (address: string) => parseInt(address.split(':')[1]!, 16);
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue; // no IPv6 here
    }
    for (const row of text.split('\n').slice(1)) {
      // local_address is f[1] (HEXIP:HEXPORT), rem_address f[2], st f[3], inode f[9].
      const f = row.trim().split(/\s+/);
      if (f.length >= 10) byInode.set(f[9]!, { localPort: port(f[1]!), remotePort: port(f[2]!), state: f[3]! });
    }
  }
  return byInode;
}

/** The inode of each socket descriptor the process holds. */
function socketInodes(pid: number): string[] {
  const inodes: string[] = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.push(m[1]!);
    } catch {
      // closed while we looked
    }
  }
  return inodes;
}

/** The TCP ports a process listens on: its socket descriptors matched to LISTEN rows. */
function listeningPorts(pid: number): number[] {
  const tcp = tcpSockets(pid);
  return socketInodes(pid)
    .map((inode) => tcp.get(inode))
    .filter((s) => s?.state === '0A')
    .map((s) => s!.localPort)
    .sort((a, b) => a - b);
}

/** What a test file's end closes (a fake server: its close resolves once it is closed) or cleans up (a PKI, a git home). */
export interface TestParts {
  readonly close?: readonly ({ close(): unknown } | undefined)[];
  readonly cleanup?: readonly ({ cleanup(): void } | undefined)[];
  readonly dirs?: readonly (string | undefined)[];
}

/**
 * A test file's end, in the order it was started in reverse: the proxy stopped as an orchestrator
 * stops it (SIGTERM), then its upstreams closed, then homes, PKIs and directories removed, all of
 * them whatever failed before; then the proxy must have exited 0, its output shown if it did not.
 */
export async function stopProxyAndCleanUp(proxy: ProxyProcess | undefined, parts: TestParts): Promise<void> {
  const status = await proxy?.stop();
  await Promise.all((parts.close ?? []).map((part) => part?.close()));
  for (const part of parts.cleanup ?? []) part?.cleanup();
  for (const dir of parts.dirs ?? []) if (dir) rmSync(dir, { recursive: true, force: true });
  assert.equal(status?.code, 0, `the proxy exits 0 on SIGTERM; output:\n${proxy?.output()}`);
}
