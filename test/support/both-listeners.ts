// The set-up that many integration files share: a test PKI, a git upstream and a model upstream
// on it, and the proxy serving both listeners (git and model gateway) in front of them,
// configured by environment as an operator would: served in the test's own process when it can
// (serve-in-process.ts), the bundle when asked (`bundle: true`). One call starts it all; `close()` takes it
// down in the reverse order (the proxy first, so that it never sees its upstreams vanish while
// it still serves, then the upstreams, then the PKI's files).
import { randomBytes } from 'node:crypto';
import { TEST_MODEL } from './harness.ts';
import { startModelUpstream, type ModelUpstream } from './model-upstream.ts';
import { startProxy, type ProxyProcess } from './proxy-process.ts';
import { startServe } from './serve-in-process.ts';
import { makeTestPki, type TestPki } from './tls.ts';
import { startUpstream, type TestUpstream } from './upstream.ts';

/** What the proxy's git listener needs of an upstream: where it is, and how to stop it. */
export interface GitUpstreamLike {
  readonly hostKey: string;
  close(): Promise<void>;
}

export interface BothListenersOptions<G extends GitUpstreamLike> {
  /** Flags after `--git-auth-listen 127.0.0.1:0 --model-gateway-listen 127.0.0.1:0`. */
  readonly args?: readonly string[];
  /**
   * Laid over the usual environment (git host A and its token, the model upstream's base URL,
   * key and allowed model, its CA); a variable set to undefined is left out.
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** A PKI the caller made (for servers of its own) and removes after close(); default: a new one that close() removes. */
  readonly pki?: TestPki;
  /** Starts the git upstream on the PKI (default: the recording HTTPS fake of upstream.ts). */
  readonly gitUpstream?: (pki: TestPki) => Promise<G>;
  /** Start the bundle (dist/proxy.js), for a test that reads the process itself (its descriptors, say). */
  readonly bundle?: boolean;
}

export interface BothListeners<G extends GitUpstreamLike> {
  readonly pki: TestPki;
  readonly gitUpstream: G;
  readonly modelUpstream: ModelUpstream;
  readonly proxy: ProxyProcess;
  /** Stops the proxy, then the upstreams, then removes the PKI if it made it; resolves with the proxy's exit. */
  close(): Promise<Awaited<ReturnType<ProxyProcess['stop']>>>;
}

/** The usual environment of a proxy in front of `git` (as host A) and `model`. */
function usualEnv(pki: TestPki, git: GitUpstreamLike, model: ModelUpstream): Record<string, string> {
  return {
    GIT_HOST_A: git.hostKey,
    GIT_HOST_A_TOKEN: `tok_${randomBytes(8).toString('hex')}`,
    NODE_EXTRA_CA_CERTS: pki.caFile,
    UPSTREAM_BASE_URL: model.baseUrl,
    UPSTREAM_API_KEY: `sk-${randomBytes(8).toString('hex')}`,
    UPSTREAM_ALLOWED_MODELS: TEST_MODEL,
    UPSTREAM_CA_FILE: pki.caFile,
  };
}

function overlay(base: Record<string, string>, over: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env = { ...base };
  for (const [name, value] of Object.entries(over)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

/** Starts the PKI, both upstreams and the bundle with both listeners; if any of it fails, what started is stopped. */
export async function startBothListeners(opts?: BothListenersOptions<TestUpstream>): Promise<BothListeners<TestUpstream>>;
export async function startBothListeners<G extends GitUpstreamLike>(opts: BothListenersOptions<G> & { gitUpstream: (pki: TestPki) => Promise<G> }): Promise<BothListeners<G>>;
export async function startBothListeners(opts: BothListenersOptions<GitUpstreamLike> = {}): Promise<BothListeners<GitUpstreamLike>> {
  const pki = opts.pki ?? makeTestPki();
  const removePki = () => (opts.pki ? undefined : pki.cleanup());
  const startGit = opts.gitUpstream ?? startUpstream;
  const started = await Promise.allSettled([startGit(pki), startModelUpstream(pki)] as const);
  const [git, model] = started;
  const stopUpstreams = () => Promise.all(started.map((s) => (s.status === 'fulfilled' ? s.value.close() : undefined)));
  if (git.status === 'rejected' || model.status === 'rejected') {
    await stopUpstreams();
    removePki();
    throw git.status === 'rejected' ? git.reason : (model as PromiseRejectedResult).reason;
  }
  let proxy: ProxyProcess;
  try {
    proxy = await (opts.bundle ? startProxy : startServe)({
      env: overlay(usualEnv(pki, git.value, model.value), opts.env ?? {}),
      args: ['--git-auth-listen', '127.0.0.1:0', '--model-gateway-listen', '127.0.0.1:0', ...(opts.args ?? [])],
      listeners: ['git', 'model'],
    });
  } catch (err) {
    await stopUpstreams();
    removePki();
    throw err;
  }
  return {
    pki,
    gitUpstream: git.value,
    modelUpstream: model.value,
    proxy,
    async close() {
      const exit = await proxy.stop();
      await stopUpstreams();
      removePki();
      return exit;
    },
  };
}
