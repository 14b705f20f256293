// Gateway mode: the built bundle (dist/proxy.js) between the agents and the HTTPS fakes, as in
// production: one process with a provider per upstream kind (`--providers FILE`), the
// configuration `proxy.js agent-config --agent <name>` prints, and a bot token from
// `proxy.js mint-token`; the gateway holds the upstream keys.
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BUNDLE, runProxyCommand, startProxy, type ProxyProcess } from '../../test/support/proxy-process.ts';
import type { AgentSpec } from './agents/types.ts';

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
  /** The agent's configuration as agent-config prints it; Unsupported when that fails or the agent cannot use it. */
  configFor(agent: AgentSpec): Promise<string>;
  output(): string;
  stop(): Promise<void>;
}

export async function startGateway(agents: readonly AgentSpec[], upstreams: GatewayUpstreams, tempDir: string): Promise<Gateway> {
  if (!existsSync(BUNDLE)) throw new Unsupported(`${BUNDLE} is missing: build it first (npm run build); e2e:agents builds nothing itself`);

  const signingKey = randomBytes(32).toString('hex');
  const keys = { openai: `sk-e2e-openai-${randomBytes(12).toString('hex')}`, anthropic: `sk-ant-e2e-${randomBytes(12).toString('hex')}` };
  const modelsOf = (kind: 'openai' | 'anthropic') => agents.filter((a) => a.providerKind === kind).map((a) => a.model);
  // One process for every agent, each on its own provider.
  const providersFile = join(tempDir, 'providers.json');
  const providers = [
    { name: 'openai', kind: 'openai', baseUrl: upstreams.openaiBaseUrl, keyEnv: 'E2E_OPENAI_UPSTREAM_KEY', models: modelsOf('openai'), caFile: upstreams.caFile },
    { name: 'anthropic', kind: 'anthropic', baseUrl: upstreams.anthropicBaseUrl, keyEnv: 'E2E_ANTHROPIC_UPSTREAM_KEY', models: modelsOf('anthropic'), caFile: upstreams.caFile },
  ].filter((p) => p.models.length > 0);
  writeFileSync(providersFile, `${JSON.stringify({ providers }, null, 2)}\n`);
  const env = { MODEL_PROXY_SIGNING_KEY: signingKey, E2E_OPENAI_UPSTREAM_KEY: keys.openai, E2E_ANTHROPIC_UPSTREAM_KEY: keys.anthropic };

  let proxy: ProxyProcess;
  try {
    proxy = await startProxy({ env, args: ['--model-gateway-listen', '127.0.0.1:0', '--providers', providersFile], listeners: ['model'] });
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
    stop: async () => void (await proxy.stop()),

    async configFor(agent) {
      const cmd = ['agent-config', '--agent', agent.name, '--proxy-host', host, '--model', agent.model, '--providers', providersFile];
      const r = await runProxyCommand(cmd, env);
      if (r.code !== 0) throw new Unsupported(`\`proxy.js ${cmd.join(' ')}\` failed (exit ${r.code}): ${r.stderr.trim().split('\n')[0]}`);
      const problem = agent.checkConfig(r.stdout);
      if (problem) throw new Unsupported(`\`proxy.js ${cmd.join(' ')}\` printed a configuration ${agent.name} cannot use: ${problem}`);
      return r.stdout;
    },
  };
}
