// Claude Code: speaks only Anthropic's Messages API (`POST /v1/messages?beta=true`). The npm
// package is a wrapper whose postinstall puts a native binary in place (its `engines` says
// node >= 22, which only matters without that binary). Headless: `claude -p PROMPT` prints the
// answer on stdout. Configuration: settings.json in $CLAUDE_CONFIG_DIR, whose `env` block is
// applied at start-up (ANTHROPIC_BASE_URL works from there).
// Found by tracing its connections (strace): without CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
// it resolves and connects to api.anthropic.com besides the base URL (telemetry, feature flags);
// with it, a run connects to the base URL only.
// With `apiKeyHelper`, the helper's output is sent as both `Authorization: Bearer` and `x-api-key`.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentSpec } from './types.ts';

export const claudeCode: AgentSpec = {
  name: 'claude-code',
  pkg: '@anthropic-ai/claude-code',
  version: '2.1.330',
  bin: 'node_modules/.bin/claude',
  protocol: 'messages',
  providerKind: 'anthropic',
  // A current model: an older one works but prints a retirement notice.
  model: 'claude-sonnet-5',

  referenceConfig(origin) {
    const settings = {
      // Prints the bot token; Claude Code never holds the upstream key.
      apiKeyHelper: 'printf %s "$MODEL_PROXY_TOKEN"',
      model: this.model,
      env: {
        ANTHROPIC_BASE_URL: origin,
        // No telemetry, error reporting, feature-flag or update traffic: the bot has no other way out.
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      },
    };
    return `${JSON.stringify(settings, null, 2)}\n`;
  },

  checkConfig({ text }) {
    let settings: { apiKeyHelper?: string; env?: Record<string, string> };
    try {
      settings = JSON.parse(text) as typeof settings;
    } catch {
      return 'not JSON';
    }
    if (!/^http:\/\/[^/]+\/?$/.test(settings.env?.ANTHROPIC_BASE_URL ?? '')) return `env.ANTHROPIC_BASE_URL ${String(settings.env?.ANTHROPIC_BASE_URL)} is not http://<gateway> (no path: Claude Code adds /v1/messages)`;
    if (!settings.apiKeyHelper?.includes('MODEL_PROXY_TOKEN')) return 'no apiKeyHelper that prints $MODEL_PROXY_TOKEN';
    if (settings.env?.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC !== '1') return 'env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC is not "1"';
    return undefined;
  },

  prepare(sandbox, config, prompt) {
    const configDir = join(sandbox.home, '.claude');
    mkdirSync(configDir, { recursive: true });
    writeFileSync(join(configDir, 'settings.json'), config.text);
    return {
      // Headless runs get no permission prompts: the Bash tool is allowed for the tool turn.
      args: ['-p', prompt, '--allowedTools', 'Bash'],
      env: { CLAUDE_CONFIG_DIR: configDir },
    };
  },
};
