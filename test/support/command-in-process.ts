// The commands other than serve, run in this process as src/main.ts runs them: the same
// functions, the same stdout and stderr text and the same exit codes (2: usage, 1: any other),
// without starting `node dist/proxy.js` (about 0.2 s of CPU a start, which the tests that mint tokens
// or check the command line paid about eighty times a run). A few tests in test/integration/cli.test.ts still run each command
// through the bundle, so that main.ts's own dispatch and exit codes are checked.
import { parseCommandLine, usage, UsageError } from '../../src/config/cli.ts';
import { VERSION } from '../../src/config/version.ts';
import { agentConfigText, confirmStoreReset, gitConfig, mintToken, revoke, type CommandContext } from '../../src/run/commands.ts';

/** What runProxyCommand (test/support/proxy-process.ts) returns for the same arguments and environment (PATH and `env`). */
export async function runCommandInProcess(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const context: CommandContext = { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, nowMs: () => Date.now(), notice: (line) => void (stderr += `${line}\n`) };
  try {
    const cli = parseCommandLine(args);
    switch (cli.command) {
      case 'help':
        stdout += `${usage()}\n`;
        break;
      case 'version':
        stdout += `${VERSION}\n`;
        break;
      case 'git-config': {
        const config = gitConfig(cli, context);
        stdout += config.text;
        if (config.notice) stderr += `proxy: ${config.notice}\n`;
        break;
      }
      case 'agent-config':
        stdout += agentConfigText(cli, context);
        break;
      case 'mint-token':
        stdout += `${mintToken(cli, context)}\n`;
        break;
      case 'revoke':
        stdout += `${await revoke(cli, context)}\n`;
        break;
      case 'confirm-store-reset':
        stdout += `${await confirmStoreReset(cli, context)}\n`;
        break;
      case 'serve':
        throw new Error('serve starts listeners: run it with startProxy or runProxyCommand');
    }
    return { code: 0, stdout, stderr };
  } catch (err) {
    if (err instanceof UsageError) return { code: 2, stdout, stderr: `${stderr}proxy: ${err.message}\n\n${usage()}\n` };
    if (err instanceof Error && err.message.startsWith('serve starts listeners')) throw err;
    return { code: 1, stdout, stderr: `${stderr}proxy: ${(err as Error)?.message ?? String(err)}\n` };
  }
}
