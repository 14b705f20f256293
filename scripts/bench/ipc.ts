// A tiny request/response layer over the IPC channel of a forked child (structured clone, so
// typed arrays cross as they are). The child exits when its parent goes away.
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

type Handler = (arg: any) => unknown;
interface Call {
  id: number;
  method: string;
  arg: unknown;
}
interface Reply {
  id: number;
  result?: unknown;
  error?: string;
}

/** In the child: answer the parent's calls with these handlers. */
export function serve(handlers: Record<string, Handler>): void {
  process.on('message', (m: Call) => {
    const handler = handlers[m.method];
    Promise.resolve()
      .then(() => {
        if (!handler) throw new Error(`no such method: ${m.method}`);
        return handler(m.arg);
      })
      .then(
        (result) => process.send!({ id: m.id, result } satisfies Reply),
        (err: unknown) => process.send!({ id: m.id, error: (err as Error)?.stack ?? String(err) } satisfies Reply),
      );
  });
  process.on('disconnect', () => process.exit(0));
  process.send!({ id: 0, result: 'ready' } satisfies Reply);
}

export interface Child {
  readonly pid: number;
  call<T = unknown>(method: string, arg?: unknown): Promise<T>;
  stop(): Promise<void>;
}

/** In the parent: fork one of the bench's .ts entry points (through tsx) and wait until it serves. */
export function startChild(file: string, root: string): Promise<Child> {
  const child: ChildProcess = fork(file, [], {
    cwd: root,
    execArgv: ['--import', 'tsx'],
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  let next = 1;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', (code, signal) => {
    for (const p of pending.values()) p.reject(new Error(`${file} exited (${code ?? signal})`));
    pending.clear();
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => reject(new Error(`${file} exited (${code ?? signal}) before it was ready`)));
    child.on('message', (m: Reply) => {
      if (m.id === 0) {
        resolve({
          pid: child.pid!,
          call<T>(method: string, arg?: unknown): Promise<T> {
            const id = next++;
            return new Promise<T>((res, rej) => {
              pending.set(id, { resolve: res as (v: unknown) => void, reject: rej });
              child.send({ id, method, arg } satisfies Call);
            });
          },
          async stop() {
            if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
            await exited;
          },
        });
        return;
      }
      const p = pending.get(m.id);
      if (!p) return;
      pending.delete(m.id);
      if (m.error !== undefined) p.reject(new Error(m.error));
      else p.resolve(m.result);
    });
  });
}

export const BENCH_DIR = __dirname;
export const entry = (name: string) => join(BENCH_DIR, name);
