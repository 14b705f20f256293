// Records what Codex sends over the Responses API's WebSocket mode, from Codex's side: the pinned
// Codex (scripts/e2e/agents/codex.ts), configured as a new user would put it behind a proxy
// (its built-in OpenAI provider, `openai_base_url` pointed at a loopback listener, the key in
// CODEX_API_KEY), runs the e2e turns (a plain prompt; a prompt that makes it call its shell tool
// and answer after the tool's output) against the WebSocket fake of
// test/support/responses-socket-upstream.ts, served over plain HTTP beside the HTTP fake. Every
// upgrade head (credentials masked) and every message Codex sent is written to
// test/fixtures/recorded-socket/codex-<version>.json. Run: tsx scripts/e2e/record-socket.ts
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PLAIN_ANSWER, TOOL_COMMAND, TOOL_TURN_MARKER } from '../../test/support/agent-turns.ts';
import type { ModelRequest } from '../../test/support/https-fake.ts';
import { ROOT } from '../../test/support/proxy-process.ts';
import { defaultResponses } from '../../test/support/responses-upstream.ts';
import { serveResponsesSocket } from '../../test/support/responses-socket-upstream.ts';
import { codex, codexSocketConfig } from './agents/codex.ts';
import { binPath, ensureInstalled } from './install.ts';
import { maskHeaders } from './recorder.ts';
import { runAgent } from './run-agent.ts';

async function main(): Promise<void> {
  ensureInstalled(codex, (line) => process.stdout.write(`${line}\n`));
  const requests: ModelRequest[] = [];
  const heads: { url: string; headers: Record<string, string> }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const recorded = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
      requests.push(recorded);
      defaultResponses(req, res, recorded);
    });
  });
  server.prependListener('upgrade', (req: IncomingMessage) => heads.push({ url: req.url ?? '', headers: maskHeaders(req) }));
  const fake = serveResponsesSocket(server, requests);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const root = mkdtempSync(join(tmpdir(), 'record-socket-'));
  const turns = { plain: 'Say hello. (e2e plain turn)', tool: `Run \`${TOOL_COMMAND}\` with your shell tool and tell me what it printed. (${TOOL_TURN_MARKER})` };
  const sessions: { turn: string; from: number; output: string }[] = [];
  try {
    for (const [turn, prompt] of Object.entries(turns)) {
      const home = join(root, turn, 'home');
      const work = join(root, turn, 'work');
      mkdirSync(join(home, '.codex'), { recursive: true });
      mkdirSync(work, { recursive: true });
      writeFileSync(join(home, '.codex', 'config.toml'), codexSocketConfig(origin, codex.model));
      const from = requests.length;
      const result = await runAgent({
        command: binPath(codex),
        args: ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '--color', 'never', prompt],
        env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, CODEX_HOME: join(home, '.codex'), CODEX_API_KEY: 'sk-record-socket-key' },
        cwd: work,
        timeoutMs: 180_000,
        sandboxRoot: join(root, turn),
      });
      process.stdout.write(`${turn}: exit ${result.code}, ${requests.length - from} requests, answer ${result.stdout.includes(PLAIN_ANSWER) || result.stdout.includes('E2E-TOOL-DONE') ? 'seen' : 'missing'}\n`);
      if (result.code !== 0) process.stdout.write(`${result.stderr.slice(-2000)}\n`);
      sessions.push({ turn, from, output: result.stdout.trim().slice(-300) });
    }
  } finally {
    server.closeAllConnections();
    server.close();
    rmSync(root, { recursive: true, force: true });
  }
  const messages = requests.map((r, i) => ({
    n: i,
    turn: [...sessions].reverse().find((s) => s.from <= i)?.turn,
    transport: r.method === 'WS' ? 'websocket' : 'http',
    connection: r.method === 'WS' ? fake.connections.findIndex((c) => c.headers === r.headers) : null,
    method: r.method,
    url: r.url,
    body: JSON.parse(r.body.toString('utf8')) as unknown,
  }));
  const dir = join(ROOT, 'test', 'fixtures', 'recorded-socket');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `codex-${codex.version}.json`);
  const about = `What Codex ${codex.version} sent with its built-in OpenAI provider (openai_base_url at a loopback listener, CODEX_API_KEY set), recorded ${new Date().toISOString().slice(0, 10)} by scripts/e2e/record-socket.ts against test/support/responses-socket-upstream.ts: the upgrade heads (credentials masked) and every message, in order.`;
  writeFileSync(file, `${JSON.stringify({ about, upgrades: heads, messages }, null, 2)}\n`);
  process.stdout.write(`wrote ${file}: ${heads.length} upgrades, ${messages.length} messages\n`);
}

void main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
