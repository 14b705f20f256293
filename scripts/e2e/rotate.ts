// The rotation turn (gateway mode): the agent reads its bot token from a file (agent-config
// --token-file, at a path with a space, a quote and a $ in it), and the file is rewritten with
// another instance's token while the agent runs. What each agent does with that (docs/gateway.md,
// "Token files"):
//   codex        runs `cat FILE` before every call: the call after the rewrite carries the new
//                identity, with the old token still valid;
//   claude-code  runs its apiKeyHelper again in the background (TTL 0) and at once after a 401:
//                the old token is revoked at the rewrite, the call after it is refused, and
//                Claude Code retries it with the new token;
//   opencode     reads the file when it starts: a run keeps the token it started with, the next
//                run carries the new one.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HttpsFake, ModelHandler, ModelRequest } from '../../test/support/https-fake.ts';
import type { LogRecord } from '../../test/support/proxy-process.ts';
import type { AgentConfig, AgentSpec } from './agents/types.ts';
import { DEFAULT_ANSWER } from './fakes.ts';
import type { Gateway } from './gateway.ts';
import type { RunResult } from './run-agent.ts';

export interface RotateOutcome {
  problems: string[];
  note: string;
  seconds: number;
  requests: number;
  /** The agent's last output, for the details of a failure. */
  last: RunResult | undefined;
}

/** One call as the note shows it: who, what the gateway answered, where. */
const callOf = (r: LogRecord): string => `${String(r.instance_id ?? '-')} ${String(r.status)} ${String(r.method)} ${String(r.path)}`;

/** Runs the agent once on `config` with `prompt` (the caller's sandbox, trace and timeout). */
export type LaunchAgent = (config: AgentConfig, prompt: string, label: string) => Promise<RunResult>;

/**
 * The rotation turn of one agent. `toolPrompt` makes the fake ask for a tool call first, so the
 * agent makes a second call after the rewrite; `plainPrompt` is one call.
 */
export async function runRotateTurn(agent: AgentSpec, fake: Pick<HttpsFake, 'requests' | 'script'>, gateway: Gateway, root: string, prompts: { tool: string; plain: string }, launch: LaunchAgent): Promise<RotateOutcome> {
  const dir = join(root, 'token files');
  mkdirSync(dir, { recursive: true });
  const tokenFile = join(dir, "it's the $HOME token");
  const run = `run-rotate-${agent.name}-${Date.now()}`;
  const [before, after] = [`e2e-${agent.name}-rotate-old`, `e2e-${agent.name}-rotate-new`];
  const [oldToken, newToken] = [await gateway.mint(before, run), await gateway.mint(after, run)];
  // As an orchestrator writes it: a trailing newline the agents must not send.
  writeFileSync(tokenFile, `${oldToken}\n`);
  const config = await gateway.configFor(agent, ['--token-file', tokenFile]);
  const problems: string[] = [];
  const written = config.dir === undefined ? '' : readdirSync(config.dir, { withFileTypes: true }).filter((f) => f.isFile()).map((f) => readFileSync(join(config.dir!, f.name), 'utf8')).join('\n');
  if (`${config.text}${written}`.includes('MODEL_PROXY_TOKEN')) problems.push('the --token-file configuration still reads $MODEL_PROXY_TOKEN');
  const from = fake.requests.length;
  // The turns run one at a time: every request record from here on is this turn's (a refused
  // token's record may name no run).
  const recordsFrom = gateway.records().length;
  const ofRun = (): LogRecord[] => gateway.records().slice(recordsFrom).filter((r) => r.event === 'request');
  // A call's record line may come just after the agent exits: wait (up to 10 s) until every model
  // call that reached the fake upstream has its record (the gateway answers GET /v1/models itself).
  const settled = async (): Promise<LogRecord[]> => {
    const deadline = Date.now() + 10_000;
    while (ofRun().filter((r) => r.status === 200 && r.method === 'POST').length < fake.requests.length - from && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    return ofRun();
  };
  const rotate = async (): Promise<void> => {
    writeFileSync(tokenFile, `${newToken}\n`);
    if (agent.name === 'claude-code') await gateway.revokeInstance(before);
  };
  let last: RunResult;
  let started = Date.now();
  if (agent.name === 'opencode') {
    const first = await launch(config, prompts.plain, 'rotate-1');
    const firstIds = (await settled()).map((r) => r.instance_id);
    await rotate();
    last = await launch(config, prompts.plain, 'rotate-2');
    const secondIds = (await settled()).slice(firstIds.length).map((r) => r.instance_id);
    if (first.code !== 0 || last.code !== 0) problems.push(`exit ${first.code} / ${last.code}`);
    if (firstIds.length === 0 || firstIds.some((id) => id !== before)) problems.push(`the first run's calls came from ${JSON.stringify(firstIds)}, not only ${before}`);
    if (secondIds.length === 0 || secondIds.some((id) => id !== after)) problems.push(`the run after the rewrite came from ${JSON.stringify(secondIds)}, not only ${after}`);
  } else {
    // Rewritten while the agent waits for the answer to its first call (the tool call it must run).
    const answer = DEFAULT_ANSWER[agent.providerKind];
    const rewriteThenAnswer: ModelHandler = (req, res, recorded) => void rotate().then(() => answer(req, res, recorded), (err: Error) => res.destroy(err));
    fake.script(rewriteThenAnswer);
    started = Date.now();
    last = await launch(config, prompts.tool, 'rotate');
    const records = await settled();
    const ids = records.map(callOf);
    if (last.timedOut || last.code !== 0) problems.push(`exit ${last.timedOut ? 'timeout' : last.code}`);
    if (!last.stdout.includes('E2E-TOOL-DONE')) problems.push('the final answer is not in the output');
    if (records[0]?.instance_id !== before || records[0]?.status !== 200) problems.push(`the first call was not ${before}'s (calls: ${ids.join(', ')})`);
    const served = records.filter((r) => r.status === 200);
    if (served.at(-1)?.instance_id !== after) problems.push(`the last call was not ${after}'s (calls: ${ids.join(', ')})`);
    const firstNew = records.findIndex((r) => r.instance_id === after);
    if (firstNew >= 0 && served.slice(served.indexOf(records[firstNew]!)).some((r) => r.instance_id === before)) problems.push(`a call after ${after}'s first still carried ${before}'s token (calls: ${ids.join(', ')})`);
    if (agent.name === 'codex' && records.some((r) => r.status !== 200)) problems.push(`a call was refused (calls: ${ids.join(', ')}): Codex should have read the new token before it`);
    if (agent.name === 'claude-code' && !records.some((r) => r.status === 401)) problems.push(`no call was refused: Claude Code read the new token before its revoked one was refused? (calls: ${ids.join(', ')})`);
  }
  const upstream: ModelRequest[] = fake.requests.slice(from);
  const ids = ofRun().map(callOf);
  const note = problems.length > 0 ? problems.join('; ') : `calls (instance status path): ${ids.join(', ')}`;
  return { problems, note, seconds: (Date.now() - started) / 1000, requests: upstream.length, last };
}
