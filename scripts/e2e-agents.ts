// `npm run e2e:agents`: the real coding agents (Codex CLI, opencode, Claude Code, pinned
// versions installed outside the project tree) each run two headless turns against local HTTPS
// fakes of their upstream APIs:
//   plain  a prompt answered with text; the text must reach the agent's output;
//   tool   the fake asks for the agent's own shell tool to run `echo e2e-tool-ok`; the tool's
//          output must come back to the upstream in the next request, and the final text
//          must reach the agent's output.
//   budget (gateway mode; Codex and Claude Code) the agent's run has already spent its budget
//          (--limits, a token minted with --budget-usd): the gateway refuses its first call in
//          the form that agent treats as final, and the agent must end within seconds, print
//          the refusal, and send nothing upstream.
//   rotate (gateway mode) the agent reads its bot token from a file (agent-config --token-file)
//          that is rewritten with another instance's token during the run; the gateway's records
//          must show the new identity where the agent promises it (scripts/e2e/rotate.ts).
//   ws-*   (gateway mode, Codex) plain, tool and budget again with Codex's other configuration: its
//          built-in provider, `openai_base_url` at the gateway and the bot token in CODEX_API_KEY,
//          which speaks the Responses API over a WebSocket; every upstream request must have come
//          over the socket, and each turn must be recorded by the gateway with its usage and charge.
//   ws-config (gateway mode, Codex) the plain turn in the configuration `agent-config --agent
//          codex --websocket` prints (the gateway provider with supports_websockets, the token in
//          MODEL_PROXY_TOKEN), checked as the ws-* turns are.
//   ws-fallback (gateway mode, Codex) the plain turn in that configuration against a second
//          gateway whose OpenAI provider has no WebSocket mode: every upgrade Codex tries is
//          answered 404 upgrade_not_served, Codex falls back to POST /v1/responses and completes;
//          nothing upstream came over a socket.
//   cloud  (gateway mode, with Claude Code) Claude Code in its Bedrock and Vertex modes, against
//          fakes that check the gateway's SigV4 signatures and OAuth assertions for real:
//          scripts/e2e-cloud.ts, run after the table (alone: npm run e2e:cloud).
// Every run is also traced (strace, when installed): a connection to anything but loopback
// fails the turn, so that a bot configured this way has no way out but the gateway.
//
// Modes (the only differences are the base URL and the configuration the agent gets):
//   default    gateway mode: agents -> `node dist/proxy.js` -> fakes, with the configuration
//              `proxy.js agent-config --agent <name>` prints (for opencode, the directory it
//              writes with --config-dir and the environment it prints) and a token from
//              `mint-token`.
//              Needs the bundle built (npm run build).
//   --direct   agents -> a plain-HTTP recorder -> fakes, with the reference configuration in
//              scripts/e2e/agents/*.ts; works without the gateway.
//   --record   (with --direct) writes every request the agents sent, credentials masked, to
//              test/fixtures/recorded/<agent>-<version>-<n>.json, and an index.json.
// Environment: E2E_AGENTS=codex,opencode,claude-code (default all); E2E_AGENTS_CACHE_DIR (where
// the agents are installed; default ${XDG_CACHE_HOME:-~/.cache}/credential-proxy-e2e);
// E2E_TRACE=0 to run without strace; E2E_KEEP_SANDBOX=1 to keep the agents' temporary homes
// (a failed turn leaves upstream-requests.jsonl there); E2E_TURN_TIMEOUT_S, seconds per turn
// (default 180). Every agent runs with PATH (the system's), HOME (its sandbox's) and
// MODEL_PROXY_TOKEN, plus what its spec adds (for opencode, the XDG directories and what
// agent-config printed): nothing else of ours leaks in.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PLAIN_ANSWER, TOOL_COMMAND, TOOL_OUTPUT, TOOL_TURN_MARKER } from '../test/support/agent-turns.ts';
import type { ModelRequest } from '../test/support/model-upstream.ts';
import { ROOT, type LogRecord } from '../test/support/proxy-process.ts';
import { makeTestPki } from '../test/support/tls.ts';
import { claudeCode } from './e2e/agents/claude-code.ts';
import { codex, codexSocketConfig } from './e2e/agents/codex.ts';
import { opencode } from './e2e/agents/opencode.ts';
import type { AgentConfig, AgentSpec, Sandbox } from './e2e/agents/types.ts';
import { startFakes, turnOfBody, turnOfRequest, type Fakes } from './e2e/fakes.ts';
import { startGateway, Unsupported, type Gateway } from './e2e/gateway.ts';
import { binPath, ensureInstalled } from './e2e/install.ts';
import { startRecorder, type Recorder } from './e2e/recorder.ts';
import { runRotateTurn } from './e2e/rotate.ts';
import { canTrace, killAllGroups, killStragglers, runAgent, traceFileFor, type RunResult } from './e2e/run-agent.ts';

const AGENTS: readonly AgentSpec[] = [codex, opencode, claudeCode];
const TURNS = ['plain', 'tool'] as const;
type TurnName = (typeof TURNS)[number];
const PROMPTS: Record<TurnName, string> = {
  plain: 'Say hello. (e2e plain turn)',
  tool: `Run \`${TOOL_COMMAND}\` with your shell tool and tell me what it printed. (${TOOL_TURN_MARKER})`,
};
/** The agents shown to stop on a spent budget (opencode is not: it has no "final" refusal to show). */
const BUDGET_AGENTS: readonly string[] = ['codex', 'claude-code'];
/** "Within seconds": an agent that retried a refusal as transient would take a minute or more. */
const BUDGET_STOP_S = 20;
/** One agent turn takes seconds; the default's slack is for a loaded machine. */
const DEFAULT_TURN_TIMEOUT_S = 180;
/** PATH for the agents: the system's, nothing from the developer's shell. */
const SYSTEM_PATH = '/usr/local/bin:/usr/bin:/bin';
const RECORDED_DIR = join(ROOT, 'test', 'fixtures', 'recorded');

interface Options {
  direct: boolean;
  record: boolean;
  agents: AgentSpec[];
  trace: boolean;
  turnTimeoutMs: number;
}

interface Row {
  agent: AgentSpec;
  /** The turn; `ws-...`: Codex in its WebSocket configuration (SOCKET). */
  turn: TurnName | 'setup' | 'budget' | 'rotate' | `ws-${TurnName | 'budget' | 'fallback' | 'config'}`;
  ok: boolean;
  seconds: number;
  requests: number;
  note: string;
  /** Shown below the table for failures. */
  details?: string;
}

/** A mistake on the command line or in E2E_*: shown without a stack trace. */
class UsageError extends Error {}

const USAGE = 'usage: npm run e2e:agents -- [--direct [--record]]';
const HELP = `${USAGE}
  --direct                  agents -> a recorder -> the fakes, with the reference configurations (no gateway)
  --record                  with --direct: write the requests to test/fixtures/recorded/
environment:
  E2E_AGENTS=a,b            which agents (${AGENTS.map((a) => a.name).join(', ')}; default all)
  E2E_AGENTS_CACHE_DIR=DIR  where they are installed (default \${XDG_CACHE_HOME:-~/.cache}/credential-proxy-e2e)
  E2E_TRACE=0               run without strace (no egress check)
  E2E_KEEP_SANDBOX=1        keep the agents' temporary homes
  E2E_TURN_TIMEOUT_S=N      seconds an agent turn may take (default ${DEFAULT_TURN_TIMEOUT_S})
`;

function parseOptions(argv: readonly string[]): Options {
  const flags = new Set(argv);
  for (const f of flags) {
    if (!['--direct', '--record', '--help', '-h'].includes(f)) throw new UsageError(`unknown argument "${f}" (${USAGE})`);
  }
  if (flags.has('--help') || flags.has('-h')) {
    process.stdout.write(HELP);
    process.exit(0);
  }
  const timeoutRaw = process.env.E2E_TURN_TIMEOUT_S ?? '';
  const timeoutS = timeoutRaw.trim() === '' ? DEFAULT_TURN_TIMEOUT_S : Number(timeoutRaw);
  if (!Number.isFinite(timeoutS) || timeoutS <= 0) throw new UsageError(`E2E_TURN_TIMEOUT_S: "${timeoutRaw}" is not a number of seconds above 0`);
  if (flags.has('--record') && !flags.has('--direct')) throw new UsageError('--record needs --direct (the recordings are of what the agents send, before any gateway)');
  const wanted = (process.env.E2E_AGENTS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  for (const w of wanted) if (!AGENTS.some((a) => a.name === w)) throw new UsageError(`E2E_AGENTS: unknown agent "${w}" (known: ${AGENTS.map((a) => a.name).join(', ')})`);
  const agents = wanted.length > 0 ? AGENTS.filter((a) => wanted.includes(a.name)) : [...AGENTS];
  const trace = process.env.E2E_TRACE !== '0' && canTrace();
  return { direct: flags.has('--direct'), record: flags.has('--record'), agents, trace, turnTimeoutMs: timeoutS * 1000 };
}

/** Cleanup steps run in reverse order, on success, failure and Ctrl-C (as in scripts/demo.ts). */
const cleanups: { what: string; step: () => void | Promise<void> }[] = [];
let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    killAllGroups();
    while (cleanups.length > 0) {
      const { what, step } = cleanups.pop()!;
      try {
        await step();
      } catch (err) {
        process.stderr.write(`e2e-agents: cleanup "${what}" failed: ${(err as Error).message}\n`);
      }
    }
  })();
  return cleaning;
}

const log = (line: string): void => void process.stdout.write(`${line}\n`);
const tail = (text: string, lines = 12): string => text.trim().split('\n').slice(-lines).join('\n');

/**
 * Codex's other configuration: its built-in OpenAI provider with `openai_base_url` at the gateway
 * and the bot token in CODEX_API_KEY (codexSocketConfig), which speaks the Responses API over a
 * WebSocket first. Its turns run through the gateway (gateway mode only: the recorder relays no
 * upgrade; scripts/e2e/record-socket.ts records the socket from Codex's side).
 */
interface SocketMode {
  readonly config: string;
  readonly env: Record<string, string>;
  /** The gateway serves no WebSocket: Codex must fall back to HTTP (checkFallbackTurn). */
  readonly fallback?: boolean;
  /** The row's name, when not `ws-<turn>`. */
  readonly row?: string;
}

function socketMode(gateway: Gateway, token: string): SocketMode {
  return { config: codexSocketConfig(gateway.origin, codex.model), env: { CODEX_API_KEY: token } };
}

/**
 * A turn in the WebSocket configuration: every upstream request a response.create on a socket
 * (method WS at the fake), each one a turn the gateway recorded with its usage and charged from it.
 */
function checkSocketTurn(upstream: readonly ModelRequest[], turns: readonly LogRecord[]): string[] {
  const problems: string[] = [];
  if (upstream.some((r) => r.method !== 'WS')) problems.push(`${upstream.filter((r) => r.method !== 'WS').length} requests went over HTTP, not the WebSocket`);
  if (turns.length !== upstream.length) problems.push(`the gateway recorded ${turns.length} turns for ${upstream.length} messages upstream`);
  for (const t of turns) if (t.status !== 200 || t.usage_complete !== true || t.charge_basis !== 'usage') problems.push(`turn ${String(t.request_id)}: status ${String(t.status)}, usage_complete ${String(t.usage_complete)}, charge ${String(t.charge_basis)}`);
  return problems;
}

/**
 * A turn in the WebSocket configuration against a gateway that serves no WebSocket: the gateway
 * answered Codex's upgrades 404 upgrade_not_served (recorded), and everything upstream came over
 * HTTP, each call recorded with its usage.
 */
function checkFallbackTurn(upstream: readonly ModelRequest[], records: readonly LogRecord[]): string[] {
  const problems: string[] = [];
  const refused = records.filter((r) => r.event === 'request' && r.status === 404 && r.error === 'upgrade_not_served');
  const calls = records.filter((r) => r.event === 'request' && r.method === 'POST' && r.path === '/v1/responses');
  if (refused.length === 0) problems.push('Codex tried no WebSocket upgrade (none was answered 404 upgrade_not_served): the fallback was not exercised');
  if (upstream.some((r) => r.method === 'WS')) problems.push('a message reached the upstream over a WebSocket through a gateway that serves none');
  if (calls.length !== upstream.length) problems.push(`the gateway recorded ${calls.length} POST /v1/responses for ${upstream.length} requests upstream`);
  for (const c of calls) if (c.status !== 200 || c.usage_complete !== true) problems.push(`call ${String(c.request_id)}: status ${String(c.status)}, usage_complete ${String(c.usage_complete)}`);
  return problems;
}

/** Checks of one finished turn; returns the problems (none: the turn passed). */
function checkTurn(agent: AgentSpec, turn: TurnName, result: RunResult, upstream: readonly ModelRequest[], gateway: Gateway | undefined, timeoutMs: number): string[] {
  const problems: string[] = [];
  if (result.timedOut) problems.push(`timed out after ${timeoutMs / 1000} s`);
  else if (result.code !== 0) problems.push(`exit ${result.code ?? result.signal}`);
  if (upstream.length === 0) problems.push('no request reached the upstream');
  const turns = upstream.map((r) => turnOfRequest(agent.protocol, r));
  if (turn === 'plain' && !result.stdout.includes(PLAIN_ANSWER)) problems.push('the plain answer is not in the output');
  if (turn === 'tool') {
    if (!turns.some((t) => t?.kind === 'tool')) problems.push('no request offered a usable shell tool (the fake never asked for a tool call)');
    else if (!turns.some((t) => t?.kind === 'final' && t.toolResult.includes(TOOL_OUTPUT))) problems.push(`the tool output (${TOOL_OUTPUT}) did not come back upstream`);
    else if (!result.stdout.includes('E2E-TOOL-DONE')) problems.push('the final answer is not in the output');
  }
  if (result.egress && result.egress.length > 0) problems.push(`connections beyond loopback: ${result.egress.join(', ')}`);
  if (gateway) {
    // The gateway must have swapped the bot's credential for the provider's key.
    const [header, expected] = agent.providerKind === 'openai' ? ['authorization', `Bearer ${gateway.keys.openai}`] : ['x-api-key', gateway.keys.anthropic];
    for (const r of upstream) {
      if (r.headers[header] !== expected) problems.push(`${r.method} ${r.url} reached the upstream without the upstream key`);
      if (JSON.stringify(r.headers).includes(gateway.botToken)) problems.push(`${r.method} ${r.url} reached the upstream with the bot token`);
    }
  }
  return [...new Set(problems)];
}

async function runTurn(agent: AgentSpec, turn: TurnName, config: AgentConfig, token: string, fake: { requests: ModelRequest[] }, runRoot: string, opts: Options, gateway: Gateway | undefined, socket?: SocketMode): Promise<Row> {
  const rowName = socket?.row ?? (socket?.fallback ? 'ws-fallback' : socket ? `ws-${turn}` : turn);
  const root = join(runRoot, `${agent.name}-${rowName}${socket?.row ? `-${turn}` : ''}`);
  const sandbox: Sandbox = { root, home: join(root, 'home'), work: join(root, 'work') };
  mkdirSync(sandbox.home, { recursive: true });
  mkdirSync(sandbox.work, { recursive: true });
  const command = agent.prepare(sandbox, socket ? { text: socket.config } : config, PROMPTS[turn]);
  const env = { PATH: SYSTEM_PATH, HOME: sandbox.home, MODEL_PROXY_TOKEN: token, ...command.env, ...socket?.env };
  const from = fake.requests.length;
  const recordsFrom = gateway?.records().length ?? 0;
  const result = await runAgent({ command: binPath(agent), args: command.args, env, cwd: sandbox.work, timeoutMs: opts.turnTimeoutMs, traceFile: opts.trace ? traceFileFor(root) : undefined, sandboxRoot: root });
  const upstream = fake.requests.slice(from);
  const problems = checkTurn(agent, turn, result, upstream, gateway, opts.turnTimeoutMs);
  if (socket?.fallback && gateway) problems.push(...checkFallbackTurn(upstream, await recordsOf(gateway, recordsFrom, (r) => r.method === 'POST', upstream.length)));
  else if (socket && gateway) problems.push(...checkSocketTurn(upstream, await socketTurnsOf(gateway, recordsFrom, upstream.length)));
  const how = socket?.fallback
    ? `${gateway?.records().slice(recordsFrom).filter((r) => r.error === 'upgrade_not_served').length ?? 0} upgrades answered 404, then over HTTP; `
    : socket
      ? 'over the WebSocket, each turn charged its usage; '
      : '';
  const row: Row = { agent, turn: rowName as Row['turn'], ok: problems.length === 0, seconds: result.ms / 1000, requests: upstream.length, note: problems.join('; ') || `${how}${opts.trace ? 'loopback only' : 'egress not traced'}` };
  if (!row.ok) {
    // For a post-mortem with E2E_KEEP_SANDBOX=1: what reached the upstream, one JSON per line.
    writeFileSync(join(root, 'upstream-requests.jsonl'), upstream.map((r) => JSON.stringify({ method: r.method, url: r.url, body: r.body.toString('utf8') })).join('\n'));
    row.details = [`-- ${agent.name} stdout --`, tail(result.stdout), `-- ${agent.name} stderr --`, tail(result.stderr), ...(gateway ? ['-- gateway output --', tail(gateway.output(), 8)] : [])].join('\n');
  }
  return row;
}

/** The WebSocket turns the gateway recorded since `from`: as many as `expected`, once their records are written (a turn is recorded at its end, the socket may close after the agent exits). */
function socketTurnsOf(gateway: Gateway, from: number, expected: number): Promise<LogRecord[]> {
  return recordsOf(gateway, from, (r) => r.method === 'WS', expected).then((all) => all.filter((r) => r.event === 'request' && r.method === 'WS'));
}

/** The gateway's records since `from`, once `expected` request records match `which` (or after 5 s). */
async function recordsOf(gateway: Gateway, from: number, which: (r: LogRecord) => boolean, expected: number): Promise<LogRecord[]> {
  const matching = () => gateway.records().slice(from).filter((r) => r.event === 'request' && which(r)).length;
  for (let waited = 0; matching() < expected && waited < 5000; waited += 50) await new Promise((r) => setTimeout(r, 50));
  return gateway.records().slice(from);
}

/** The budget turn: a token whose run has spent its budget; the agent must stop at once, having sent nothing upstream. */
async function runBudgetTurn(agent: AgentSpec, config: AgentConfig, fake: { requests: ModelRequest[] }, runRoot: string, opts: Options, gateway: Gateway, socket?: (token: string) => SocketMode): Promise<Row> {
  let token: string;
  try {
    token = await gateway.spentToken(agent);
  } catch (err) {
    if (!(err instanceof Unsupported)) throw err;
    return { agent, turn: 'budget', ok: false, seconds: 0, requests: 0, note: err.message };
  }
  const root = join(runRoot, `${agent.name}-${socket ? 'ws-' : ''}budget`);
  const sandbox: Sandbox = { root, home: join(root, 'home'), work: join(root, 'work') };
  mkdirSync(sandbox.home, { recursive: true });
  mkdirSync(sandbox.work, { recursive: true });
  const mode = socket?.(token);
  const command = agent.prepare(sandbox, mode ? { text: mode.config } : config, PROMPTS.plain);
  const env = { PATH: SYSTEM_PATH, HOME: sandbox.home, MODEL_PROXY_TOKEN: token, ...command.env, ...mode?.env };
  const from = fake.requests.length;
  const refusedBefore = gateway.records().filter((r) => r.event === 'request' && r.limit === 'run_budget').length;
  const result = await runAgent({ command: binPath(agent), args: command.args, env, cwd: sandbox.work, timeoutMs: opts.turnTimeoutMs, traceFile: opts.trace ? traceFileFor(root) : undefined, sandboxRoot: root });
  const upstream = fake.requests.slice(from);
  // The access log batches its lines (up to 100 ms, src/http/log.ts): an agent that stops at once
  // can exit before the refusal's record is written, so wait for it (5 s at most).
  const isRefusal = (r: LogRecord): boolean => r.limit === 'run_budget';
  const refused = (await recordsOf(gateway, 0, isRefusal, refusedBefore + 1)).filter((r) => r.event === 'request' && isRefusal(r)).length - refusedBefore;
  const output = `${result.stdout}\n${result.stderr}`;
  const problems: string[] = [];
  if (result.timedOut) problems.push(`timed out after ${opts.turnTimeoutMs / 1000} s: it kept retrying`);
  else if (result.ms / 1000 > BUDGET_STOP_S) problems.push(`took ${(result.ms / 1000).toFixed(1)} s to stop (more than ${BUDGET_STOP_S} s: it retried)`);
  if (refused === 0) problems.push('the gateway refused nothing for the spent budget');
  if (upstream.length > 0) problems.push(`${upstream.length} requests reached the upstream`);
  if (!/quota exceeded|budget is spent/i.test(output)) problems.push('the agent did not print the refusal (a quota or budget message)');
  if (result.egress && result.egress.length > 0) problems.push(`connections beyond loopback: ${result.egress.join(', ')}`);
  const said = /quota exceeded[^\n]*|[^\n]*budget is spent[^\n]*/i.exec(output)?.[0]?.trim().slice(0, 80);
  const row: Row = { agent, turn: socket ? 'ws-budget' : 'budget', ok: problems.length === 0, seconds: result.ms / 1000, requests: upstream.length, note: problems.join('; ') || `stopped after ${refused} refused call${refused === 1 ? '' : 's'}: "${said}"` };
  if (!row.ok) row.details = [`-- ${agent.name} stdout --`, tail(result.stdout), `-- ${agent.name} stderr --`, tail(result.stderr), '-- gateway output --', tail(gateway.output(), 8)].join('\n');
  return row;
}

/** The rotation turn: the bot token from a file rewritten mid-run; the gateway's records show the new identity. */
async function runTokenFileTurn(agent: AgentSpec, fake: Fakes['openai'] | Fakes['anthropic'], runRoot: string, opts: Options, gateway: Gateway): Promise<Row> {
  const root = join(runRoot, `${agent.name}-rotate`);
  const launch = async (config: AgentConfig, prompt: string, label: string): Promise<RunResult> => {
    const sandbox: Sandbox = { root: join(root, label), home: join(root, label, 'home'), work: join(root, label, 'work') };
    mkdirSync(sandbox.home, { recursive: true });
    mkdirSync(sandbox.work, { recursive: true });
    const command = agent.prepare(sandbox, config, prompt);
    // No MODEL_PROXY_TOKEN: the token comes from the file only.
    const env = { PATH: SYSTEM_PATH, HOME: sandbox.home, ...command.env };
    return runAgent({ command: binPath(agent), args: command.args, env, cwd: sandbox.work, timeoutMs: opts.turnTimeoutMs, traceFile: opts.trace ? traceFileFor(sandbox.root) : undefined, sandboxRoot: sandbox.root });
  };
  let outcome;
  try {
    outcome = await runRotateTurn(agent, fake, gateway, root, { tool: PROMPTS.tool, plain: PROMPTS.plain }, launch);
  } catch (err) {
    if (!(err instanceof Unsupported)) throw err;
    return { agent, turn: 'rotate', ok: false, seconds: 0, requests: 0, note: err.message };
  }
  if (outcome.last?.egress && outcome.last.egress.length > 0) outcome.problems.push(`connections beyond loopback: ${outcome.last.egress.join(', ')}`);
  const row: Row = { agent, turn: 'rotate', ok: outcome.problems.length === 0, seconds: outcome.seconds, requests: outcome.requests, note: outcome.problems.join('; ') || outcome.note };
  if (!row.ok && outcome.last) row.details = [`-- ${agent.name} stdout --`, tail(outcome.last.stdout), `-- ${agent.name} stderr --`, tail(outcome.last.stderr), '-- gateway output --', tail(gateway.output(), 8)].join('\n');
  return row;
}

/** Writes the recorder's requests of one agent as fixtures, replacing that version's old ones. */
function saveRecording(agent: AgentSpec, recorder: Recorder, turnStarts: { turn: TurnName; from: number }[], index: IndexEntry[]): string[] {
  mkdirSync(RECORDED_DIR, { recursive: true });
  const prefix = `${agent.name}-${agent.version}`;
  for (const f of readdirSync(RECORDED_DIR)) if (f.startsWith(`${prefix}-`) && f.endsWith('.json')) rmSync(join(RECORDED_DIR, f));
  const first = turnStarts[0]!.from;
  const files = recorder.save(RECORDED_DIR, prefix, first);
  files.forEach((file, i) => {
    const at = first + i;
    const turn = [...turnStarts].reverse().find((t) => t.from <= at)!.turn;
    index.push({ file, agent: agent.name, version: agent.version, protocol: agent.protocol, turn, fake_answered: turnOfBody(agent.protocol, recorder.requests[at]!.body).kind });
  });
  return files;
}

/** test/fixtures/recorded/index.json: which turn each recorded request belongs to, and what the fake answered. */
interface IndexEntry {
  file: string;
  agent: string;
  version: string;
  protocol: string;
  turn: TurnName;
  fake_answered: string;
}

function writeIndex(entries: IndexEntry[], ran: readonly AgentSpec[]): void {
  const file = join(RECORDED_DIR, 'index.json');
  const previous = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as IndexEntry[]) : [];
  // Keep the entries of agents not run this time.
  const merged = [...previous.filter((e) => !ran.some((a) => a.name === e.agent)), ...entries];
  writeFileSync(file, `${JSON.stringify(merged, null, 2)}\n`);
}

function printTable(rows: readonly Row[], mode: string): void {
  const header = ['agent', 'version', 'mode', 'turn', 'result', 'time', 'upstream requests', 'note'];
  const cells = rows.map((r) => [r.agent.name, r.agent.version, mode, r.turn, r.ok ? 'ok' : 'FAIL', `${r.seconds.toFixed(1)}s`, String(r.requests), r.note]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((s, i) => (i === c.length - 1 ? s : s.padEnd(widths[i]!))).join('  ');
  log('');
  log(line(header));
  for (const c of cells) log(line(c));
  for (const r of rows.filter((x) => x.details)) log(`\n${r.agent.name} ${r.turn}: ${r.note}\n${r.details}`);
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const mode = opts.direct ? 'direct' : 'gateway';
  const rows: Row[] = [];
  log(`e2e:agents (${mode} mode): ${opts.agents.map((a) => `${a.name} ${a.version}`).join(', ')}${opts.trace ? '' : ' (egress not traced: strace missing or E2E_TRACE=0)'}`);

  for (const agent of opts.agents) {
    const { installed, dir } = ensureInstalled(agent, log);
    if (!installed) log(`  ${agent.name} ${agent.version}: cached in ${dir}`);
  }

  const runRoot = mkdtempSync(join(tmpdir(), 'e2e-agents-'));
  cleanups.push({ what: `stop what still runs in ${runRoot}`, step: () => void killStragglers(runRoot) });
  if (process.env.E2E_KEEP_SANDBOX === '1') log(`sandboxes kept in ${runRoot}`);
  else cleanups.push({ what: `remove ${runRoot}`, step: () => rmSync(runRoot, { recursive: true, force: true }) });
  const pki = makeTestPki();
  cleanups.push({ what: 'remove the throwaway CA', step: () => pki.cleanup() });
  const fakes: Fakes = await startFakes(pki);
  cleanups.push({ what: 'stop the fakes', step: () => fakes.close() });
  const fakeOf = (a: AgentSpec) => (a.providerKind === 'openai' ? fakes.openai : fakes.anthropic);

  // Where the agents connect: a recorder per fake (direct), or the gateway.
  let gateway: Gateway | undefined;
  let recorders: Record<'openai' | 'anthropic', Recorder> | undefined;
  let setupFailure: string | undefined;
  if (opts.direct) {
    recorders = { openai: await startRecorder(fakes.openai.origin, pki.caPem), anthropic: await startRecorder(fakes.anthropic.baseUrl, pki.caPem) };
    cleanups.push({ what: 'stop the recorders', step: async () => void (await Promise.all([recorders!.openai.close(), recorders!.anthropic.close()])) });
  } else {
    try {
      gateway = await startGateway(opts.agents, { openaiBaseUrl: fakes.openai.baseUrl, anthropicBaseUrl: fakes.anthropic.baseUrl, caFile: pki.caFile }, runRoot);
      cleanups.push({ what: 'stop the gateway', step: () => gateway!.stop() });
    } catch (err) {
      if (!(err instanceof Unsupported)) throw err;
      setupFailure = err.message;
    }
  }

  const index: IndexEntry[] = [];
  for (const agent of opts.agents) {
    let config: AgentConfig;
    let token: string;
    let origin: string;
    try {
      if (setupFailure) throw new Unsupported(setupFailure);
      if (gateway) {
        config = await gateway.configFor(agent);
        token = gateway.botToken;
        origin = gateway.origin;
      } else {
        origin = `http://127.0.0.1:${recorders![agent.providerKind].port}`;
        const dir = agent.configDir === undefined ? undefined : join(mkdtempSync(join(runRoot, `${agent.name}-reference-`)), agent.configDir);
        config = { text: agent.referenceConfig(origin, dir ?? runRoot), ...(dir === undefined ? {} : { dir }) };
        token = `e2e-bot-token-${agent.name}`;
      }
    } catch (err) {
      if (!(err instanceof Unsupported)) throw err;
      rows.push({ agent, turn: 'setup', ok: false, seconds: 0, requests: 0, note: err.message });
      continue;
    }
    const turnStarts: { turn: TurnName; from: number }[] = [];
    for (const turn of TURNS) {
      log(`  ${agent.name}: ${turn} turn via ${origin}`);
      turnStarts.push({ turn, from: recorders?.[agent.providerKind].requests.length ?? 0 });
      rows.push(await runTurn(agent, turn, config, token, fakeOf(agent), runRoot, opts, gateway));
    }
    if (gateway && BUDGET_AGENTS.includes(agent.name)) {
      log(`  ${agent.name}: budget turn (a run whose budget is spent) via ${origin}`);
      rows.push(await runBudgetTurn(agent, config, fakeOf(agent), runRoot, opts, gateway));
    }
    if (gateway) {
      log(`  ${agent.name}: rotation turn (the bot token from a file rewritten mid-run) via ${origin}`);
      rows.push(await runTokenFileTurn(agent, fakeOf(agent), runRoot, opts, gateway));
    }
    if (gateway && agent.name === codex.name) {
      // The same Codex in its other configuration: the built-in provider, over the WebSocket.
      for (const turn of TURNS) {
        log(`  ${agent.name}: ${turn} turn over the WebSocket (openai_base_url, CODEX_API_KEY) via ${origin}`);
        rows.push(await runTurn(agent, turn, config, token, fakeOf(agent), runRoot, opts, gateway, socketMode(gateway, token)));
      }
      // agent-config's own WebSocket configuration (--websocket): the gateway provider with
      // supports_websockets, the token from MODEL_PROXY_TOKEN; every call a turn on the socket.
      log(`  ${agent.name}: plain turn in agent-config --websocket's configuration via ${origin}`);
      const wsConfig = await gateway.configFor(agent, ['--websocket']);
      rows.push(await runTurn(agent, 'plain', config, token, fakeOf(agent), runRoot, opts, gateway, { config: wsConfig.text, env: {}, row: 'ws-config' }));
      log(`  ${agent.name}: budget turn over the WebSocket via ${origin}`);
      rows.push(await runBudgetTurn(agent, config, fakeOf(agent), runRoot, opts, gateway, (spent) => socketMode(gateway!, spent)));
      rows.push(await runFallbackTurn(agent, config, fakes, pki.caFile, runRoot, opts));
    }
    if (opts.record && recorders) {
      const files = saveRecording(agent, recorders[agent.providerKind], turnStarts, index);
      log(`  ${agent.name}: recorded ${files.length} requests in test/fixtures/recorded/`);
    }
  }
  if (opts.record && index.length > 0) writeIndex(index, opts.agents);

  printTable(rows, mode);
  const failed = rows.filter((r) => !r.ok).length;
  log(`\n${rows.length - failed} passed, ${failed} failed`);
  // Claude Code's cloud modes (Bedrock, Vertex) through the gateway: scripts/e2e-cloud.ts, also
  // runnable alone as `npm run e2e:cloud`.
  const cloud = !opts.direct && opts.agents.some((a) => a.name === claudeCode.name) ? await runCloudTurns() : 0;
  return failed === 0 && cloud === 0 ? 0 : 1;
}

/**
 * Codex's WebSocket configuration against a gateway whose OpenAI provider has no WebSocket mode
 * (a second gateway process, so the first keeps its own): the plain turn must complete over HTTP.
 */
async function runFallbackTurn(agent: AgentSpec, config: AgentConfig, fakes: Fakes, caFile: string, runRoot: string, opts: Options): Promise<Row> {
  const dir = join(runRoot, 'gateway-without-websocket');
  mkdirSync(dir, { recursive: true });
  let plain: Gateway;
  try {
    plain = await startGateway([agent], { openaiBaseUrl: fakes.openai.baseUrl, anthropicBaseUrl: fakes.anthropic.baseUrl, caFile }, dir, { websocket: false });
  } catch (err) {
    if (!(err instanceof Unsupported)) throw err;
    return { agent, turn: 'ws-fallback', ok: false, seconds: 0, requests: 0, note: err.message };
  }
  try {
    log(`  ${agent.name}: plain turn over the WebSocket configuration, through a gateway that serves no WebSocket, via ${plain.origin}`);
    return await runTurn(agent, 'plain', config, plain.botToken, fakes.openai, runRoot, opts, plain, { ...socketMode(plain, plain.botToken), fallback: true });
  } finally {
    await plain.stop();
  }
}

/** Runs scripts/e2e-cloud.ts as its own process (its fakes and cleanup are its own); its exit code. */
function runCloudTurns(): Promise<number> {
  log('\ne2e:agents: Claude Code in its cloud modes (npm run e2e:cloud)');
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts', 'e2e-cloud.ts')], { stdio: 'inherit', cwd: ROOT });
  return new Promise((resolve) => child.once('close', (code) => resolve(code ?? 1)));
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) return;
    interrupted = true;
    process.stderr.write(`\ne2e-agents: ${signal}, cleaning up\n`);
    void cleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  });
}

main()
  .then(async (code) => {
    await cleanup();
    process.exit(code);
  })
  .catch(async (err: unknown) => {
    process.stderr.write(`e2e-agents: ${err instanceof UsageError ? err.message : ((err as Error)?.stack ?? String(err))}\n`);
    await cleanup();
    process.exit(1);
  });
