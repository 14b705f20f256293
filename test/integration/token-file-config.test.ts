// Token files for workloads (issue 28 item 4): what agent-config --token-file and git-config
// --workload-token-file print, run the way each agent and git run it: a real sh runs the
// helpers. The paths refused, and opencode's {file:} pattern as opencode 1.18 applies it, are
// test/unit/token-file-config.test.ts.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { shellWord } from '../../src/config/token-file.ts';
import { claudeCodeConfig, codexConfig, type AgentConfigInput } from '../../src/gateway/agent-config.ts';
import { gitWorkloadConfig, type GitConfigInput } from '../../src/git/config.ts';

const OPENAI: AgentConfigInput = { provider: 'openai', providerName: undefined, proxyHost: 'gateway', allowedModels: ['gpt-5'], model: undefined, smallModel: undefined };
const ANTHROPIC: AgentConfigInput = { ...OPENAI, provider: 'anthropic', allowedModels: ['claude-sonnet-5'] };
const GIT: GitConfigInput = { hostKeys: ['github.com'], proxyHostFlag: undefined, proxyHostEnv: 'proxy', credentialHelper: undefined, workloadTokenEnv: undefined };
/** Paths a shell would split, expand or end early on. */
const AWKWARD = ['/run/tokens/plain', '/run/my tokens/bot token', "/run/it's/a 'quoted' token", '/run/$HOME/$(id)/`id`/token', '/run/back\\slash/"double"/;&|<>*?[]!#~%'];

/** Runs `script` with sh -c, in `dir`, with an empty environment but PATH. */
function sh(script: string, args: readonly string[] = [], dir = '/'): string {
  return execFileSync('sh', ['-c', script, 'sh', ...args], { cwd: dir, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, encoding: 'utf8' });
}

function withTokenFile<T>(name: string, body: (path: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'token-file-'));
  try {
    const path = join(dir, name.replace(/^\/run\//, ''));
    mkdirSync(join(path, '..'), { recursive: true });
    return body(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('shellWord: sh reads back exactly the value, whatever quotes, $, backquotes or spaces it holds', () => {
  for (const value of [...AWKWARD, "'", "''", '', "a'b'c"]) assert.equal(sh(`printf %s ${shellWord(value)}`), value, value);
});

test('token file: Claude Code\'s apiKeyHelper prints the file as it is at each run, with a quoted path; no $MODEL_PROXY_TOKEN; helper answers kept for 0 ms', () => {
  for (const name of AWKWARD) {
    withTokenFile(name, (path) => {
      const settings = claudeCodeConfig({ ...ANTHROPIC, tokenFile: path }) as { apiKeyHelper: string; env: Record<string, string> };
      assert.ok(!JSON.stringify(settings).includes('MODEL_PROXY_TOKEN'));
      assert.equal(settings.env.CLAUDE_CODE_API_KEY_HELPER_TTL_MS, '0');
      // Claude Code runs the helper with a shell, in the project's directory.
      writeFileSync(path, 'token-one\n');
      assert.equal(sh(settings.apiKeyHelper).trim(), 'token-one');
      writeFileSync(path, 'token-two');
      assert.equal(sh(settings.apiKeyHelper), 'token-two', 'read again at the next run of the helper');
    });
  }
});

test('token file: Codex runs cat with the path as its one argument before each call (refresh_interval_ms 1), and has no env_key', () => {
  for (const name of AWKWARD) {
    withTokenFile(name, (path) => {
      const toml = codexConfig({ ...OPENAI, tokenFile: path, webSearchAllowed: false });
      assert.ok(!toml.includes('env_key'), 'Codex refuses auth together with env_key');
      const auth = toml.slice(toml.indexOf('[model_providers.gateway.auth]'));
      assert.match(auth, /^\[model_providers\.gateway\.auth\]\ncommand = "cat"\nargs = \[(".*")\]\nrefresh_interval_ms = 1\n$/);
      // A TOML basic string as we write it is a JSON string: the one argument Codex passes.
      const arg = JSON.parse(/args = \[(".*")\]/.exec(auth)![1]!) as string;
      assert.equal(arg, path);
      writeFileSync(path, 'codex-token\n');
      assert.equal(execFileSync('cat', [arg], { encoding: 'utf8' }).trim(), 'codex-token');
    });
  }
});

test('token file: git-config --workload-token-file writes a helper that answers get with the file at each call, quoted for any path, and says which file is missing', () => {
  for (const name of AWKWARD) {
    withTokenFile(name, (path) => {
      const { text } = gitWorkloadConfig({ ...GIT, workloadTokenFile: path });
      const dir = join(path, '..');
      const configFile = join(dir, 'proxy.gitconfig');
      writeFileSync(configFile, text);
      const helper = execFileSync('git', ['config', '-f', configFile, '--get-all', 'credential.http://proxy:8447.helper'], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1' } })
        .split('\n')
        .slice(0, -1);
      assert.equal(helper[0], '', 'the empty helper first');
      const command = helper[1]!.replace(/^!/, '');
      writeFileSync(path, 'first\n');
      assert.equal(sh(`${command} "$@"`, ['get']), 'username=workload\npassword=first\n');
      writeFileSync(path, 'second');
      assert.equal(sh(`${command} "$@"`, ['get']), 'username=workload\npassword=second\n');
      assert.equal(sh(`${command} "$@"`, ['store']), '', 'store is ignored');
      rmSync(path);
      const out = execFileSync('sh', ['-c', `${command} "$@" 2>&1`, 'sh', 'get'], { encoding: 'utf8' });
      assert.equal(out, `git-auth-proxy: the workload token file ${path} is missing, unreadable or empty: no workload token for git to present\n`);
    });
  }
});
