// The process tests: the test files that start the bundle (node dist/proxy.js) as a child process,
// each with what of the process it needs. Every other test serves the proxy in its own process
// (startServe, test/support/serve-in-process.ts, which refuses rather than start the bundle) or
// runs a handler on the harness (test/support/harness.ts). test/unit/test-layers.test.ts holds
// this list to the files: a file that starts the bundle and is not here fails it, and so does a
// file here that no longer starts it.
//
// `how`: 'proxy-process' starts it through test/support/proxy-process.ts (startProxy,
// runProxyCommand, or startBothListeners with `bundle: true`), whose node PROXY_NODE names, so
// that npm run test:node-lines runs the file again on each supported Node line
// (scripts/node-lines.ts); 'command' runs the command line a user or a container would, with
// the `node` on PATH.

export interface ProcessTest {
  readonly file: string;
  readonly how: 'proxy-process' | 'command';
  /** What of the process the file tests, which the test's own process cannot stand for. */
  readonly why: string;
}

export const PROCESS_TESTS: readonly ProcessTest[] = [
  { file: 'test/integration/node-runtime.test.ts', how: 'proxy-process', why: 'the node that runs the bundle is the one PROXY_NODE names' },
  { file: 'test/integration/cli.test.ts', how: 'proxy-process', why: "each command's output and exit code as src/main.ts gives them" },
  { file: 'test/integration/lifecycle.test.ts', how: 'proxy-process', why: 'signals, the drain and the exit code' },
  { file: 'test/integration/forced-shutdown.test.ts', how: 'proxy-process', why: 'a second signal and the end of the grace cut what is open, and the process exits' },
  { file: 'test/integration/faults.test.ts', how: 'proxy-process', why: "the process's open descriptors after every fault (its footprint)" },
  { file: 'test/integration/large-body.test.ts', how: 'proxy-process', why: "the process's peak memory while a 256 MiB push streams through" },
  { file: 'test/integration/body-release.test.ts', how: 'proxy-process', why: 'a heap snapshot of the process (NODE_OPTIONS, a signal)' },
  { file: 'test/integration/gateway-tls.test.ts', how: 'proxy-process', why: 'NODE_TLS_REJECT_UNAUTHORIZED, which node reads only when the process starts' },
  { file: 'test/integration/git-e2e.test.ts', how: 'proxy-process', why: 'the workload configuration as the bundle prints it (git-config)' },
  { file: 'test/integration/revocations.test.ts', how: 'proxy-process', why: "revoke as the bundle runs it, and its usage error's exit code" },
  { file: 'test/integration/readme-blocks.test.ts', how: 'command', why: "README.md's shell blocks, the proxy started as they write it" },
  { file: 'test/integration/deploy-kit-serve.test.ts', how: 'command', why: "the proxy container's command as the deploy kit renders it" },
];
