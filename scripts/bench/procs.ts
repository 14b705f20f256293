// Processes the orchestrator starts and watches: the built bundle (as production runs it), nginx,
// and what /proc says about them (resident memory, peak, CPU time, open files).
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUNDLE } from '../../test/support/proxy-process.ts';
import { MODEL } from './shared.ts';

// ---- /proc -----------------------------------------------------------------------------

function status(pid: number, field: string): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? NaN) * 1024;
}
export const rssBytes = (pid: number) => status(pid, 'VmRSS');
export const peakRssBytes = (pid: number) => status(pid, 'VmHWM');

/** Resets the peak-RSS mark (VmHWM) to the current RSS; false where the kernel does not allow it. */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

let clockTicks: number | undefined;
/** User plus system CPU time of the process (all threads), in seconds. */
export function cpuSeconds(pid: number): number {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / clockTicks; // fields 14 and 15: utime, stime
}
/** Busy fraction of all CPUs between two readings of /proc/stat. */
export function cpuTotals(): { busy: number; total: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  const idle = f[3]! + (f[4] ?? 0);
  return { busy: total - idle, total };
}
export const openFiles = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;
export function maxOpenFiles(pid: number): number {
  const m = /Max open files\s+(\d+)/.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
  return Number(m?.[1] ?? 1024);
}

export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as AddressInfo).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

// ---- the proxy ---------------------------------------------------------------------------

export interface ProxyRun {
  readonly pid: number;
  readonly ports: Record<string, number>;
  /** ms from spawn() to the first and to the last expected `listening` line. */
  readonly firstListeningMs: number;
  readonly allListeningMs: number;
  /** Log lines printed so far (the orchestrator only counts them after start-up). */
  lines(): number;
  /** The last few KiB of output, for error messages. */
  tail(): string;
  stop(): Promise<void>;
}

let helpText: string | undefined;
/** The bundle's --help, read once: what this build supports. */
export function bundleHelp(): string {
  helpText ??= execFileSync(process.execPath, [BUNDLE, '--help'], { encoding: 'utf8' });
  return helpText;
}

/** The bundle's metrics listener (if this build has one) must not bind its default :9464. */
export function proxyArgs(): { args: string[]; listeners: string[] } {
  const args = ['--git-auth-listen', '127.0.0.1:0', '--model-gateway-listen', '127.0.0.1:0'];
  const listeners = ['git', 'model'];
  if (bundleHelp().includes('--metrics-listen')) {
    args.push('--metrics-listen', '127.0.0.1:0');
    listeners.push('metrics');
  }
  // The load generator is one source address holding thousands of connections: the caps (which
  // a real deployment keeps) would refuse it, and the bench measures the path, not the caps.
  if (bundleHelp().includes('--max-connections-per-client')) args.push('--max-connections', '0', '--max-connections-per-client', '0');
  return { args, listeners };
}

/** The environment every bench path's proxy starts with: the bench's git host and model upstream, its CA, the one model. */
export function proxyEnvFor(o: { gitPort: number; modelPort: number; token: string; caFile: string }): Record<string, string> {
  return {
    GIT_HOST_A: `127.0.0.1:${o.gitPort}`,
    GIT_HOST_A_TOKEN: o.token,
    NODE_EXTRA_CA_CERTS: o.caFile,
    UPSTREAM_BASE_URL: `https://127.0.0.1:${o.modelPort}/v1`,
    UPSTREAM_API_KEY: o.token,
    UPSTREAM_ALLOWED_MODELS: MODEL,
  };
}

/**
 * Starts `node [nodeArgs] dist/proxy.js args` (or another `bundle`) with only PATH and `env`, and resolves once every
 * listener in `listeners` has printed its `listening` line. Output is drained (a full pipe
 * would stall the proxy) and only counted after that.
 */
export function launchProxy(o: { env: Record<string, string>; args: string[]; listeners: string[]; nodeArgs?: string[]; timeoutMs?: number; bundle?: string; prefix?: string[] }): Promise<ProxyRun> {
  const t0 = performance.now();
  const [cmd, ...argv] = [...(o.prefix ?? []), process.execPath, ...(o.nodeArgs ?? []), o.bundle ?? BUNDLE, ...o.args];
  const child = spawn(cmd!, argv, {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...o.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let tail = '';
  let lines = 0;
  let pending = '';
  const waiting = new Set(o.listeners);
  const ports: Record<string, number> = {};
  let first = NaN;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const keepTail = (s: string) => (tail = (tail + s).slice(-8192));
  child.stderr.setEncoding('utf8').on('data', keepTail);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`proxy did not start within ${o.timeoutMs ?? 10_000} ms:\n${tail}`));
    }, o.timeoutMs ?? 10_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`proxy exited (${code ?? signal}) during start-up:\n${tail}`));
    });
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      keepTail(s);
      for (let i = s.indexOf('\n'); i >= 0; i = s.indexOf('\n', i + 1)) lines++;
      if (waiting.size === 0) return;
      pending += s;
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (!line.includes('"listening"')) continue;
        const rec = JSON.parse(line) as { event: string; listener: string; address: string };
        if (rec.event !== 'listening' || !waiting.delete(rec.listener)) continue;
        ports[rec.listener] = Number(rec.address.split(':').pop());
        if (Number.isNaN(first)) first = performance.now() - t0;
        if (waiting.size > 0) continue;
        clearTimeout(timer);
        pending = '';
        const all = performance.now() - t0;
        resolve({
          pid: child.pid!,
          ports,
          firstListeningMs: first,
          allListeningMs: all,
          lines: () => lines,
          tail: () => tail,
          stop: () => stopChild(child, exited),
        });
      }
    });
  });
}

async function stopChild(child: ChildProcess, exited: Promise<void>, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(t);
}

/** `node -e` that listens on a port and says so: what Node.js itself needs to start. */
export function launchBareNode(): Promise<number> {
  const t0 = performance.now();
  const child = spawn(process.execPath, ['-e', "require('node:net').createServer().listen(0,'127.0.0.1',function(){console.log('listening');this.close()})"], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      if (out.includes('listening')) resolve(performance.now() - t0);
    });
    child.once('exit', (code) => (out.includes('listening') ? undefined : reject(new Error(`bare node exited ${code}`))));
  });
}

// ---- the floor: a bare node:http + https.request proxy (floor-proxy.mjs) ----------------------

export interface FloorRun {
  readonly pid: number;
  readonly ports: { git: number; model: number; held: number };
  stop(): Promise<void>;
}

/** Starts floor-proxy.mjs with plain node (no loader, as the bundle runs) and reads its ports. */
export function launchFloor(o: { hostKey: string; gitPort: number; modelPort: number; token: string; caFile: string; nodeArgs?: string[]; prefix?: string[]; env?: Record<string, string> }): Promise<FloorRun> {
  const [cmd, ...argv] = [...(o.prefix ?? []), process.execPath, ...(o.nodeArgs ?? []), join(__dirname, 'floor-proxy.mjs')];
  const child = spawn(cmd!, argv, {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...o.env, FLOOR_CONFIG: JSON.stringify({ hostKey: o.hostKey, gitPort: o.gitPort, modelPort: o.modelPort, token: o.token, caFile: o.caFile }) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => {
      if (out.includes('\n')) return;
      out += s;
      if (!out.includes('\n')) return;
      resolve({ pid: child.pid!, ports: JSON.parse(out.split('\n')[0]!), stop: () => stopChild(child, exited) });
    });
    child.once('exit', (code) => reject(new Error(`the floor proxy exited (${code}) before it listened`)));
  });
}

// ---- nginx -------------------------------------------------------------------------------

export function nginxBinary(): string | undefined {
  for (const p of ['/usr/sbin/nginx', '/usr/bin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx']) if (existsSync(p)) return p;
  return undefined;
}
export function nginxVersion(bin: string): string {
  const r = spawnSync(bin, ['-v'], { encoding: 'utf8' });
  return `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().replace(/^nginx version: /, '') || 'nginx';
}

export interface NginxRun {
  readonly pid: number;
  readonly port: number;
  readonly config: string;
  stop(): Promise<void>;
}

/**
 * nginx as the reverse proxy a user would put there instead: one process (like the proxy's one
 * event loop), /<hostKey>/ mapped to the upstream's /, the credential header set, TLS verified
 * against the test CA, a keep-alive pool of 64, no buffering either way, no body size limit.
 */
export async function launchNginx(bin: string, o: { hostKey: string; upstreamPort: number; token: string; caFile: string }): Promise<NginxRun> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-nginx-'));
  for (const d of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, d));
  const port = await freePort();
  const config = `# generated by scripts/bench: nginx as the equivalent credential-injecting reverse proxy
daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_requests 1000000;
  upstream git_host {
    server 127.0.0.1:${o.upstreamPort};
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${port};
    client_max_body_size 0;
    location /${o.hostKey}/ {
      proxy_pass https://git_host/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host ${o.hostKey};
      proxy_set_header Authorization "Bearer ${o.token}";
      proxy_ssl_trusted_certificate ${o.caFile};
      proxy_ssl_verify on;
      proxy_ssl_name localhost;
      proxy_ssl_server_name on;
      proxy_ssl_session_reuse on;
      proxy_request_buffering off;
      proxy_buffering off;
    }
  }
}
`;
  writeFileSync(join(dir, 'nginx.conf'), config);
  const child = spawn(bin, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  const deadline = performance.now() + 5000;
  for (;;) {
    if (child.exitCode !== null) {
      const log = existsSync(join(dir, 'error.log')) ? readFileSync(join(dir, 'error.log'), 'utf8') : '';
      cleanup();
      throw new Error(`nginx exited (${child.exitCode}): ${err}${log}`);
    }
    const up = await new Promise<boolean>((resolve) => {
      const s = createConnection({ host: '127.0.0.1', port }, () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (up) break;
    if (performance.now() > deadline) {
      child.kill('SIGKILL');
      cleanup();
      throw new Error(`nginx did not listen within 5 s: ${err}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    pid: child.pid!,
    port,
    config,
    async stop() {
      await stopChild(child, exited, 'SIGQUIT');
      cleanup();
    },
  };
}
