import { test } from 'node:test';
import assert from 'node:assert/strict';
import { agentConfig, agentProviders, botClaims, claudeCodeConfig, codexConfig, DEFAULT_GATEWAY_PORT, opencodeConfigDir, opencodeInstallReason, renderAgentConfig, type AgentConfigInput, type MintInput } from '../../src/gateway/agent-config.ts';

const INPUT: AgentConfigInput = {
  provider: 'openai',
  providerName: undefined,
  proxyHost: 'proxy.ns.svc.cluster.local',
  allowedModels: ['gpt-4.1', 'gpt-4.1-mini'],
  model: undefined,
  smallModel: undefined,
};

type ProviderEntry = { name: string; options: { baseURL: string } };
const providerOf = (c: Record<string, unknown>, key: string): ProviderEntry => (c.provider as Record<string, ProviderEntry>)[key]!;

const MINT: MintInput = {
  instanceId: 'bot-7',
  workflow: 'ci/review',
  runId: 'run-42',
  ttlSec: 3600,
  maxLifetimeSec: 86_400,
  nowSec: 1_700_000_000,
};

// ---- agentConfig ----

test('agentConfig is one OpenAI-compatible provider pointing at the gateway on port 8450, and nothing else', () => {
  assert.equal(DEFAULT_GATEWAY_PORT, 8450);
  assert.deepEqual(agentConfig(INPUT), {
    $schema: 'https://opencode.ai/config.json',
    provider: {
      openai: {
        npm: '@ai-sdk/openai-compatible',
        name: 'openai (gateway)',
        options: {
          baseURL: 'http://proxy.ns.svc.cluster.local:8450/v1',
          apiKey: '{env:MODEL_PROXY_TOKEN}',
          includeUsage: true,
        },
        models: {
          'gpt-4.1': { name: 'gpt-4.1' },
          'gpt-4.1-mini': { name: 'gpt-4.1-mini' },
        },
      },
    },
    model: 'openai/gpt-4.1',
    small_model: 'openai/gpt-4.1',
    enabled_providers: ['openai'],
    share: 'disabled',
    autoupdate: false,
    lsp: false,
    formatter: false,
  });
});

test('a proxy host with a port keeps that port in the baseURL', () => {
  const options = providerOf(agentConfig({ ...INPUT, proxyHost: 'gw.internal:9000' }), 'openai').options;
  assert.equal(options.baseURL, 'http://gw.internal:9000/v1');
});

test('the display name, model and small model are taken from the input', () => {
  const c = agentConfig({ ...INPUT, providerName: 'Models', model: 'gpt-4.1-mini', smallModel: 'gpt-4.1' });
  assert.equal(providerOf(c, 'openai').name, 'Models');
  assert.equal(c.model, 'openai/gpt-4.1-mini');
  assert.equal(c.small_model, 'openai/gpt-4.1');
});

test('the small model defaults to the default model', () => {
  assert.equal(agentConfig({ ...INPUT, model: 'gpt-4.1-mini' }).small_model, 'openai/gpt-4.1-mini');
});

test('the provider key is used everywhere the provider is named', () => {
  const c = agentConfig({ ...INPUT, provider: 'azure' });
  assert.deepEqual(Object.keys(c.provider as object), ['azure']);
  assert.equal(c.model, 'azure/gpt-4.1');
  assert.deepEqual(c.enabled_providers, ['azure']);
});

test('the agent config never carries an upstream key, only the MODEL_PROXY_TOKEN reference', () => {
  const text = JSON.stringify(agentConfig(INPUT));
  assert.ok(!text.includes('UPSTREAM_API_KEY'), text);
  assert.ok(text.includes('"apiKey":"{env:MODEL_PROXY_TOKEN}"'), text);
});

test('a missing proxy host is an error saying how to give one', () => {
  for (const proxyHost of [undefined, '']) {
    assert.throws(() => agentConfig({ ...INPUT, proxyHost }), /--proxy-host or MODEL_GATEWAY_PROXY_HOST/);
  }
});

test('a proxy host that is not host or host:port is rejected', () => {
  for (const proxyHost of ['http://gw', 'gw/v1', 'gw:0', 'gw:65536', 'gw:', 'gw:abc', 'user@gw', 'g w', '[::1]:8450']) {
    assert.throws(() => agentConfig({ ...INPUT, proxyHost }), /is not host or host:port/, proxyHost);
  }
});

test('an empty allowlist is an error', () => {
  assert.throws(() => agentConfig({ ...INPUT, allowedModels: [] }), /no model is allowed/);
});

test('a model or small model outside the allowlist is an error naming it', () => {
  assert.throws(() => agentConfig({ ...INPUT, model: 'gpt-5' }), /model "gpt-5" is not allowed/);
  assert.throws(() => agentConfig({ ...INPUT, smallModel: 'gpt-5-nano' }), /model "gpt-5-nano" is not allowed/);
});

// ---- opencode's configuration directory ----

const PLUGIN_RECORD = { '@opencode-ai/plugin': '1.18.33' };

test('agent locked to the gateway: opencode --config-dir writes opencode.json, the record of the plugin install opencode checks at start (package.json and package-lock.json naming @opencode-ai/plugin) and its .gitignore, and prints the two switches its config file cannot hold', () => {
  const { files, text } = opencodeConfigDir(INPUT, {});
  assert.deepEqual(Object.keys(files), ['opencode.json', 'package.json', 'package-lock.json', '.gitignore']);
  assert.deepEqual(JSON.parse(files['opencode.json']!), agentConfig(INPUT));
  assert.deepEqual(JSON.parse(files['package.json']!), { dependencies: PLUGIN_RECORD });
  assert.deepEqual(JSON.parse(files['package-lock.json']!).packages[''], { dependencies: PLUGIN_RECORD });
  assert.equal(opencodeInstallReason(files['package.json'], files['package-lock.json']), undefined, 'what it writes is what opencode accepts as installed');
  assert.deepEqual(files['.gitignore']!.split('\n'), ['node_modules', 'package.json', 'package-lock.json', 'bun.lock', '.gitignore', '']);
  // Sourceable: comments, then one export per switch, nothing else.
  const lines = text.trimEnd().split('\n');
  assert.deepEqual(lines.filter((l) => !l.startsWith('#')), ['export OPENCODE_DISABLE_MODELS_FETCH=1', 'export OPENCODE_DISABLE_PROJECT_CONFIG=1']);
  assert.match(text, /\$XDG_CONFIG_HOME\/opencode/);
});

test('agent locked to the gateway: opencode --config-dir keeps a directory\'s own install record when opencode would not install over it, and refuses one it would', () => {
  const lock = (deps: Record<string, string>) => JSON.stringify({ lockfileVersion: 3, packages: { '': { dependencies: deps } } });
  // A real install (the plugin and a plugin's own dependency) is left as it is; .gitignore too.
  const ownPkg = JSON.stringify({ dependencies: { ...PLUGIN_RECORD, 'left-pad': '1.3.0' } });
  const kept = opencodeConfigDir(INPUT, { 'package.json': ownPkg, 'package-lock.json': lock({ ...PLUGIN_RECORD, 'left-pad': '1.3.0' }), '.gitignore': 'mine\n' });
  assert.deepEqual(Object.keys(kept.files), ['opencode.json']);
  // Records opencode would install over: a dependency the lock lacks, the plugin missing, one file alone, not JSON.
  const refused: [string | undefined, string | undefined, RegExp][] = [
    [ownPkg, lock(PLUGIN_RECORD), /does not name left-pad/],
    [JSON.stringify({}), lock({}), /does not name @opencode-ai\/plugin/],
    [JSON.stringify({ devDependencies: { vitest: '3' } }), lock(PLUGIN_RECORD), /does not name vitest/],
    [undefined, lock(PLUGIN_RECORD), /missing or not JSON/],
    [ownPkg, undefined, /missing or not JSON/],
    ['{', lock(PLUGIN_RECORD), /missing or not JSON/],
  ];
  for (const [pkg, lockText, reason] of refused) {
    const existing = { ...(pkg === undefined ? {} : { 'package.json': pkg }), ...(lockText === undefined ? {} : { 'package-lock.json': lockText }) };
    assert.throws(() => opencodeConfigDir(INPUT, existing), (err: Error) => /^--config-dir: opencode would npm-install into the directory at every start: /.test(err.message) && reason.test(err.message), JSON.stringify(existing));
  }
});

test('opencode --config-dir checks the gateway address and the models before anything is written', () => {
  assert.throws(() => opencodeConfigDir({ ...INPUT, proxyHost: undefined }, {}), /--proxy-host/);
  assert.throws(() => opencodeConfigDir({ ...INPUT, model: 'gpt-5' }, {}), /model "gpt-5" is not allowed/);
});

// ---- botClaims ----

test('botClaims maps the flags to sub, workflow and run_id, with iat now and exp now + ttl', () => {
  assert.deepEqual(botClaims(MINT), { sub: 'bot-7', workflow: 'ci/review', run_id: 'run-42', iat: 1_700_000_000, exp: 1_700_003_600 });
});

test('each of --instance-id, --workflow and --run-id is required', () => {
  assert.throws(() => botClaims({ ...MINT, instanceId: undefined }), /--instance-id is required/);
  assert.throws(() => botClaims({ ...MINT, workflow: undefined }), /--workflow is required/);
  assert.throws(() => botClaims({ ...MINT, runId: undefined }), /--run-id is required/);
});

test('a claim value with a bad character, empty or too long is rejected naming the flag', () => {
  const flags: [keyof MintInput, string][] = [
    ['instanceId', 'instance-id'],
    ['workflow', 'workflow'],
    ['runId', 'run-id'],
  ];
  for (const [field, flag] of flags) {
    for (const bad of ['', 'a b', 'a,b', 'é', 'a\nb', 'a'.repeat(129)]) {
      assert.throws(() => botClaims({ ...MINT, [field]: bad }), new RegExp(`--${flag} may hold`), `${flag}: ${JSON.stringify(bad)}`);
    }
  }
});

test('the ttl must be at least 1s and at most the max token lifetime', () => {
  assert.throws(() => botClaims({ ...MINT, ttlSec: 0 }), /--ttl must be between 1s and .*\(86400s\)/);
  assert.throws(() => botClaims({ ...MINT, ttlSec: 86_401 }), /--ttl must be between/);
  assert.equal(botClaims({ ...MINT, ttlSec: 1 }).exp, MINT.nowSec + 1);
  assert.equal(botClaims({ ...MINT, ttlSec: 86_400 }).exp, MINT.nowSec + 86_400);
});

// ---- codexConfig ----

test('codexConfig is a Codex model provider at the gateway speaking the Responses API, with the bot token from MODEL_PROXY_TOKEN and nothing that reaches beyond the gateway', () => {
  assert.equal(
    codexConfig({ ...INPUT, webSearchAllowed: false }),
    [
      '# Codex through the model gateway: save as $CODEX_HOME/config.toml (default ~/.codex/config.toml).',
      '# Codex sends "Authorization: Bearer $MODEL_PROXY_TOKEN"; it never holds the upstream key.',
      'model = "gpt-4.1"',
      'model_provider = "gateway"',
      '# The gateway refuses provider-hosted tools; without this Codex offers {"type":"web_search"}.',
      'web_search = "disabled"',
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
      'name = "openai (gateway)"',
      'base_url = "http://proxy.ns.svc.cluster.local:8450/v1"',
      'env_key = "MODEL_PROXY_TOKEN"',
      'wire_api = "responses"',
      '',
    ].join('\n'),
  );
});

test('codexConfig leaves web search to Codex only when the operator allows hosted web search', () => {
  const allowed = codexConfig({ ...INPUT, webSearchAllowed: true });
  assert.ok(!allowed.includes('web_search'), allowed);
  // Exactly the disallowed config without its two web_search lines: nothing else changes.
  const denied = codexConfig({ ...INPUT, webSearchAllowed: false }).split('\n');
  const webSearchLines = ['# The gateway refuses provider-hosted tools; without this Codex offers {"type":"web_search"}.', 'web_search = "disabled"'];
  assert.deepEqual(denied.filter((l) => webSearchLines.includes(l)), webSearchLines);
  assert.equal(allowed, denied.filter((l) => !webSearchLines.includes(l)).join('\n'));
});

test('codexConfig with --websocket: the same provider with supports_websockets = true, nothing else changed (Codex then speaks the Responses API over a WebSocket through the gateway)', () => {
  const http = codexConfig({ ...INPUT, webSearchAllowed: false });
  const socket = codexConfig({ ...INPUT, webSearchAllowed: false, websocket: true });
  assert.equal(socket, http.replace('wire_api = "responses"\n', 'wire_api = "responses"\nsupports_websockets = true\n'));
});

test('codexConfig writes TOML strings escaped, and checks models like the opencode config', () => {
  const text = codexConfig({ ...INPUT, providerName: 'Acme "prod" \\ gateway\u007f', webSearchAllowed: false });
  assert.match(text, /^name = "Acme \\"prod\\" \\\\ gateway\\u007f"$/m);
  assert.throws(() => codexConfig({ ...INPUT, model: 'gpt-secret', webSearchAllowed: false }), /model "gpt-secret" is not allowed/);
  assert.throws(() => codexConfig({ ...INPUT, proxyHost: undefined, webSearchAllowed: false }), /--proxy-host/);
});

test('renderAgentConfig prints opencode JSON for opencode, Codex TOML for codex and Claude Code JSON for claude-code', () => {
  assert.deepEqual(JSON.parse(renderAgentConfig('opencode', { ...INPUT, webSearchAllowed: false })), agentConfig(INPUT));
  assert.match(renderAgentConfig('codex', { ...INPUT, webSearchAllowed: false }), /^wire_api = "responses"$/m);
  assert.equal(renderAgentConfig('codex', { ...INPUT, webSearchAllowed: false }), codexConfig({ ...INPUT, webSearchAllowed: false }));
  assert.deepEqual(JSON.parse(renderAgentConfig('claude-code', { ...INPUT, webSearchAllowed: false })), claudeCodeConfig(INPUT));
});

// ---- claudeCodeConfig and the agents' providers ----

test('claudeCodeConfig points ANTHROPIC_BASE_URL at the gateway, prints the bot token from apiKeyHelper and switches off non-essential traffic', () => {
  assert.deepEqual(claudeCodeConfig({ ...INPUT, provider: 'anthropic', allowedModels: ['claude-sonnet-4-5', 'claude-haiku-4-5'], smallModel: 'claude-haiku-4-5' }), {
    apiKeyHelper: 'printf %s "$MODEL_PROXY_TOKEN"',
    model: 'claude-sonnet-4-5',
    env: { ANTHROPIC_BASE_URL: 'http://proxy.ns.svc.cluster.local:8450', ANTHROPIC_DEFAULT_HAIKU_MODEL: 'claude-haiku-4-5', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' },
  });
});

test('each agent sees the models of the providers its protocol reaches only', () => {
  const providers = [
    { name: 'openai', kind: 'openai', models: ['gpt-5', 'gpt-5-mini'], project: undefined, region: undefined },
    { name: 'anthropic', kind: 'anthropic', models: ['claude-sonnet-4-5'], project: undefined, region: undefined },
    { name: 'local', kind: 'openai', models: ['qwen3-coder'], project: undefined, region: undefined },
  ] as const;
  assert.deepEqual(agentProviders('codex', providers, undefined), { provider: 'openai', allowedModels: ['gpt-5', 'gpt-5-mini', 'qwen3-coder'] });
  assert.deepEqual(agentProviders('opencode', providers, 'qwen3-coder'), { provider: 'local', allowedModels: ['gpt-5', 'gpt-5-mini', 'qwen3-coder'] });
  assert.deepEqual(agentProviders('claude-code', providers, undefined), { provider: 'anthropic', allowedModels: ['claude-sonnet-4-5'] });
  assert.throws(() => agentProviders('claude-code', providers.filter((p) => p.kind === 'openai'), undefined), /no anthropic or anthropic-vertex or anthropic-bedrock provider is configured/);
});

test('agent-config for Claude Code in its Bedrock or Vertex mode: the mode of the provider that owns the model, its region and project, skip-auth, the bot token from the helper (as recorded), the cloud models only', () => {
  const providers = [
    { name: 'anthropic', kind: 'anthropic', models: ['claude-sonnet-5'], project: undefined, region: undefined },
    { name: 'bedrock', kind: 'anthropic-bedrock', models: ['us.anthropic.claude-opus-5-5', 'us.anthropic.claude-haiku-4-5-20251001-v1:0'], project: undefined, region: 'us-east-1' },
    { name: 'vertex', kind: 'anthropic-vertex', models: ['claude-opus-5-5'], project: 'proj-1', region: 'us-east5' },
  ] as const;
  const bedrock = agentProviders('claude-code', providers, 'us.anthropic.claude-opus-5-5');
  assert.deepEqual(bedrock, { provider: 'bedrock', allowedModels: ['us.anthropic.claude-opus-5-5', 'us.anthropic.claude-haiku-4-5-20251001-v1:0'], cloud: { kind: 'anthropic-bedrock', project: undefined, region: 'us-east-1' } });
  const input = { provider: bedrock.provider, providerName: undefined, proxyHost: 'gw.ns.svc', allowedModels: bedrock.allowedModels, model: 'us.anthropic.claude-opus-5-5', smallModel: 'us.anthropic.claude-haiku-4-5-20251001-v1:0', cloud: bedrock.cloud };
  assert.deepEqual(claudeCodeConfig(input), {
    apiKeyHelper: 'printf %s "$MODEL_PROXY_TOKEN"',
    model: 'us.anthropic.claude-opus-5-5',
    env: { CLAUDE_CODE_USE_BEDROCK: '1', ANTHROPIC_BEDROCK_BASE_URL: 'http://gw.ns.svc:8450', CLAUDE_CODE_SKIP_BEDROCK_AUTH: '1', AWS_REGION: 'us-east-1', ANTHROPIC_DEFAULT_HAIKU_MODEL: 'us.anthropic.claude-haiku-4-5-20251001-v1:0', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' },
  });
  const vertex = agentProviders('claude-code', providers, 'claude-opus-5-5');
  assert.deepEqual((claudeCodeConfig({ ...input, ...vertex, model: 'claude-opus-5-5', smallModel: undefined }) as { env: Record<string, string> }).env, {
    CLAUDE_CODE_USE_VERTEX: '1',
    ANTHROPIC_VERTEX_BASE_URL: 'http://gw.ns.svc:8450/v1',
    CLAUDE_CODE_SKIP_VERTEX_AUTH: '1',
    ANTHROPIC_VERTEX_PROJECT_ID: 'proj-1',
    CLOUD_ML_REGION: 'us-east5',
    ANTHROPIC_DEFAULT_HAIKU_MODEL: 'claude-opus-5-5',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  });
});

test('renderAgentConfig prints Claude Code settings JSON for claude-code', () => {
  const text = renderAgentConfig('claude-code', { ...INPUT, allowedModels: ['claude-sonnet-4-5'], webSearchAllowed: false });
  assert.equal(JSON.parse(text).env.ANTHROPIC_BASE_URL, 'http://proxy.ns.svc.cluster.local:8450');
});
