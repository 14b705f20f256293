// Token files for workloads (issue 28 item 4): what agent-config --token-file and git-config
// --workload-token-file print: the paths refused, and opencode's {file:} pattern applied as
// opencode 1.18 applies it. The helpers run by a real sh: test/integration/token-file-config.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkTokenFilePath } from '../../src/config/token-file.ts';
import { agentConfig, type AgentConfigInput } from '../../src/gateway/agent-config.ts';
import { gitWorkloadConfig, type GitConfigInput } from '../../src/git/config.ts';

const OPENAI: AgentConfigInput = { provider: 'openai', providerName: undefined, proxyHost: 'gateway', allowedModels: ['gpt-5'], model: undefined, smallModel: undefined };
const GIT: GitConfigInput = { hostKeys: ['github.com'], proxyHostFlag: undefined, proxyHostEnv: 'proxy', credentialHelper: undefined, workloadTokenEnv: undefined };
/** Paths a shell would split, expand or end early on. */
const AWKWARD = ['/run/tokens/plain', '/run/my tokens/bot token', "/run/it's/a 'quoted' token", '/run/$HOME/$(id)/`id`/token', '/run/back\\slash/"double"/;&|<>*?[]!#~%'];

test('token file path: a relative path or one with a control character is refused naming the flag', () => {
  assert.throws(() => checkTokenFilePath('--token-file', 'tokens/bot'), /--token-file: "tokens\/bot" is not an absolute path/);
  for (const bad of ['/run/a\nb', '/run/a\rb', '/run/a\0b', '/run/a\tb']) assert.throws(() => checkTokenFilePath('--token-file', bad), /--token-file: the path holds a control character/);
  assert.equal(checkTokenFilePath('--token-file', AWKWARD[4]!), AWKWARD[4]);
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

test('token file: git-config refuses --workload-token-file with --workload-token-env, without a proxy host, or relative', () => {
  assert.throws(() => gitWorkloadConfig({ ...GIT, workloadTokenEnv: 'T', workloadTokenFile: '/run/t' }), /give --workload-token-env or --workload-token-file, not both/);
  assert.throws(() => gitWorkloadConfig({ ...GIT, proxyHostEnv: undefined, workloadTokenFile: '/run/t' }), /--workload-token-file needs the proxy host/);
  assert.throws(() => gitWorkloadConfig({ ...GIT, workloadTokenFile: 'run/t' }), /--workload-token-file: "run\/t" is not an absolute path/);
});
