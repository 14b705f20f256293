// The commands other than `serve`: each takes the parsed command line and its surroundings (the
// environment, the clock, where its notices go) and returns what it prints on stdout.
import { randomBytes } from 'node:crypto';
import { asUsageError, usage, UsageError, type CommandLine } from '../config/cli.ts';
import { VERSION } from '../config/version.ts';
import { agentProviders, AGENTS, botClaims, opencodeConfigDir, renderAgentConfig, type AgentName } from '../gateway/agent-config.ts';
import { gitWorkloadConfig } from '../git/config.ts';
import { gitScopeClaim, unregisteredScopeHost } from '../git/scope.ts';
import { signBotToken, tokenIdFrom } from '../auth/jwt.ts';
import { addRevocation, type Revocation } from '../auth/revocations.ts';
import { addStoreRevocation } from '../auth/redis-revocations.ts';
import { aboveCeilingReason, parseLimitsFile } from '../limits/policy.ts';
import { RespClient } from '../store/resp.ts';
import { showAddress } from '../store/node.ts';
import { storeConnection, storeFlags } from '../store/config.ts';
import { describeMarker, formatMarker, newEpoch, STATE_KEY } from '../store/state-marker.ts';
import type { ServeOptions } from '../config/cli.ts';
import { dirNamed, writeConfigDir } from './config-dir.ts';
import { loadGateway, loadHosts, readTextFile } from './load.ts';
import { mintingKey } from './keys.ts';

/** What a command may read and where its notices (stderr) go. */
export interface CommandContext {
  readonly env: NodeJS.ProcessEnv;
  /** The clock, in milliseconds since the epoch. */
  readonly nowMs: () => number;
  /** A line for stderr (a notice beside the output), without its newline. */
  readonly notice: (line: string) => void;
  /** How long revoke and confirm-store-reset wait for the store of --limits-store to answer (absent: --store-reach-timeout). */
  readonly storeReachTimeoutMs?: number;
}

/**
 * A command other than serve, run: what it prints on stdout (a notice beside it goes to
 * ctx.notice). src/main.ts runs the commands through this, and so do the tests that run them in
 * their own process (test/support/command-in-process.ts).
 */
export async function runCommand(cli: CommandLine, ctx: CommandContext): Promise<string> {
  switch (cli.command) {
    case 'help':
      return `${usage()}\n`;
    case 'version':
      return `${VERSION}\n`;
    case 'git-config': {
      const config = gitConfig(cli, ctx);
      if (config.notice) ctx.notice(`proxy: ${config.notice}`);
      return config.text;
    }
    case 'agent-config':
      return agentConfigText(cli, ctx);
    case 'mint-token':
      return `${mintToken(cli, ctx)}\n`;
    case 'revoke':
      return `${await revoke(cli, ctx)}\n`;
    case 'confirm-store-reset':
      return `${await confirmStoreReset(cli, ctx)}\n`;
    case 'serve':
      throw new Error('serve is not a one-shot command: it starts the listeners');
  }
}

/** How long to wait for the shared store: the context's figure (tests), else the command line's. */
function reachMs(cli: CommandLine, ctx: CommandContext): number {
  return ctx.storeReachTimeoutMs ?? cli.options.storeReachTimeoutMs;
}

/** `git-config`: the workload's git configuration, with no secret in it, and a notice for stderr when there is one. */
export function gitConfig(cli: CommandLine, ctx: CommandContext): { text: string; notice?: string } {
  const { env } = ctx;
  return gitWorkloadConfig({
    hostKeys: loadHosts(cli.options, env).map((h) => h.key),
    proxyHostFlag: cli.gitConfig.proxyHost,
    tls: cli.gitConfig.tls,
    proxyHostEnv: env.GIT_AUTH_PROXY_HOST,
    credentialHelper: env.GIT_CREDENTIAL_HELPER,
    workloadTokenEnv: cli.gitConfig.workloadTokenEnv,
    workloadTokenFile: cli.gitConfig.workloadTokenFile,
  });
}

/** `agent-config`: an agent's configuration pointing at the gateway. */
export function agentConfigText(cli: CommandLine, ctx: CommandContext): string {
  const agent = cli.agent.agent as AgentName;
  if (!AGENTS.includes(agent)) throw new UsageError(`--agent: "${agent}" is not an agent agent-config knows; use ${AGENTS.join(', ')}`);
  const dir = cli.agent.configDir;
  if (dir !== undefined && agent !== 'opencode') throw new UsageError(`--config-dir is for --agent opencode: ${agent}'s whole configuration is the file agent-config prints`);
  if (dir !== undefined && !dirNamed(dir, 'opencode')) throw new UsageError(`--config-dir: "${dir}" is not named opencode: opencode reads $XDG_CONFIG_HOME/opencode (default ~/.config/opencode), and npm-installs there if these files are elsewhere`);
  const gateway = loadGateway(cli.options, ctx.env);
  if (cli.agent.websocket && agent !== 'codex') throw new UsageError(`--websocket: only Codex speaks the Responses API over a WebSocket, not ${agent}`);
  if (cli.agent.websocket && !gateway.providers.some((p) => p.websocket)) throw new UsageError('--websocket: no provider of the gateway serves the WebSocket mode (OpenAI\'s own API does unless set; another needs "websocket": true in the providers file, or UPSTREAM_WEBSOCKET=true)');
  const input = {
    ...agentProviders(agent, gateway.providers, cli.agent.model),
    providerName: cli.agent.providerName,
    proxyHost: cli.agent.proxyHost ?? ctx.env.MODEL_GATEWAY_PROXY_HOST,
    model: cli.agent.model,
    smallModel: cli.agent.smallModel,
    tokenFile: cli.agent.tokenFile,
    webSearchAllowed: cli.options.allowHostedTools.includes('web_search'),
    websocket: cli.agent.websocket,
  };
  if (dir !== undefined) return writeConfigDir(dir, ['package.json', 'package-lock.json', '.gitignore'], (existing) => opencodeConfigDir(input, existing));
  if (agent === 'opencode') ctx.notice('agent-config: opencode.json alone lets opencode fetch its model catalogue and npm-install a plugin at every start; --config-dir writes what stops that and prints the environment it needs (docs/gateway.md#opencode-locked-down)');
  return renderAgentConfig(agent, input);
}

/** `mint-token`: a bot token for the gateway, or with --git-repo a workload token for the git proxy (never both in one). */
export function mintToken(cli: CommandLine, ctx: CommandContext): string {
  const { env } = ctx;
  // With the gateway's --limits file at hand, a limit asked above its ceiling is an error: the
  // gateway would apply the ceiling, and the orchestrator would believe in another budget.
  if (cli.options.limitsFile !== undefined) {
    const { budgetUsd, maxConcurrent: concurrent, requestsPerMinute, tokensPerMinute } = cli.mint;
    const policy = parseLimitsFile(readTextFile(cli.options.limitsFile, '--limits:'), cli.options.limitsFile);
    const above = aboveCeilingReason(policy, { budgetUsd, concurrent, requestsPerMinute, tokensPerMinute }, cli.options.limitsFile);
    if (above) throw new Error(above);
  }
  // Its own id, printed on stderr once the token is signed (never for one refused), to revoke
  // this token alone (`revoke --token-id`).
  const jti = tokenIdFrom(randomBytes(12));
  const issued = (token: string): string => {
    ctx.notice(`mint-token: token id ${jti} (stop it before it expires: proxy.js revoke --token-id ${jti} with --revocations FILE or --limits-store URL)`);
    return token;
  };
  // A missing or malformed flag is a usage error (exit 2), like an unknown one.
  const claims = asUsageError(() =>
    botClaims({
      ...cli.mint,
      ttlSec: Math.floor(cli.mint.ttlMs / 1000),
      maxLifetimeSec: Math.floor(cli.options.maxTokenLifetimeMs / 1000),
      nowSec: Math.floor(ctx.nowMs() / 1000),
    }),
  );
  if (cli.mint.gitRepos.length > 0) {
    const git = asUsageError(() => gitScopeClaim(cli.mint.gitRepos));
    const registered = loadHosts(cli.options, env).map((h) => h.key);
    const unknown = asUsageError(() => unregisteredScopeHost(git, registered));
    if (unknown === 'unchecked') ctx.notice('mint-token: no git host is registered in this environment (GIT_HOST_A, GIT_HOST_B, --git-hosts): the scope\'s hosts were not checked against the registry');
    const gitSigner = mintingKey('git', env, cli.mint.signingKeyFile);
    if (!gitSigner) throw new Error('mint-token: --git-repo makes a token for the git proxy, and GIT_PROXY_SIGNING_KEY is not set; set it (or GIT_PROXY_SIGNING_KEY_FILE), or give the private key of one of --git-keys with --signing-key KID.pem');
    return issued(signBotToken({ ...claims, git, jti }, gitSigner));
  }
  const botSigner = mintingKey('model', env, cli.mint.signingKeyFile);
  if (!botSigner) throw new Error('mint-token: MODEL_PROXY_SIGNING_KEY is not set; set it (or MODEL_PROXY_SIGNING_KEY_FILE), or give the private key of one of --bot-keys with --signing-key KID.pem');
  return issued(signBotToken({ ...claims, jti }, botSigner));
}

/**
 * `revoke`: adds a run, an instance or a token to the deny list both listeners read (the
 * --revocations file, the shared store of --limits-store, or both), for as long as a token it
 * names could live.
 */
export async function revoke(cli: CommandLine, ctx: CommandContext): Promise<string> {
  const { revocationsFile: file, limitsStore } = cli.options;
  if (file === undefined && limitsStore === 'memory') throw new UsageError('revoke: give --revocations FILE (the deny-list file the listeners read) or --limits-store redis://HOST:PORT (the store they share), or both');
  const named = ([['run_id', cli.mint.runId], ['instance_id', cli.mint.instanceId], ['token_id', cli.mint.tokenId]] as const).filter(([, v]) => v !== undefined);
  if (named.length !== 1) throw new UsageError('revoke: give exactly one of --run-id, --instance-id, --token-id');
  const [key, value] = named[0]!;
  const nowSec = Math.floor(ctx.nowMs() / 1000);
  const until = nowSec + Math.floor(cli.options.maxTokenLifetimeMs / 1000) + 60;
  const where: string[] = [];
  if (file !== undefined) {
    const count = addRevocation(file, { [key]: value, until } as unknown as Revocation, nowSec);
    where.push(`${count} entries in ${file}`);
  }
  if (limitsStore !== 'memory') {
    const { client, at } = await connectToStore(cli.options, reachMs(cli, ctx), 'revoke', 'nothing was revoked there');
    try {
      await addStoreRevocation(client, key, value!, until - nowSec);
    } finally {
      client.close();
    }
    where.push(`in the store at ${at}`);
  }
  return `revoked ${key} ${value} until ${new Date(until * 1000).toISOString()} (${where.join('; ')}); both listeners refuse its tokens from their next request`;
}

/**
 * `confirm-store-reset`: tells the gateways that the shared store's state, as it is now, is the
 * one to trust: a new marker of kind confirmed. Gateways that refuse calls because the store lost
 * its state serve again at their next check of the marker (within a second).
 */
export async function confirmStoreReset(cli: CommandLine, ctx: CommandContext): Promise<string> {
  if (cli.options.limitsStore === 'memory') throw new UsageError('confirm-store-reset: give --limits-store redis://HOST:PORT (the store the gateways share)');
  const { client, at } = await connectToStore(cli.options, reachMs(cli, ctx), 'confirm-store-reset', 'nothing was confirmed');
  try {
    const found = await client.command(['GET', STATE_KEY]);
    if (found !== null && typeof found !== 'string') throw new Error(`confirm-store-reset: the store answered GET ${STATE_KEY} with something else; nothing was confirmed`);
    const marker = { kind: 'confirmed', epoch: newEpoch(), sinceSec: Math.floor(ctx.nowMs() / 1000) } as const;
    const reply = await client.command(['SET', STATE_KEY, formatMarker(marker)]);
    if (reply !== 'OK') throw new Error('confirm-store-reset: the store refused the marker; nothing was confirmed');
    return `confirmed the store at ${at} (${describeMarker(found)}): the gateways trust its state as it is now, revocations and spend before included, from their next check (within a second)`;
  } finally {
    client.close();
  }
}

/**
 * A one-off connection to the store of --limits-store (for a command), up within `timeoutMs`;
 * else an error naming the command, why it could not connect, and `consequence`.
 */
async function connectToStore(options: ServeOptions, timeoutMs: number, command: string, consequence: string): Promise<{ client: RespClient; at: string }> {
  const { where, options: connection } = asUsageError(() => storeConnection(storeFlags(options)));
  let connected!: (at: string) => void;
  let lastWhy: string | undefined;
  const up = new Promise<string>((resolve) => (connected = resolve));
  const client = new RespClient({ ...connection, name: 'the limits store', onState: (isUp, why, at) => (isUp ? connected(at === undefined || connection.role !== 'required' ? where : `${where} (${showAddress(at)})`) : (lastWhy = why)) });
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${command}: the store at ${where} could not be reached within ${timeoutMs / 1000} s${lastWhy === undefined ? '' : ` (${lastWhy})`}; ${consequence}`)), timeoutMs)));
  try {
    return { client, at: await Promise.race([up, gaveUp]) };
  } catch (err) {
    client.close();
    throw err;
  } finally {
    clearTimeout(timer);
  }
}
