// The commands other than serve (src/run/commands.ts), run as functions: the environment, the
// clock, stderr and the store's reach timeout are passed in, so nothing is spawned. The commands
// that reach a store, against a port nothing listens on: test/integration/commands.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseCommandLine, UsageError } from '../../src/config/cli.ts';
import { agentConfigText, gitConfig, mintToken, revoke, type CommandContext } from '../../src/run/commands.ts';

const KEY = 'k'.repeat(32);
const NOW_MS = Date.UTC(2026, 10, 26, 2, 0, 0);

function context(env: NodeJS.ProcessEnv = {}, storeReachTimeoutMs = 5000): CommandContext & { notices: string[] } {
  const notices: string[] = [];
  return { env, nowMs: () => NOW_MS, notice: (line) => notices.push(line), storeReachTimeoutMs, notices };
}

const payload = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));

test('mint-token: the token is issued at the clock passed in, signed with the environment passed in, and its id told on stderr', () => {
  const ctx = context({ MODEL_PROXY_SIGNING_KEY: KEY });
  const token = mintToken(parseCommandLine(['mint-token', '--instance-id', 'bot-7', '--workflow', 'triage', '--run-id', 'run-42', '--ttl', '1h']), ctx);
  const claims = payload(token);
  assert.equal(claims.iat, NOW_MS / 1000);
  assert.equal(claims.exp, NOW_MS / 1000 + 3600);
  assert.equal(claims.sub, 'bot-7');
  assert.equal(ctx.notices.length, 1);
  assert.match(ctx.notices[0]!, new RegExp(`^mint-token: token id ${claims.jti} \\(stop it before it expires: proxy\\.js revoke --token-id ${claims.jti} `));
});

test('mint-token: without MODEL_PROXY_SIGNING_KEY in the environment passed in, no token (the process environment is not read)', () => {
  process.env.MODEL_PROXY_SIGNING_KEY ??= KEY;
  assert.throws(() => mintToken(parseCommandLine(['mint-token', '--instance-id', 'bot-7', '--workflow', 'triage', '--run-id', 'run-42']), context({})), /^Error: mint-token: MODEL_PROXY_SIGNING_KEY is not set; set it \(or MODEL_PROXY_SIGNING_KEY_FILE\), or give the private key of one of --bot-keys with --signing-key KID\.pem$/);
});

test('mint-token prints a token id only when it issues the token: a refused mint says nothing of an id', () => {
  for (const [args, env] of [
    [['mint-token', '--instance-id', 'bot-7', '--workflow', 'triage', '--run-id', 'run-42'], {}],
    [['mint-token', '--instance-id', 'bot-7', '--workflow', 'triage', '--run-id', 'run-42', '--git-repo', 'github.com/acme/widgets:write'], { MODEL_PROXY_SIGNING_KEY: KEY }],
  ] as const) {
    const ctx = context({ ...env });
    assert.throws(() => mintToken(parseCommandLine([...args]), ctx), /is not set/);
    assert.deepEqual(ctx.notices.filter((line) => line.includes('token id')), [], args.join(' '));
  }
});

test('mint-token --git-repo: signed only with GIT_PROXY_SIGNING_KEY, and an unregistered environment is told on stderr', () => {
  const cli = parseCommandLine(['mint-token', '--instance-id', 'bot-7', '--workflow', 'triage', '--run-id', 'run-42', '--git-repo', 'github.com/acme/widgets:write']);
  assert.throws(() => mintToken(cli, context({ MODEL_PROXY_SIGNING_KEY: KEY })), /GIT_PROXY_SIGNING_KEY is not set/);
  const ctx = context({ GIT_PROXY_SIGNING_KEY: KEY });
  const claims = payload(mintToken(cli, ctx));
  assert.ok(claims.git, 'a git claim');
  assert.ok(ctx.notices.some((line) => line.startsWith('mint-token: no git host is registered in this environment')));
});

test('revoke: a --revocations entry lasts from the clock passed in for the longest token lifetime plus a minute', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'revoke-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'revocations.json');
  const out = await revoke(parseCommandLine(['revoke', '--revocations', file, '--run-id', 'run-42', '--max-token-lifetime', '1h']), context());
  const until = new Date(NOW_MS + 3600_000 + 60_000).toISOString();
  assert.equal(out, `revoked run_id run-42 until ${until} (1 entries in ${file}); both listeners refuse its tokens from their next request`);
  assert.match(readFileSync(file, 'utf8'), /run-42/);
});

test('revoke: exactly one of --run-id, --instance-id, --token-id, and somewhere to write it, or a usage error', async () => {
  await assert.rejects(revoke(parseCommandLine(['revoke', '--run-id', 'r']), context()), (err) => err instanceof UsageError && /--revocations FILE/.test(err.message));
  await assert.rejects(revoke(parseCommandLine(['revoke', '--revocations', '/tmp/x', '--run-id', 'r', '--instance-id', 'i']), context()), (err) => err instanceof UsageError && /exactly one of/.test(err.message));
});

test('git-config: the hosts and proxy host come from the environment passed in', () => {
  const config = gitConfig(parseCommandLine(['git-config']), context({ GIT_HOST_A: 'github.com', GIT_AUTH_PROXY_HOST: 'git-proxy.ns.svc:8447' }));
  assert.match(config.text, /insteadOf = https:\/\/github\.com\//);
  assert.match(config.text, /http:\/\/git-proxy\.ns\.svc:8447\/github\.com\//);
});

test('agent-config: an agent it does not know is a usage error naming the ones it knows', () => {
  assert.throws(() => agentConfigText(parseCommandLine(['agent-config', '--agent', 'nope']), context()), (err) => err instanceof UsageError && /"nope" is not an agent agent-config knows; use /.test(err.message));
});

test('agent-config --websocket: Codex only, and only when a provider of the gateway serves the WebSocket mode', () => {
  const env = { UPSTREAM_API_KEY: 'k', UPSTREAM_ALLOWED_MODELS: 'gpt-5.5', MODEL_GATEWAY_PROXY_HOST: 'gw.ns.svc:8450' };
  assert.match(agentConfigText(parseCommandLine(['agent-config', '--agent', 'codex', '--websocket']), context(env)), /^supports_websockets = true$/m);
  assert.doesNotMatch(agentConfigText(parseCommandLine(['agent-config', '--agent', 'codex']), context(env)), /supports_websockets/);
  assert.throws(() => agentConfigText(parseCommandLine(['agent-config', '--agent', 'opencode', '--websocket']), context(env)), (err) => err instanceof UsageError && /only Codex/.test(err.message));
  const elsewhere = { ...env, UPSTREAM_BASE_URL: 'https://llm.internal.example/v1' };
  assert.throws(() => agentConfigText(parseCommandLine(['agent-config', '--agent', 'codex', '--websocket']), context(elsewhere)), (err) => err instanceof UsageError && /no provider of the gateway serves the WebSocket mode/.test(err.message));
  assert.match(agentConfigText(parseCommandLine(['agent-config', '--agent', 'codex', '--websocket']), context({ ...elsewhere, UPSTREAM_WEBSOCKET: 'true' })), /supports_websockets = true/);
});
