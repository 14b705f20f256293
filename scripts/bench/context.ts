// What every scenario gets from the orchestrator.
import type { TestPki } from '../../test/support/tls.ts';
import type { Config } from './config.ts';
import type { Child } from './ipc.ts';
import type { Target } from './loadgen-proc.ts';
import type { NginxRun, ProxyRun } from './procs.ts';
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
  nginx: NginxRun | undefined;
  git: { direct: Target; proxy: Target; nginx: Target | undefined; baseline: Target | undefined };
  /** BENCH_BASELINE: another build of the proxy (its dist/proxy.js), for the pack scenario's before and after. */
  baseline: ProxyRun | undefined;
  model: { direct: Target; proxy: Target };
  /** The Messages API: direct with the key in x-api-key, or through the gateway's anthropic provider. */
  messages: { direct: Target; proxy: Target };
  /** Progress on stderr. */
  say(msg: string): void;
}

export interface ScenarioResult {
  rows: Row[];
  /** Everything measured, for bench.json. */
  data: Record<string, unknown>;
}
