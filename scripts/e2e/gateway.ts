// Gateway mode: the built bundle (dist/proxy.js) between the agents and the HTTPS fakes, as in
// production. The agents get the configuration `proxy.js agent-config --agent <name>` prints and
// a bot token from `proxy.js mint-token`; the gateway holds the upstream keys.
//
// What the bundle can do is read from its --help, so that a bundle from before issue 9/10 fails
// with a message naming what is missing rather than with an agent's retry loop:
//   - `agent-config --agent <name>`         (issue 9: codex; issue 10: claude-code)
//   - `--providers FILE` with kind anthropic (issue 10: the Messages API); without it the
//     UPSTREAM_* shorthand serves the OpenAI protocols only
//   - the route itself: probed with an invalid body, which a served route answers 400 and an
//     unknown one 404, and which is never forwarded.
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { BUNDLE, runProxyCommand, startProxy, type ProxyProcess } from '../../test/support/proxy-process.ts';
import type { AgentSpec } from './agents/types.ts';

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
  /** Why this bundle cannot serve the agent (an Unsupported error), or its agent-config output. */
  configFor(agent: AgentSpec): Promise<string>;
  output(): string;
  stop(): Promise<void>;
}

function help(): Promise<string> {
  return runProxyCommand(['--help']).then((r) => r.stdout + r.stderr);
}

export async function startGateway(agents: readonly AgentSpec[], upstreams: GatewayUpstreams, tempDir: string): Promise<Gateway> {
  if (!existsSync(BUNDLE)) throw new Unsupported(`${BUNDLE} is missing: build it first (npm run build); e2e:agents builds nothing itself`);
  const usage = await help();
  const hasProviders = /--providers\b/.test(usage);
  const hasAgentFlag = /--agent\b/.test(usage);

  const signingKey = randomBytes(32).toString('hex');
  const keys = { openai: `sk-e2e-openai-${randomBytes(12).toString('hex')}`, anthropic: `sk-ant-e2e-${randomBytes(12).toString('hex')}` };
  const modelsOf = (kind: 'openai' | 'anthropic') => agents.filter((a) => a.providerKind === kind).map((a) => a.model);
  const env: Record<string, string> = { MODEL_PROXY_SIGNING_KEY: signingKey };
  const args = ['--model-gateway-listen', '127.0.0.1:0'];
  const commandArgs: string[] = [];
  if (hasProviders) {
    // One process for every agent, each on its own provider (issue 10's providers file).
    const file = join(tempDir, 'providers.json');
    const providers = [
      { name: 'openai', kind: 'openai', baseUrl: upstreams.openaiBaseUrl, keyEnv: 'E2E_OPENAI_UPSTREAM_KEY', models: modelsOf('openai'), caFile: upstreams.caFile },
      { name: 'anthropic', kind: 'anthropic', baseUrl: upstreams.anthropicBaseUrl, keyEnv: 'E2E_ANTHROPIC_UPSTREAM_KEY', models: modelsOf('anthropic'), caFile: upstreams.caFile },
    ].filter((p) => p.models.length > 0);
    writeFileSync(file, `${JSON.stringify({ providers }, null, 2)}\n`);
    Object.assign(env, { E2E_OPENAI_UPSTREAM_KEY: keys.openai, E2E_ANTHROPIC_UPSTREAM_KEY: keys.anthropic });
    args.push('--providers', file);
    commandArgs.push('--providers', file);
  } else {
    // Today's one-provider shorthand: OpenAI protocols only.
    Object.assign(env, { UPSTREAM_BASE_URL: upstreams.openaiBaseUrl, UPSTREAM_API_KEY: keys.openai, UPSTREAM_ALLOWED_MODELS: modelsOf('openai').join(','), UPSTREAM_CA_FILE: upstreams.caFile });
  }

  let proxy: ProxyProcess;
  try {
    proxy = await startProxy({ env, args, listeners: ['model'] });
  } catch (err) {
    throw new Unsupported(`the gateway did not start: ${(err as Error).message}`);
  }
  const port = proxy.ports.model!;
  const host = `127.0.0.1:${port}`;
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
      if (agent.providerKind === 'anthropic' && !hasProviders) {
        throw new Unsupported(`${agent.name} needs the gateway to serve Anthropic's Messages API: \`--providers FILE\` with a provider of kind "anthropic" (issue 10); this bundle's --help has no --providers`);
      }
      const status = await probe(port, agent.route, botToken);
      if (status === 404) throw new Unsupported(`${agent.name} needs POST ${agent.route}: the gateway answers 404 (no such route yet; ${agent.protocol === 'responses' ? 'issue 9' : 'issue 10'})`);
      // opencode is agent-config's default and needs no --agent (issue 9 keeps it unchanged).
      if (!hasAgentFlag && agent.name !== 'opencode') {
        throw new Unsupported(`${agent.name} needs \`proxy.js agent-config --agent ${agent.name}\` (${agent.name === 'codex' ? 'issue 9' : 'issue 10'}); this bundle's agent-config has no --agent option`);
      }
      const cmd = ['agent-config', ...(hasAgentFlag ? ['--agent', agent.name] : []), '--proxy-host', host, '--model', agent.model, ...commandArgs];
      const r = await runProxyCommand(cmd, env);
      if (r.code !== 0) throw new Unsupported(`\`proxy.js ${cmd.join(' ')}\` failed (exit ${r.code}): ${r.stderr.trim().split('\n')[0]}`);
      const problem = agent.checkConfig(r.stdout);
      if (problem) throw new Unsupported(`\`proxy.js ${cmd.join(' ')}\` printed a configuration ${agent.name} cannot use: ${problem}`);
      return r.stdout;
    },
  };
}

/** POSTs an invalid body: a served route answers 4xx but not 404; nothing reaches the upstream. */
function probe(port: number, route: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: route, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, 'x-api-key': token }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end('{}');
  });
}
