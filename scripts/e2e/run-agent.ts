// Runs one agent process to completion in a process group of its own, so that whatever it
// starts (shells, helper daemons, language servers) is killed with it, and optionally under
// `strace` to list every connection it attempts that does not go to loopback.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  ms: number;
  /** Connections to anything but loopback (and DNS queries), when traced; undefined when not. */
  egress: string[] | undefined;
}

/** Process groups still alive, so an interrupted run can kill them all. */
const liveGroups = new Set<number>();

export function killAllGroups(): void {
  for (const pgid of liveGroups) killGroup(pgid, 'SIGKILL');
}

function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

/** What strace records of an agent: connections and datagrams (DNS queries among them). */
const TRACED = 'trace=connect,sendto,sendmsg,sendmmsg';

let straceWorks: boolean | undefined;
/**
 * Whether strace can trace here: installed, and ptrace allowed (a container without
 * CAP_SYS_PTRACE or under a seccomp profile that blocks it runs `strace -V` fine but no trace).
 */
export function canTrace(): boolean {
  straceWorks ??= spawnSync('strace', ['-f', '-qq', '-e', 'trace=none', '-o', '/dev/null', '--', 'true'], { stdio: 'ignore', timeout: 10_000 }).status === 0;
  return straceWorks;
}

/**
 * Kills processes that left the agent's process group (a PTY child gets a session of its own)
 * but still run inside its sandbox: their working directory is under `root`, a directory this
 * run created, so they can only be the agent's.
 */
export function killStragglers(root: string): number {
  let killed = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cwd: string;
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      continue;
    }
    if (cwd !== root && !cwd.startsWith(`${root}/`)) continue;
    try {
      process.kill(Number(pid), 'SIGKILL');
      killed++;
    } catch {
      // Gone meanwhile.
    }
  }
  return killed;
}

export interface RunOptions {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  timeoutMs: number;
  /** Write an strace log of connect/sendto/sendmsg/sendmmsg here and report egress from it. */
  traceFile?: string;
  /** The run's own directory: processes still working in it afterwards are killed. */
  sandboxRoot: string;
}

export function runAgent(opts: RunOptions): Promise<RunResult> {
  const started = performance.now();
  const [command, args] = opts.traceFile
    ? ['strace', ['-f', '-qq', '-e', TRACED, '-s', '256', '-o', opts.traceFile, '--', opts.command, ...opts.args]]
    : [opts.command, opts.args];
  const child = spawn(command, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const pgid = child.pid!;
  liveGroups.add(pgid);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(pgid, 'SIGTERM');
    setTimeout(() => killGroup(pgid, 'SIGKILL'), 3000).unref();
  }, opts.timeoutMs);
  return new Promise((resolve, reject) => {
    child.once('error', (err) => {
      clearTimeout(timer);
      liveGroups.delete(pgid);
      reject(new Error(`could not start ${opts.command}: ${err.message}`));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      // The agent is done: anything it left behind in its group goes too.
      killGroup(pgid, 'SIGKILL');
      liveGroups.delete(pgid);
      killStragglers(opts.sandboxRoot);
      const egress = opts.traceFile && existsSync(opts.traceFile) ? egressOf(readFileSync(opts.traceFile, 'utf8')) : undefined;
      resolve({ code, signal, stdout, stderr, timedOut, ms: performance.now() - started, egress });
    });
  });
}

/** Loopback and the unspecified address are ours; everything else is egress. */
function isLoopback(addr: string): boolean {
  return addr.startsWith('127.') || addr === '::1' || addr === '::ffff:127.0.0.1' || addr === '0.0.0.0' || addr === '::';
}

/** strace's escaped string ("\6github\3com\0") back to bytes. */
function unescapeStrace(s: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    if (s[i] !== '\\') {
      bytes.push(s.charCodeAt(i));
      continue;
    }
    const rest = s.slice(i + 1);
    const octal = /^[0-7]{1,3}/.exec(rest);
    const hex = /^x([0-9a-fA-F]{2})/.exec(rest);
    if (hex) {
      bytes.push(parseInt(hex[1]!, 16));
      i += 3;
    } else if (octal) {
      bytes.push(parseInt(octal[0], 8));
      i += octal[0].length;
    } else {
      const c = rest[0]!;
      bytes.push(({ n: 10, t: 9, r: 13, v: 11, f: 12 } as Record<string, number>)[c] ?? c.charCodeAt(0));
      i += 1;
    }
  }
  return Buffer.from(bytes);
}

/** The question name of a DNS query packet. */
function dnsName(packet: Buffer): string | undefined {
  const labels: string[] = [];
  let i = 12;
  while (i < packet.length && packet[i]! > 0 && packet[i]! < 64) {
    labels.push(packet.subarray(i + 1, i + 1 + packet[i]!).toString('latin1'));
    i += 1 + packet[i]!;
  }
  return labels.length > 0 ? labels.join('.') : undefined;
}

/** Readable egress lines from an strace log: "connect 203.0.113.80:443", "DNS query github.com". */
export function egressOf(log: string): string[] {
  const found = new Set<string>();
  for (const line of log.split('\n')) {
    const v4 = /connect\(\d+, \{sa_family=AF_INET, sin_port=htons\((\d+)\), sin_addr=inet_addr\("([^"]+)"\)/.exec(line);
    const v6 = /connect\(\d+, \{sa_family=AF_INET6, sin6_port=htons\((\d+)\),.*?inet_pton\(AF_INET6, "([^"]+)"/.exec(line);
    const m = v4 ?? v6;
    if (m && !isLoopback(m[2]!)) found.add(m[1] === '53' ? `DNS server ${m[2]}:53` : `connect ${m[2]}:${m[1]}`);
    if (/^\d+ send(m?msg|to)\(/.test(line) && (line.includes('\\0\\0\\1\\0\\1') || line.includes('\\0\\0\\34\\0\\1'))) {
      // sendto has the packet as its second argument; sendmsg and sendmmsg in iov_base.
      const packets = /^\d+ sendto\(/.test(line) ? [/^\d+ sendto\(\d+, "((?:[^"\\]|\\.)*)"/.exec(line)?.[1]] : [...line.matchAll(/iov_base="((?:[^"\\]|\\.)*)"/g)].map((q) => q[1]);
      for (const packet of packets) {
        const name = packet === undefined ? undefined : dnsName(unescapeStrace(packet));
        if (name) found.add(`DNS query ${name}`);
      }
    }
  }
  return [...found];
}

/** The strace log next to a run's sandbox. */
export function traceFileFor(root: string): string {
  return join(root, 'connections.strace');
}
