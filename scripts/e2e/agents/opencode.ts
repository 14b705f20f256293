// opencode: speaks chat completions through its bundled `@ai-sdk/openai-compatible` provider
// (1.18 bundles it: nothing is fetched for the provider). Headless: `opencode run PROMPT`
// prints the answer on stdout, tool calls on stderr. Configured by a directory: `proxy.js
// agent-config --agent opencode --config-dir DIR` writes DIR ($XDG_CONFIG_HOME/opencode where
// opencode runs) and prints the environment opencode needs; the harness copies DIR into the
// sandbox and exports what it printed, nothing else.
// Traced with strace (`opencode run` with opencode.json alone makes 6 DNS lookups, A and AAAA:
// models.opencode.ai twice over, registry.npmjs.org once), three things reach out unless handled,
// all handled by agent-config's output (src/gateway/agent-config.ts says how):
//   - GET https://models.opencode.ai/api.json, the model catalogue: OPENCODE_DISABLE_MODELS_FETCH=1;
//   - an npm install of `@opencode-ai/plugin` into every configuration directory it may write,
//     at every start: DIR holds the record of that install (node_modules, and package.json and
//     package-lock.json naming the package), which is all opencode checks;
//   - the repository's own opencode.json and .opencode/ (plugins installed from npm, instructions
//     fetched by URL, the install above into .opencode/): OPENCODE_DISABLE_PROJECT_CONFIG=1. The
//     work directory here carries such a configuration, as a checked-out repository may.
// Updates and sharing are off in opencode.json ("autoupdate": false, "share": "disabled"), and so
// are language servers and formatters, which opencode npm-installs on demand when enabled.
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentSpec } from './types.ts';

const VERSION = '1.18.33';
const EXPORT = /^export ([A-Z_][A-Z0-9_]*)=(\S*)$/gm;

export const opencode: AgentSpec = {
  name: 'opencode',
  pkg: 'opencode-ai',
  version: VERSION,
  bin: 'node_modules/.bin/opencode',
  protocol: 'chat-completions',
  providerKind: 'openai',
  model: 'gpt-4.1',
  configDir: 'opencode',

  referenceConfig(origin, dir) {
    const config = {
      $schema: 'https://opencode.ai/config.json',
      provider: {
        openai: {
          npm: '@ai-sdk/openai-compatible',
          name: 'openai (gateway)',
          options: { baseURL: `${origin}/v1`, apiKey: '{env:MODEL_PROXY_TOKEN}', includeUsage: true },
          models: { [this.model]: { name: this.model } },
        },
      },
      model: `openai/${this.model}`,
      small_model: `openai/${this.model}`,
      enabled_providers: ['openai'],
      share: 'disabled',
      autoupdate: false,
      lsp: false,
      formatter: false,
    };
    const dependencies = { '@opencode-ai/plugin': VERSION };
    mkdirSync(join(dir, 'node_modules'), { recursive: true });
    writeFileSync(join(dir, 'opencode.json'), `${JSON.stringify(config, null, 2)}\n`);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ dependencies }));
    writeFileSync(join(dir, 'package-lock.json'), JSON.stringify({ lockfileVersion: 3, packages: { '': { dependencies } } }));
    writeFileSync(join(dir, '.gitignore'), 'node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore\n');
    return 'export OPENCODE_DISABLE_MODELS_FETCH=1\nexport OPENCODE_DISABLE_PROJECT_CONFIG=1\n';
  },

  checkConfig({ text, dir }) {
    if (dir === undefined) return 'no configuration directory (agent-config --config-dir)';
    if ([...text.matchAll(EXPORT)].length === 0) return 'agent-config printed no `export NAME=value` line';
    let config: { provider?: Record<string, { npm?: string; options?: { baseURL?: string; apiKey?: string }; models?: Record<string, unknown> }>; model?: string };
    try {
      config = JSON.parse(readFileSync(join(dir, 'opencode.json'), 'utf8')) as typeof config;
    } catch (err) {
      return `opencode.json: ${(err as Error).message}`;
    }
    const providers = Object.values(config.provider ?? {});
    if (providers.length !== 1) return `expected one provider, found ${providers.length}`;
    const p = providers[0]!;
    if (p.npm !== '@ai-sdk/openai-compatible') return `provider npm is ${String(p.npm)}, not @ai-sdk/openai-compatible`;
    if (!/^http:\/\/.+\/v1$/.test(p.options?.baseURL ?? '')) return `options.baseURL ${String(p.options?.baseURL)} is not http://<gateway>/v1`;
    if (p.options?.apiKey !== '{env:MODEL_PROXY_TOKEN}') return 'options.apiKey is not {env:MODEL_PROXY_TOKEN}';
    if (!Object.keys(p.models ?? {}).includes(this.model)) return `model ${this.model} is not listed`;
    return undefined;
  },

  prepare(sandbox, config, prompt) {
    if (config.dir === undefined) throw new Error('opencode is configured by a directory (agent-config --config-dir), and none was written');
    const xdg = { config: join(sandbox.home, '.config'), data: join(sandbox.home, '.local', 'share'), cache: join(sandbox.home, '.cache'), state: join(sandbox.home, '.local', 'state') };
    // What agent-config wrote, where opencode reads it; the environment as it printed it.
    cpSync(config.dir, join(xdg.config, 'opencode'), { recursive: true });
    const printed = Object.fromEntries([...config.text.matchAll(EXPORT)].map((m) => [m[1]!, m[2]!]));
    // The repository's own configuration, which the environment must keep opencode from reading:
    // a plugin to npm-install, instructions to fetch, and a .opencode/ to install into.
    mkdirSync(join(sandbox.work, '.opencode'), { recursive: true });
    writeFileSync(join(sandbox.work, 'opencode.json'), JSON.stringify({ plugin: ['opencode-e2e-repository-plugin'], instructions: ['https://example.com/e2e-repository-instructions.md'] }));
    return {
      args: ['run', prompt],
      env: {
        XDG_CONFIG_HOME: xdg.config,
        XDG_DATA_HOME: xdg.data,
        XDG_CACHE_HOME: xdg.cache,
        XDG_STATE_HOME: xdg.state,
        ...printed,
      },
    };
  },
};
