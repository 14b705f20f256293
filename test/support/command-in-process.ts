// The commands run in this process as src/main.ts runs them (runCommand, the same function): the
// same stdout and stderr text and the same exit codes (2: usage, 1: any other), without starting
// `node dist/proxy.js` (about 0.2 s of CPU a start, which the tests that mint tokens or check the
// command line paid about eighty times a run). `serve` too, for a test of a start-up that is
// refused: its log lines are its stdout, as the bundle's are. A few tests in
// test/integration/cli.test.ts still run each command through the bundle, so that main.ts's own
// exit codes are checked.
import { parseCommandLine, usage, UsageError, type ServeOptions } from '../../src/config/cli.ts';
import { runCommand, type CommandContext } from '../../src/run/commands.ts';
import { proxyEnv } from './proxy-process.ts';
import { serveHere } from './serve-in-process.ts';

/** What runProxyCommand (test/support/proxy-process.ts) returns for the same arguments and environment (PATH and `env`). */
export async function runCommandInProcess(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  let stderr = '';
  const context: CommandContext = { env: proxyEnv(env), nowMs: () => Date.now(), notice: (line) => void (stderr += `${line}\n`) };
  let stdout = '';
  try {
    const cli = parseCommandLine(args);
    if (cli.command !== 'serve') return { code: 0, stdout: await runCommand(cli, context), stderr };
    await startRefused(cli.options, context.env, (line) => void (stdout += line));
  } catch (err) {
    if (err instanceof UsageError) return { code: 2, stdout, stderr: `${stderr}proxy: ${err.message}\n\n${usage()}\n` };
    return { code: 1, stdout, stderr: `${stderr}proxy: ${(err as Error)?.message ?? String(err)}\n` };
  }
  throw new Error('serve started: these arguments are not refused; serve them with startServe');
}

/**
 * Starts serve, which the caller expects to throw. Whatever it started (listeners, the store's
 * connection, timers) is then stopped through its shutdown order, whose lines are not output: the
 * bundle would have exited.
 */
async function startRefused(options: ServeOptions, env: NodeJS.ProcessEnv, write: (line: string) => void): Promise<void> {
  let ended = false;
  const here = serveHere(options, env, (line) => void (ended || write(line)));
  try {
    await here.started;
  } finally {
    ended = true;
    here.stop('SIGTERM');
    await here.exited;
  }
}
