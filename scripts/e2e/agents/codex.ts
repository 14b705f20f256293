// Codex CLI: speaks only the Responses API (`wire_api = "responses"`; "chat" is refused at start-up).
// Headless: `codex exec PROMPT` prints the final answer on stdout, the transcript on stderr.
// Configuration: $CODEX_HOME/config.toml. Found by tracing its connections (strace):
//   - it syncs a plugin marketplace with `git ls-remote https://github.com/openai/plugins.git`
//     at start-up unless `[features] plugins = false`;
//   - it offers the hosted `web_search` tool unless `web_search = "disabled"`;
//   - `check_for_update_on_startup = false` keeps it from asking for new releases;
//   - `[analytics] enabled = false`: no usage analytics (none were seen going out with an API-key
//     provider, but the flag is sent upstream in x-codex-turn-metadata).
// With those, a run connects to the configured base_url only.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentSpec } from './types.ts';

export const codex: AgentSpec = {
  name: 'codex',
  pkg: '@openai/codex',
  version: '0.169.0',
  bin: 'node_modules/.bin/codex',
  protocol: 'responses',
  providerKind: 'openai',
  // A model Codex knows (its bundled catalog): an unknown one works too but with a warning and
  // fallback metadata, which changes the request (no `text`, other tools).
  model: 'gpt-5.5',

  referenceConfig(origin) {
    return `# Codex through the model gateway (what \`proxy.js agent-config --agent codex\` should print).
model = "${this.model}"
model_provider = "gateway"
# The gateway refuses provider-hosted tools; without this Codex offers {"type":"web_search"}.
web_search = "disabled"
# No release check at start-up.
check_for_update_on_startup = false

[analytics]
# Codex reports "analytics_enabled" in every request's x-codex-turn-metadata; off for bots.
enabled = false

[features]
# Else Codex runs \`git ls-remote https://github.com/openai/plugins.git\` at every start.
plugins = false

[model_providers.gateway]
name = "model gateway"
base_url = "${origin}/v1"
# Codex sends "Authorization: Bearer $MODEL_PROXY_TOKEN"; it never holds the upstream key.
env_key = "MODEL_PROXY_TOKEN"
wire_api = "responses"
`;
  },

  checkConfig({ text }) {
    if (!/^\s*\[model_providers\.[^\]]+\]/m.test(text)) return 'no [model_providers.<name>] table';
    if (!/^\s*wire_api\s*=\s*"responses"/m.test(text)) return 'no wire_api = "responses"';
    if (!/^\s*env_key\s*=\s*"MODEL_PROXY_TOKEN"/m.test(text)) return 'no env_key = "MODEL_PROXY_TOKEN"';
    if (!/^\s*base_url\s*=\s*"http:\/\/[^"]+\/v1"/m.test(text)) return 'no base_url = "http://<gateway>/v1"';
    return undefined;
  },

  prepare(sandbox, config, prompt) {
    const codexHome = join(sandbox.home, '.codex');
    mkdirSync(codexHome, { recursive: true });
    writeFileSync(join(codexHome, 'config.toml'), config.text);
    return {
      // The test runs as root in a container where Codex's own sandbox (landlock/bwrap) cannot
      // work and nobody answers approvals: both are bypassed here, not in the config.
      args: ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '--color', 'never', prompt],
      env: { CODEX_HOME: codexHome },
    };
  },
};

/**
 * Codex's other configuration: its built-in OpenAI provider pointed at `origin` (`openai_base_url`,
 * the usual way to put Codex behind a proxy), which opens the Responses API's WebSocket first. The
 * key goes in CODEX_API_KEY: with only OPENAI_API_KEY set, Codex 0.169 sends no Authorization at
 * the upgrade. The same settings as the reference configuration keep it off the network.
 */
export function codexSocketConfig(origin: string, model: string): string {
  return [
    `model = "${model}"`,
    `openai_base_url = "${origin}/v1"`,
    'web_search = "disabled"',
    'check_for_update_on_startup = false',
    '',
    '[analytics]',
    'enabled = false',
    '',
    '[features]',
    'plugins = false',
    '',
  ].join('\n');
}
