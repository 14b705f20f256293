// opencode: speaks chat completions through its bundled `@ai-sdk/openai-compatible` provider
// (1.18 bundles it: nothing is fetched for the provider). Headless: `opencode run PROMPT`
// prints the answer on stdout, tool calls on stderr. Configuration: opencode.json in
// $XDG_CONFIG_HOME/opencode, the same shape `proxy.js agent-config` prints today.
// Found by tracing its connections (strace), three things reach out unless handled:
//   - GET https://models.opencode.ai/api.json (the model catalog): OPENCODE_DISABLE_MODELS_FETCH=1;
//   - an npm install of `@opencode-ai/plugin@<its version>` into every config directory (with
//     @opentui/*, effect, zod, ... from registry.npmjs.org) on every start: opencode skips it when
//     the directory already has node_modules and a package.json + package-lock.json that name the
//     package, so the installer puts that install in the cache once and each run links it in;
//   - auto-update and sharing: OPENCODE_DISABLE_AUTOUPDATE=1, OPENCODE_DISABLE_SHARE=1 (and
//     "share": "disabled" in the config).
import { copyFileSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureDependencyDir, installDir } from '../install.ts';
import type { AgentSpec } from './types.ts';

const VERSION = '1.18.33';
const configDeps = (): string => join(installDir({ pkg: 'opencode-ai', version: VERSION }), 'opencode-config-deps');

export const opencode: AgentSpec = {
  name: 'opencode',
  pkg: 'opencode-ai',
  version: VERSION,
  bin: 'node_modules/.bin/opencode',
  protocol: 'chat-completions',
  providerKind: 'openai',
  model: 'gpt-4.1',

  referenceConfig(origin) {
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
    };
    return `${JSON.stringify(config, null, 2)}\n`;
  },

  checkConfig(text) {
    let config: { provider?: Record<string, { npm?: string; options?: { baseURL?: string; apiKey?: string }; models?: Record<string, unknown> }>; model?: string };
    try {
      config = JSON.parse(text) as typeof config;
    } catch {
      return 'not JSON';
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

  prefetch(log) {
    ensureDependencyDir(configDeps(), `@opencode-ai/plugin@${VERSION}`, log);
  },

  prepare(sandbox, config, prompt) {
    const xdg = { config: join(sandbox.home, '.config'), data: join(sandbox.home, '.local', 'share'), cache: join(sandbox.home, '.cache'), state: join(sandbox.home, '.local', 'state') };
    const configDir = join(xdg.config, 'opencode');
    mkdirSync(configDir, { recursive: true });
    writeFileSync(join(configDir, 'opencode.json'), config);
    // The pre-installed config-directory dependency (see the top of this file).
    for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(configDeps(), f), join(configDir, f));
    symlinkSync(join(configDeps(), 'node_modules'), join(configDir, 'node_modules'));
    return {
      args: ['run', prompt],
      env: {
        XDG_CONFIG_HOME: xdg.config,
        XDG_DATA_HOME: xdg.data,
        XDG_CACHE_HOME: xdg.cache,
        XDG_STATE_HOME: xdg.state,
        OPENCODE_DISABLE_MODELS_FETCH: '1',
        OPENCODE_DISABLE_AUTOUPDATE: '1',
        OPENCODE_DISABLE_SHARE: '1',
        OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
      },
    };
  },
};
