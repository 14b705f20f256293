// What every scenario gets from the orchestrator.
import type { TestPki } from '../../test/support/tls.ts';
import type { Config } from './config.ts';
import type { Child } from './ipc.ts';
import type { Target } from './loadgen-proc.ts';
import type { FloorRun, NginxRun, ProxyRun } from './procs.ts';
import type { Row } from './report.ts';

export interface Ctx {
  cfg: Config;
  pki: TestPki;
  token: string;
  seed: string;
  /** The upstream process and the load-generator process. */
  up: Child;
  lg: Child;
  gitPort: number;
  modelPort: number;
  /** Environment and arguments the proxy runs with (the start-up scenario and fresh proxies reuse them). */
  proxyEnv: Record<string, string>;
  proxyArgs: { args: string[]; listeners: string[] };
  proxy: ProxyRun;
  /** The floor: a bare node:http + https.request proxy (floor-proxy.mjs), measured beside the proxy. */
  floor: FloorRun;
  /** BENCH_BASELINE=file: another bundle (the code before a change), measured beside the proxy. */
  base: ProxyRun | undefined;
  nginx: NginxRun | undefined;
  git: Paths;
  model: Paths;
  /** The Messages API: direct with the key in x-api-key, or through the gateway's anthropic provider. */
  messages: Paths;
  /** Progress on stderr. */
  say(msg: string): void;
}

/** The paths a scenario compares: direct and the proxy always, the floor, a baseline bundle and nginx where they run. */
export interface Paths {
  direct: Target;
  proxy: Target;
  floor: Target;
  base: Target | undefined;
  nginx: Target | undefined;
}

/** Every path that runs, in the order they take turns: direct, floor, proxy, base, nginx. */
export function allPaths(p: Paths, withNginx = true): Target[] {
  return [p.direct, p.floor, p.proxy, ...(p.base ? [p.base] : []), ...(withNginx && p.nginx ? [p.nginx] : [])];
}

/** A row's figures by path, from a record keyed by path name. */
export function byPath<T>(values: Record<string, T>, pick: (v: T) => number): { direct?: number; proxy?: number; floor?: number; base?: number; nginx?: number } {
  const out: Record<string, number> = {};
  for (const k of ['direct', 'proxy', 'floor', 'base', 'nginx']) if (values[k] !== undefined) out[k] = pick(values[k]!);
  return out;
}

export interface ScenarioResult {
  rows: Row[];
  /** Everything measured, for bench.json. */
  data: Record<string, unknown>;
}
