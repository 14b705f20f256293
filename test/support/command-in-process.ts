// The commands other than serve, run in this process as src/main.ts runs them (runCommand, the
// same function): the same stdout and stderr text and the same exit codes (2: usage, 1: any
// other), without starting `node dist/proxy.js` (about 0.2 s of CPU a start, which the tests that
// mint tokens or check the command line paid about eighty times a run). A few tests in
// test/integration/cli.test.ts still run each command through the bundle, so that main.ts's own
// exit codes are checked.
import { parseCommandLine, usage, UsageError } from '../../src/config/cli.ts';
import { runCommand, type CommandContext } from '../../src/run/commands.ts';

/** What runProxyCommand (test/support/proxy-process.ts) returns for the same arguments and environment (PATH and `env`). */
export async function runCommandInProcess(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  let stderr = '';
  const context: CommandContext = { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, nowMs: () => Date.now(), notice: (line) => void (stderr += `${line}\n`) };
  try {
    const cli = parseCommandLine(args);
    if (cli.command !== 'serve') return { code: 0, stdout: await runCommand(cli, context), stderr };
  } catch (err) {
    if (err instanceof UsageError) return { code: 2, stdout: '', stderr: `${stderr}proxy: ${err.message}\n\n${usage()}\n` };
    return { code: 1, stdout: '', stderr: `${stderr}proxy: ${(err as Error)?.message ?? String(err)}\n` };
  }
  throw new Error('serve starts listeners: run it with startProxy or runProxyCommand');
}
