// Entry point, and the only file with top-level side effects: argv to a command, its output to
// stdout, its failure to an exit code (2: usage, 1: any other). What each command does is in
// src/run/ (serve.ts: start-up as its order; commands.ts: the others).
import { parseCommandLine, usage, UsageError } from './config/cli.ts';
import { asyncLineWriter, jsonLineSink, type LogSink } from './http/log.ts';
import type { LogEvent } from './run/log-events.ts';
import { logLevel } from './run/log-levels.ts';
import { runCommand, type CommandContext } from './run/commands.ts';
import { serve } from './run/serve.ts';

// Log lines never block the event loop; a reader 8 MiB behind loses lines, counted in metrics.
const logWriter = asyncLineWriter(1, 8 * 1024 * 1024);
const context: CommandContext = {
  env: process.env,
  nowMs: () => Date.now(),
  notice: (line) => process.stderr.write(`${line}\n`),
};

async function main(argv: readonly string[]): Promise<void> {
  const cli = parseCommandLine(argv);
  if (cli.command === 'serve') {
    const log: LogSink<LogEvent> = jsonLineSink((line, batched) => logWriter.write(line, batched), { levelOf: logLevel, minimum: cli.options.logLevel, later: (make) => logWriter.writeLater(make) });
    return serve(cli.options, process.env, log, logWriter);
  }
  process.stdout.write(await runCommand(cli, context));
}

main(process.argv.slice(2)).catch((err: unknown) => {
  logWriter.flushSync();
  if (err instanceof UsageError) {
    process.stderr.write(`proxy: ${err.message}\n\n${usage()}\n`);
    process.exit(2);
  }
  process.stderr.write(`proxy: ${(err as Error)?.message ?? String(err)}\n`);
  process.exit(1);
});
