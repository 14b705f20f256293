// Gateway mode: the built bundle (dist/proxy.js) between the agents and the HTTPS fakes, as in
// production: one process with a provider per upstream kind (`--providers FILE`), the
// configuration `proxy.js agent-config --agent <name>` prints (and, for opencode, the directory
// it writes with --config-dir), and a bot token from
// `proxy.js mint-token`; the gateway holds the upstream keys. It runs with limits (--limits, a
// price for every agent's model), so that a run whose budget is spent can be shown to the agents.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { send } from '../../test/support/http-client.ts';
import { BUNDLE, runProxyCommand, startProxy, type LogRecord, type ProxyProcess } from '../../test/support/proxy-process.ts';
import type { AgentConfig, AgentSpec } from './agents/types.ts';

/** The gateway cannot serve an agent: reported as that agent's failed setup, not a crash. */
export class Unsupported extends Error {}

export interface GatewayUpstreams {
  /** OpenAI-style base URL of the fake serving /v1/responses and /v1/chat/completions. */
  openaiBaseUrl: string;
  /** Anthropic-style base URL (no /v1) of the Messages fake. */
  anthropicBaseUrl: string;
  caFile: string;
}

export interface Gateway {
  readonly origin: string;
  readonly botToken: string;
  /** The upstream keys; the fakes must see these and never the bot token. */
  readonly keys: { openai: string; anthropic: string };
  /**
   * The agent's configuration as agent-config prints it (with `extraArgs`, e.g. --token-file),
   * and for an agent configured by a directory what it wrote with --config-dir into a fresh one;
   * Unsupported when that fails or the agent cannot use it.
   */
  configFor(agent: AgentSpec, extraArgs?: readonly string[]): Promise<AgentConfig>;
  /** A bot token for this instance and run (mint-token). */
  mint(instanceId: string, runId: string): Promise<string>;
  /** Revokes an instance's tokens (revoke --instance-id, the gateway's --revocations file): refused from its next request. */
  revokeInstance(instanceId: string): Promise<void>;
  /** A bot token of a run whose budget is already spent (one call in the agent's protocol spent it). */
  spentToken(agent: AgentSpec): Promise<string>;
  records(): LogRecord[];
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts `node dist/proxy.js` as the agents' gateway. `websocket: false` gives the OpenAI
 * provider no WebSocket mode, as a provider that is not OpenAI's has by default: the gateway then
 * answers every upgrade 404 (Codex's fallback turn).
 */
export async function startGateway(agents: readonly AgentSpec[], upstreams: GatewayUpstreams, tempDir: string, options: { websocket?: boolean } = {}): Promise<Gateway> {
  if (!existsSync(BUNDLE)) throw new Unsupported(`${BUNDLE} is missing: build it first (npm run build); e2e:agents builds nothing itself`);

  const signingKey = randomBytes(32).toString('hex');
  const keys = { openai: `sk-e2e-openai-${randomBytes(12).toString('hex')}`, anthropic: `sk-ant-e2e-${randomBytes(12).toString('hex')}` };
  const modelsOf = (kind: 'openai' | 'anthropic') => agents.filter((a) => a.providerKind === kind).map((a) => a.model);
  // One process for every agent, each on its own provider.
  const providersFile = join(tempDir, 'providers.json');
  const providers = [
    // The fake speaks the Responses API's WebSocket mode as OpenAI does (not assumed of a host that is not OpenAI's).
    { name: 'openai', kind: 'openai', baseUrl: upstreams.openaiBaseUrl, keyEnv: 'E2E_OPENAI_UPSTREAM_KEY', models: modelsOf('openai'), caFile: upstreams.caFile, websocket: options.websocket ?? true },
    { name: 'anthropic', kind: 'anthropic', baseUrl: upstreams.anthropicBaseUrl, keyEnv: 'E2E_ANTHROPIC_UPSTREAM_KEY', models: modelsOf('anthropic'), caFile: upstreams.caFile },
  ].filter((p) => p.models.length > 0);
  writeFileSync(providersFile, `${JSON.stringify({ providers }, null, 2)}\n`);
  // $1 per million tokens each way; a run may spend $100 (the turns spend a fraction of a cent),
  // unless its token lowers it.
  const pricesFile = join(tempDir, 'prices.json');
  const price = { input: 1, output: 1 };
  writeFileSync(pricesFile, JSON.stringify({ providers: Object.fromEntries(providers.map((p) => [p.name, Object.fromEntries(p.models.map((m) => [m, price]))])) }));
  const limitsFile = join(tempDir, 'limits.json');
  writeFileSync(limitsFile, JSON.stringify({ perRun: { budgetUsd: 100 } }));
  // The deny list the gateway reads at each request (the rotation turn revokes a token mid-run).
  const revocationsFile = join(tempDir, 'revocations.json');
  const env = { MODEL_PROXY_SIGNING_KEY: signingKey, E2E_OPENAI_UPSTREAM_KEY: keys.openai, E2E_ANTHROPIC_UPSTREAM_KEY: keys.anthropic, MODEL_PRICES_FILE: pricesFile };

  let proxy: ProxyProcess;
  try {
    proxy = await startProxy({ env, args: ['--model-gateway-listen', '127.0.0.1:0', '--providers', providersFile, '--limits', limitsFile, '--revocations', revocationsFile], listeners: ['model'] });
  } catch (err) {
    throw new Unsupported(`the gateway did not start: ${(err as Error).message}`);
  }
  const host = `127.0.0.1:${proxy.ports.model!}`;
  const minted = await runProxyCommand(['mint-token', '--instance-id', 'e2e-agents', '--workflow', 'e2e', '--run-id', `run-${Date.now()}`, '--ttl', '30m'], env);
  if (minted.code !== 0) {
    await proxy.stop();
    throw new Unsupported(`proxy.js mint-token failed: ${minted.stderr.trim()}`);
  }
  const botToken = minted.stdout.trim();

  return {
    origin: `http://${host}`,
    botToken,
    keys,
    output: () => proxy.output(),
    records: () => proxy.records(),

    async spentToken(agent) {
      // A budget of one micro-dollar: the first call, a few dozen tokens, spends it.
      const run = `run-spent-${agent.name}-${Date.now()}`;
      const r = await runProxyCommand(['mint-token', '--instance-id', `e2e-${agent.name}-budget`, '--workflow', 'e2e', '--run-id', run, '--ttl', '30m', '--budget-usd', '0.000001'], env);
      if (r.code !== 0) throw new Unsupported(`proxy.js mint-token --budget-usd failed: ${r.stderr.trim()}`);
      const token = r.stdout.trim();
      const prompt = 'Say hello. (e2e plain turn)';
      const call =
        agent.protocol === 'messages'
          ? { path: '/v1/messages', headers: { 'x-api-key': token, 'anthropic-version': '2023-06-01' }, body: { model: agent.model, max_tokens: 64, messages: [{ role: 'user', content: prompt }] } }
          : agent.protocol === 'responses'
            ? { path: '/v1/responses', headers: { authorization: `Bearer ${token}` }, body: { model: agent.model, input: prompt } }
            : { path: '/v1/chat/completions', headers: { authorization: `Bearer ${token}` }, body: { model: agent.model, messages: [{ role: 'user', content: prompt }] } };
      const spent = await send(proxy.ports.model!, 'POST', call.path, { headers: { 'content-type': 'application/json', ...call.headers }, body: JSON.stringify(call.body) });
      if (spent.status !== 200) throw new Unsupported(`the call that spends the budget got ${spent.status}: ${spent.body.toString().slice(0, 200)}`);
      const charged = await proxy.waitForRecord((rec) => rec.event === 'request' && rec.run_id === run, 'the spending call\'s record');
      if (!(Number(charged.charged_usd) >= 0.000001)) throw new Unsupported(`the call that should spend the budget was charged ${String(charged.charged_usd)}`);
      return token;
    },
    stop: async () => void (await proxy.stop()),

    async mint(instanceId, runId) {
      const r = await runProxyCommand(['mint-token', '--instance-id', instanceId, '--workflow', 'e2e', '--run-id', runId, '--ttl', '30m'], env);
      if (r.code !== 0) throw new Unsupported(`proxy.js mint-token failed: ${r.stderr.trim()}`);
      return r.stdout.trim();
    },

    async revokeInstance(instanceId) {
      const r = await runProxyCommand(['revoke', '--revocations', revocationsFile, '--instance-id', instanceId], env);
      if (r.code !== 0) throw new Error(`proxy.js revoke failed: ${r.stderr.trim()}`);
    },

    async configFor(agent, extraArgs = []) {
      const dir = agent.configDir === undefined ? undefined : join(mkdtempSync(join(tempDir, `${agent.name}-config-`)), agent.configDir);
      const cmd = ['agent-config', '--agent', agent.name, '--proxy-host', host, '--model', agent.model, '--providers', providersFile, ...extraArgs, ...(dir === undefined ? [] : ['--config-dir', dir])];
      const r = await runProxyCommand(cmd, env);
      if (r.code !== 0) throw new Unsupported(`\`proxy.js ${cmd.join(' ')}\` failed (exit ${r.code}): ${r.stderr.trim().split('\n')[0]}`);
      const config = { text: r.stdout, ...(dir === undefined ? {} : { dir }) };
      // The reference configurations read $MODEL_PROXY_TOKEN; one for a token file is checked by its turn.
      const problem = extraArgs.length === 0 ? agent.checkConfig(config) : undefined;
      if (problem) throw new Unsupported(`\`proxy.js ${cmd.join(' ')}\` printed a configuration ${agent.name} cannot use: ${problem}`);
      return config;
    },
  };
}
