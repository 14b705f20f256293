// The bot side of the model gateway: each agent's configuration file, and the claims of a bot
// token. Pure: inputs in, file text or claims out.
import { IDENTITY_VALUE, type BotClaims } from '../auth/jwt.ts';
import { parseServiceHost } from '../http/address.ts';
import { checkTokenFilePath, shellWord } from '../config/token-file.ts';
import type { ProviderConfig } from './config.ts';
import type { ProviderKind } from './protocols/protocol.ts';

export const DEFAULT_GATEWAY_PORT = 8450;

export interface AgentConfigInput {
  readonly provider: string;
  readonly providerName: string | undefined;
  readonly proxyHost: string | undefined;
  readonly allowedModels: readonly string[];
  readonly model: string | undefined;
  readonly smallModel: string | undefined;
  /** Claude Code in a cloud mode: the provider's kind, project and region (the paths name them). */
  readonly cloud?: CloudMode;
  /** `--token-file PATH`: the agent reads the bot token from this file, not from $MODEL_PROXY_TOKEN. */
  readonly tokenFile?: string | undefined;
}

export interface CloudMode {
  readonly kind: 'anthropic-vertex' | 'anthropic-bedrock';
  readonly project: string | undefined;
  readonly region: string;
}

/** The agents agent-config writes for, and the provider kinds whose protocol each speaks. */
const AGENT_KINDS = {
  opencode: ['openai'],
  codex: ['openai'],
  // Claude Code speaks the Messages API directly, or in its Vertex and Bedrock modes.
  'claude-code': ['anthropic', 'anthropic-vertex', 'anthropic-bedrock'],
} as const satisfies Record<string, readonly ProviderKind[]>;
export type AgentName = keyof typeof AGENT_KINDS;
export const AGENTS = Object.keys(AGENT_KINDS) as AgentName[];

/**
 * An agent sees the models of the providers its protocol reaches (opencode and Codex the OpenAI
 * kind, Claude Code the Anthropic kind), named after the provider that owns its default model.
 */
export function agentProviders(agent: AgentName, providers: readonly Pick<ProviderConfig, 'name' | 'kind' | 'models' | 'project' | 'region'>[], model: string | undefined): { provider: string; allowedModels: string[]; cloud?: CloudMode } {
  const kinds: readonly ProviderKind[] = AGENT_KINDS[agent];
  const reachable = providers.filter((p) => kinds.includes(p.kind));
  if (reachable.length === 0) throw new Error(`agent-config: no ${kinds.join(' or ')} provider is configured (UPSTREAM_* or --providers), and ${agent} speaks only its protocol`);
  const wanted = model ?? reachable[0]!.models[0];
  const owner = reachable.find((p) => wanted !== undefined && p.models.includes(wanted)) ?? reachable[0]!;
  // One mode per agent: the models of the providers of the owner's kind.
  const own = reachable.filter((p) => p.kind === owner.kind);
  const allowedModels = own.flatMap((p) => p.models);
  if (owner.kind === 'anthropic-vertex' || owner.kind === 'anthropic-bedrock') {
    return { provider: owner.name, allowedModels, cloud: { kind: owner.kind, project: owner.project, region: owner.region ?? '' } };
  }
  return { provider: owner.name, allowedModels };
}

/** Checks what every agent's config needs: the gateway's address and the models, allowlisted. */
function resolve(input: AgentConfigInput): { origin: string; baseURL: string; model: string; small: string } {
  const host = input.proxyHost;
  if (!host) throw new Error('agent-config: give --proxy-host or MODEL_GATEWAY_PROXY_HOST (the gateway host as bots reach it)');
  const hostPort = parseServiceHost('agent-config', host, DEFAULT_GATEWAY_PORT);
  if (input.allowedModels.length === 0) throw new Error('agent-config: no model is allowed (UPSTREAM_ALLOWED_MODELS or the providers\' models); the agent would have none');
  const model = input.model ?? input.allowedModels[0]!;
  const small = input.smallModel ?? model;
  for (const m of [model, small]) {
    if (!input.allowedModels.includes(m)) throw new Error(`agent-config: model "${m}" is not allowed for this agent's providers`);
  }
  return { origin: `http://${hostPort}`, baseURL: `http://${hostPort}/v1`, model, small };
}

/**
 * opencode's `{file:PATH}` reference: opencode replaces it in the configuration's raw text when it
 * starts (1.18: `/\{file:[^}]+\}/`, before the JSON is parsed), so the path must need no JSON
 * escape and hold no brace; it is read once per opencode process, never per call.
 */
function opencodeFileReference(path: string): string {
  if (/[{}"\\]/.test(path)) throw new Error(`--token-file: opencode cannot read "${path}": its {file:...} reference takes no { } " or \\ in the path; choose another path`);
  return `{file:${path}}`;
}

/**
 * opencode's config: one OpenAI-compatible provider pointing at the gateway, nothing else. What
 * keeps opencode 1.18 off the network that a config file can say is here (sharing, updates, and
 * language servers and formatters, which it npm-installs on demand when enabled); the rest is
 * opencodeConfigDir's.
 */
export function agentConfig(input: AgentConfigInput): Record<string, unknown> {
  const { baseURL, model, small } = resolve(input);
  const tokenFile = input.tokenFile === undefined ? undefined : checkTokenFilePath('--token-file', input.tokenFile);
  return {
    $schema: 'https://opencode.ai/config.json',
    provider: {
      [input.provider]: {
        npm: '@ai-sdk/openai-compatible',
        name: input.providerName ?? `${input.provider} (gateway)`,
        options: {
          baseURL,
          // The agent reads the bot token from its environment or the token file when it starts; it
          // never sees the upstream key.
          apiKey: tokenFile === undefined ? '{env:MODEL_PROXY_TOKEN}' : opencodeFileReference(tokenFile),
          // Ask for the final usage chunk in streams, so that every call's usage is recorded.
          includeUsage: true,
        },
        models: Object.fromEntries(input.allowedModels.map((id) => [id, { name: id }])),
      },
    },
    model: `${input.provider}/${model}`,
    small_model: `${input.provider}/${small}`,
    enabled_providers: [input.provider],
    share: 'disabled',
    autoupdate: false,
    lsp: false,
    formatter: false,
  };
}

/**
 * What opencode 1.18 needs besides its config file to make no call but the gateway's, found by
 * tracing `opencode run` 1.18.33 with strace in a network namespace that has only loopback
 * (docs/gateway.md, "opencode, locked down"). Its config file cannot say these two, so they go in
 * its environment:
 *   OPENCODE_DISABLE_MODELS_FETCH    else it fetches https://models.opencode.ai/api.json at start
 *                                    (and hourly);
 *   OPENCODE_DISABLE_PROJECT_CONFIG  else it reads the opencode.json and .opencode/ of the
 *                                    repository it works in: their plugins npm-installed, their
 *                                    instructions fetched by URL, a dependency install into .opencode/.
 */
const OPENCODE_ENV = [['OPENCODE_DISABLE_MODELS_FETCH', '1'], ['OPENCODE_DISABLE_PROJECT_CONFIG', '1']] as const;

/**
 * At every start opencode npm-installs @opencode-ai/plugin (the helper of plugins written in that
 * directory) into each configuration directory it may write, unless the directory has
 * node_modules and a package-lock.json whose root names the plugin and every dependency of its
 * package.json (1.18 compares the names only). The files below are that record; the package
 * itself is needed only by plugins in the directory. The version is the one traced.
 */
const OPENCODE_DEPENDENCY = { '@opencode-ai/plugin': '1.18.33' };
const OPENCODE_GITIGNORE = 'node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore\n';

/** Why opencode would still npm-install into a directory with this package.json and lock (undefined: it would not). */
export function opencodeInstallReason(packageJson = '', lock = ''): string | undefined {
  const names = (text: string, at: (v: Record<string, Record<string, object>>) => Record<string, object> | undefined): string[] => {
    const o = at(JSON.parse(text) as Record<string, Record<string, object>>);
    return ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies'].flatMap((k) => Object.keys(o?.[k] ?? {}));
  };
  try {
    const locked = names(lock, (v) => v.packages?.[''] as Record<string, object>);
    const missing = [...names(packageJson, (v) => v), ...Object.keys(OPENCODE_DEPENDENCY)].filter((n) => !locked.includes(n));
    return missing.length === 0 ? undefined : `its package-lock.json does not name ${[...new Set(missing)].join(', ')}`;
  } catch {
    return 'its package.json or package-lock.json is missing or not JSON';
  }
}

/**
 * `agent-config --agent opencode --config-dir DIR`: the files to write into DIR (opencode.json
 * always; the dependency record and .gitignore where DIR has none: opencode writes .gitignore at
 * start and stops when it cannot, in a read-only mount) and the text to print, the environment.
 * `existing` holds DIR's package.json, package-lock.json and .gitignore, those it has. A record
 * of DIR's own is kept when it stops the install, and refused when it does not.
 */
export function opencodeConfigDir(input: AgentConfigInput, existing: Readonly<Record<string, string | undefined>>): { files: Record<string, string>; text: string } {
  const files: Record<string, string> = { 'opencode.json': `${JSON.stringify(agentConfig(input), null, 2)}\n` };
  const [pkg, lock] = [existing['package.json'], existing['package-lock.json']];
  if (pkg === undefined && lock === undefined) {
    files['package.json'] = JSON.stringify({ dependencies: OPENCODE_DEPENDENCY });
    files['package-lock.json'] = JSON.stringify({ lockfileVersion: 3, packages: { '': { dependencies: OPENCODE_DEPENDENCY } } });
  } else {
    const reason = opencodeInstallReason(pkg, lock);
    if (reason) throw new Error(`--config-dir: opencode would npm-install into the directory at every start: ${reason}; remove both files, or install what package.json names`);
  }
  if (existing['.gitignore'] === undefined) files['.gitignore'] = OPENCODE_GITIGNORE;
  const envLines = OPENCODE_ENV.map(([name, value]) => `export ${name}=${value}\n`).join('');
  return { files, text: `# opencode: the directory is $XDG_CONFIG_HOME/opencode where it runs, with\n${envLines}` };
}

/** Codex's `auth.refresh_interval_ms` for a token file: its cached token is older at every call. */
const CODEX_TOKEN_REFRESH_MS = 1;

/** A TOML basic string: JSON's escapes for quote, backslash and controls are TOML's too, plus DEL. */
function tomlString(value: string): string {
  return JSON.stringify(value).replaceAll('\u007f', '\\u007f');
}

/**
 * Codex's $CODEX_HOME/config.toml: a model provider at the gateway speaking the Responses API
 * (Codex speaks nothing else), the bot token from $MODEL_PROXY_TOKEN, and the settings that keep
 * Codex inside the gateway's policy and off the network: no hosted web search (unless the
 * operator allows it), no plugin marketplace sync, no update check, no analytics. Each was found
 * by tracing Codex 0.169's connections (scripts/e2e/agents/codex.ts).
 */
export function codexConfig(input: AgentConfigInput & { readonly webSearchAllowed: boolean; readonly websocket?: boolean }): string {
  const { baseURL, model } = resolve(input);
  const tokenFile = input.tokenFile === undefined ? undefined : checkTokenFilePath('--token-file', input.tokenFile);
  const lines = [
    '# Codex through the model gateway: save as $CODEX_HOME/config.toml (default ~/.codex/config.toml).',
    tokenFile === undefined
      ? '# Codex sends "Authorization: Bearer $MODEL_PROXY_TOKEN"; it never holds the upstream key.'
      : '# Codex sends "Authorization: Bearer <the token file\'s content>"; it never holds the upstream key.',
    `model = ${tomlString(model)}`,
    'model_provider = "gateway"',
  ];
  if (!input.webSearchAllowed) {
    lines.push('# The gateway refuses provider-hosted tools; without this Codex offers {"type":"web_search"}.', 'web_search = "disabled"');
  }
  // --websocket (supports_websockets): one connection for the session, each turn sending only
  // what is new, each checked and charged by the gateway as an HTTP call. Without it, HTTP only.
  lines.push(
    'check_for_update_on_startup = false',
    '',
    '[analytics]',
    'enabled = false',
    '',
    '[features]',
    '# Else Codex runs `git ls-remote https://github.com/openai/plugins.git` at every start.',
    'plugins = false',
    '',
    '[model_providers.gateway]',
    `name = ${tomlString(input.providerName ?? `${input.provider} (gateway)`)}`,
    `base_url = ${tomlString(baseURL)}`,
    ...(tokenFile === undefined ? ['env_key = "MODEL_PROXY_TOKEN"'] : []),
    'wire_api = "responses"',
    ...(input.websocket ? ['supports_websockets = true'] : []),
  );
  if (tokenFile !== undefined) {
    // Codex runs the command (no shell: the path is one argument) when its cached token is older
    // than refresh_interval_ms, and again after a 401; 1 ms makes that every call.
    lines.push(
      '',
      '# The bot token: the file as it is at each call (an orchestrator or the kubelet may rewrite it).',
      '[model_providers.gateway.auth]',
      'command = "cat"',
      `args = [${tomlString(tokenFile)}]`,
      `refresh_interval_ms = ${CODEX_TOKEN_REFRESH_MS}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Claude Code's settings.json (in $CLAUDE_CONFIG_DIR, default ~/.claude): the gateway as
 * ANTHROPIC_BASE_URL (Claude Code adds /v1/messages), an apiKeyHelper that prints the bot token
 * at that moment (Claude Code sends it as both Authorization and x-api-key), the models, and
 * CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1: without it Claude Code connects to
 * api.anthropic.com for telemetry and feature flags, and the bot has no other way out.
 */
export function claudeCodeConfig(input: AgentConfigInput): Record<string, unknown> {
  const { origin, model, small } = resolve(input);
  // In every mode the helper's output goes as `Authorization: Bearer` (recorded from Claude Code
  // 2.1 in its Bedrock and Vertex modes), and Claude Code's own cloud authentication is skipped:
  // the gateway holds the cloud credential.
  const mode: Record<string, string> =
    input.cloud?.kind === 'anthropic-bedrock'
      ? { CLAUDE_CODE_USE_BEDROCK: '1', ANTHROPIC_BEDROCK_BASE_URL: origin, CLAUDE_CODE_SKIP_BEDROCK_AUTH: '1', AWS_REGION: input.cloud.region }
      : input.cloud?.kind === 'anthropic-vertex'
        ? { CLAUDE_CODE_USE_VERTEX: '1', ANTHROPIC_VERTEX_BASE_URL: `${origin}/v1`, CLAUDE_CODE_SKIP_VERTEX_AUTH: '1', ANTHROPIC_VERTEX_PROJECT_ID: input.cloud.project ?? '', CLOUD_ML_REGION: input.cloud.region }
        : { ANTHROPIC_BASE_URL: origin };
  const tokenFile = input.tokenFile === undefined ? undefined : checkTokenFilePath('--token-file', input.tokenFile);
  return {
    apiKeyHelper: tokenFile === undefined ? 'printf %s "$MODEL_PROXY_TOKEN"' : `cat -- ${shellWord(tokenFile)}`,
    model,
    env: {
      ...mode,
      // Claude Code keeps the helper's answer for this long, then answers one more call with it
      // while it runs the helper again; 0: every call starts a fresh read (see docs/gateway.md).
      ...(tokenFile === undefined ? {} : { CLAUDE_CODE_API_KEY_HELPER_TTL_MS: '0' }),
      // Background work (titles, summaries) asks for the "haiku" model: keep it on the allowlist.
      ANTHROPIC_DEFAULT_HAIKU_MODEL: small,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    },
  };
}

/** What `agent-config --agent <name>` prints. */
export function renderAgentConfig(agent: AgentName, input: AgentConfigInput & { readonly webSearchAllowed: boolean; readonly websocket?: boolean }): string {
  if (agent === 'codex') return codexConfig(input);
  return `${JSON.stringify(agent === 'claude-code' ? claudeCodeConfig(input) : agentConfig(input), null, 2)}\n`;
}

export interface MintInput {
  readonly instanceId: string | undefined;
  readonly workflow: string | undefined;
  readonly runId: string | undefined;
  readonly ttlSec: number;
  readonly maxLifetimeSec: number;
  readonly nowSec: number;
  readonly budgetUsd?: number;
  readonly maxConcurrent?: number;
  readonly requestsPerMinute?: number;
  readonly tokensPerMinute?: number;
}


/** Claims for `mint-token`, checked against the same rules the gateway verifies with. */
export function botClaims(input: MintInput): BotClaims {
  const need = (flag: string, v: string | undefined): string => {
    if (v === undefined) throw new Error(`mint-token: --${flag} is required`);
    if (!IDENTITY_VALUE.test(v)) throw new Error(`mint-token: --${flag} may hold 1-128 characters of A-Z a-z 0-9 . _ : @ / -`);
    return v;
  };
  const sub = need('instance-id', input.instanceId);
  const workflow = need('workflow', input.workflow);
  const run_id = need('run-id', input.runId);
  if (input.ttlSec < 1 || input.ttlSec > input.maxLifetimeSec) {
    throw new Error(`mint-token: --ttl must be between 1s and the gateway's --max-token-lifetime (${input.maxLifetimeSec}s)`);
  }
  const claims: BotClaims = { sub, workflow, run_id, iat: input.nowSec, exp: input.nowSec + input.ttlSec };
  const limits = {
    ...(input.budgetUsd === undefined ? {} : { budget_usd: input.budgetUsd }),
    ...(input.maxConcurrent === undefined ? {} : { max_concurrent: input.maxConcurrent }),
    ...(input.requestsPerMinute === undefined ? {} : { requests_per_minute: input.requestsPerMinute }),
    ...(input.tokensPerMinute === undefined ? {} : { tokens_per_minute: input.tokensPerMinute }),
  };
  return Object.keys(limits).length === 0 ? claims : { ...claims, limits };
}
