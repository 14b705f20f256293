// The commands that reach the limits store (src/run/commands.ts), run as functions against a
// port nothing listens on: the reach timeout is passed in, and the message names it. The
// commands' other behaviour, with nothing to connect to, is test/unit/commands.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { parseCommandLine, UsageError } from '../../src/config/cli.ts';
import { confirmStoreReset, revoke, type CommandContext } from '../../src/run/commands.ts';

const NOW_MS = Date.UTC(2026, 10, 26, 2, 0, 0);

function context(env: NodeJS.ProcessEnv = {}, storeReachTimeoutMs = 5000): CommandContext & { notices: string[] } {
  const notices: string[] = [];
  return { env, nowMs: () => NOW_MS, notice: (line) => notices.push(line), storeReachTimeoutMs, notices };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test('revoke: a store that cannot be reached fails within the reach timeout passed in, saying why (when it knows by then) and that nothing was revoked there', async () => {
  const port = await closedPort();
  // The message names the timeout passed in (0.2 s), not the default (5 s): no clock is read.
  await assert.rejects(
    revoke(parseCommandLine(['revoke', '--limits-store', `redis://127.0.0.1:${port}`, '--token-id', 't1']), context({}, 200)),
    new RegExp(`^Error: revoke: the store at 127\\.0\\.0\\.1:${port} could not be reached within 0\\.2 s(?: \\(connect ECONNREFUSED 127\\.0\\.0\\.1:${port}\\))?; nothing was revoked there$`),
  );
});

test('confirm-store-reset: a store that cannot be reached fails within the reach timeout passed in, saying nothing was confirmed', async () => {
  const port = await closedPort();
  await assert.rejects(
    confirmStoreReset(parseCommandLine(['confirm-store-reset', '--limits-store', `redis://127.0.0.1:${port}`]), context({}, 200)),
    /could not be reached within 0\.2 s(?: \(connect ECONNREFUSED [^)]+\))?; nothing was confirmed$/,
  );
  await assert.rejects(confirmStoreReset(parseCommandLine(['confirm-store-reset']), context()), (err) => err instanceof UsageError);
});
