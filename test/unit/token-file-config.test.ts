// Token files for workloads (issue 28 item 4): what agent-config --token-file and git-config
// --workload-token-file print, checked the way each agent and git read it (a real sh runs the
// helpers; opencode's {file:} pattern is applied as opencode 1.18 applies it).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { checkTokenFilePath, shellWord } from '../../src/config/token-file.ts';
import { agentConfig, claudeCodeConfig, codexConfig, type AgentConfigInput } from '../../src/gateway/agent-config.ts';
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

test('token file path: a relative path or one with a control character is refused naming the flag', () => {
  assert.throws(() => checkTokenFilePath('--token-file', 'tokens/bot'), /--token-file: "tokens\/bot" is not an absolute path/);
  for (const bad of ['/run/a\nb', '/run/a\rb', '/run/a\0b', '/run/a\tb']) assert.throws(() => checkTokenFilePath('--token-file', bad), /--token-file: the path holds a control character/);
  assert.equal(checkTokenFilePath('--token-file', AWKWARD[4]!), AWKWARD[4]);
});

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

test('token file: opencode reads {file:PATH} when it starts; a path its pattern cannot hold ({ } " \\) is refused naming the flag', () => {
  const path = "/run/my tokens/it's $HOME";
  const config = agentConfig({ ...OPENAI, tokenFile: path });
  const text = JSON.stringify(config, null, 2);
  assert.ok(!text.includes('MODEL_PROXY_TOKEN'));
  // As opencode 1.18 finds it: in the raw text, before the JSON is parsed.
  const found = [...text.matchAll(/\{file:[^}]+\}/g)].map((m) => m[0].replace(/^\{file:/, '').replace(/\}$/, ''));
  assert.deepEqual(found, [path]);
  for (const bad of ['/run/a}b', '/run/{env:X}', '/run/a"b', '/run/a\\b']) {
    assert.throws(() => agentConfig({ ...OPENAI, tokenFile: bad }), /--token-file: opencode cannot read .*: its \{file:\.\.\.\} reference takes no \{ \} " or \\ in the path/);
  }
  assert.throws(() => agentConfig({ ...OPENAI, tokenFile: 'token' }), /--token-file: "token" is not an absolute path/);
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

test('token file: git-config refuses --workload-token-file with --workload-token-env, without a proxy host, or relative', () => {
  assert.throws(() => gitWorkloadConfig({ ...GIT, workloadTokenEnv: 'T', workloadTokenFile: '/run/t' }), /give --workload-token-env or --workload-token-file, not both/);
  assert.throws(() => gitWorkloadConfig({ ...GIT, proxyHostEnv: undefined, workloadTokenFile: '/run/t' }), /--workload-token-file needs the proxy host/);
  assert.throws(() => gitWorkloadConfig({ ...GIT, workloadTokenFile: 'run/t' }), /--workload-token-file: "run\/t" is not an absolute path/);
});
