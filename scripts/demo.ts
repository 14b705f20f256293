// `npm run demo`: shows the proxies working end to end on this machine, with nothing to
// configure. Each section starts its own throwaway upstream, runs the BUILT bundle
// (dist/proxy.js) in front of it the way production does, drives it with a real client and
// prints what happened. Everything it starts or creates is registered on a shared cleanup
// list that runs on success, on failure and on Ctrl-C.
//
// Sections: gitDemo (the git credential-injecting proxy in network-policy mode), scopedGitDemo
// (a workload token that names its repositories), modelDemo (the model gateway: chat
// completions, a Responses stream, an Anthropic Messages call, a metrics scrape), each an
// `async function xxxDemo(ctx: DemoContext)` called from main(), then tryByHand().
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gitEnv, makeGitHome, runGit, type GitResult } from '../test/support/git-client.ts';
import { startGitServer } from '../test/support/git-server.ts';
import { assertNoSecrets, BUNDLE, runProxyCommand, startProxy, type LogRecord, type ProxyProcess } from '../test/support/proxy-process.ts';
import { sseEvent, chunk, startModelUpstream, USAGE } from '../test/support/model-upstream.ts';
import { startResponsesUpstream } from '../test/support/responses-upstream.ts';
import { startAnthropicUpstream } from '../test/support/anthropic-upstream.ts';
import { send } from '../test/support/http-client.ts';
import { makeTestPki } from '../test/support/tls.ts';

/** The whole demo must finish within this; a hang is reported as a failure. */
const DEMO_TIMEOUT_MS = 60_000;

class DemoFailure extends Error {}

interface DemoContext {
  /** Prints one line of the demo's report. */
  print(line: string): void;
  /** Registers a cleanup step; steps run in reverse order of registration. */
  defer(what: string, step: () => void | Promise<void>): void;
  /** A fresh temporary directory, removed at cleanup. */
  tempDir(prefix: string): string;
}

function createContext(): DemoContext & { cleanup(): Promise<void> } {
  const steps: { what: string; step: () => void | Promise<void> }[] = [];
  let running: Promise<void> | undefined;
  return {
    print: (line) => process.stdout.write(`${line}\n`),
    defer: (what, step) => void steps.push({ what, step }),
    tempDir(prefix) {
      const dir = mkdtempSync(join(tmpdir(), `demo-${prefix}-`));
      steps.push({ what: `remove ${dir}`, step: () => rmSync(dir, { recursive: true, force: true }) });
      return dir;
    },
    // Idempotent: Ctrl-C and the normal `finally` may both ask for it.
    cleanup() {
      running ??= (async () => {
        while (steps.length > 0) {
          const { what, step } = steps.pop()!;
          try {
            await step();
          } catch (err) {
            process.stderr.write(`demo: cleanup step "${what}" failed: ${(err as Error).message}\n`);
          }
        }
      })();
      return running;
    },
  };
}

function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new DemoFailure(message);
}

function requireTool(command: string, args: string[], hint: string): void {
  try {
    execFileSync(command, args, { stdio: 'ignore' });
  } catch {
    throw new DemoFailure(`\`${command}\` is not available: ${hint}`);
  }
}

/** All files under `dir`, recursively (for the secret scan of what the workload wrote). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath ?? (e as unknown as { path: string }).path, e.name));
}

/** "GET info-refs 200 · POST upload-pack 200 ×2 · ..." from the proxy's access-log records. */
function summarizeAccessLog(records: readonly LogRecord[]): string {
  const parts: { text: string; count: number }[] = [];
  for (const r of records) {
    const text = `${String(r.method)} ${String(r.route ?? r.path)} ${String(r.status)}`;
    const last = parts[parts.length - 1];
    if (last?.text === text) last.count++;
    else parts.push({ text, count: 1 });
  }
  return parts.map((p) => (p.count > 1 ? `${p.text} ×${p.count}` : p.text)).join(' · ');
}

async function gitDemo(ctx: DemoContext): Promise<void> {
  requireTool('git', ['--version'], 'install git (the demo runs the real git client and git http-backend)');
  requireTool('openssl', ['version'], 'install openssl (the demo makes a throwaway CA with it)');
  check(existsSync(BUNDLE), `${BUNDLE} is missing: run \`npm run demo\` (it builds first) or \`node build.mjs\``);

  ctx.print('git proxy demo');
  const token = `demo_${randomBytes(20).toString('hex')}`;
  const secrets = [token, `Bearer ${token}`];

  // The upstream: an HTTPS git server behind a throwaway CA that demands the bearer token.
  const pki = makeTestPki();
  ctx.defer('remove the throwaway CA', () => pki.cleanup());
  const server = await startGitServer({ pki, auth: { type: 'bearer', token } });
  ctx.defer('stop the git server', () => server.close());
  const bare = server.createBareRepo('demo/hello.git');
  ctx.print(`  upstream   https://${server.hostKey} (git http-backend, throwaway CA, demands Bearer token)`);

  // The proxy: the built bundle, holding the token and trusting the CA, as in production.
  let proxy: ProxyProcess;
  try {
    proxy = await startProxy({ env: { GIT_HOST_A: server.hostKey, GIT_HOST_A_TOKEN: token, NODE_EXTRA_CA_CERTS: pki.caFile } });
  } catch (err) {
    throw new DemoFailure(`the proxy did not start: ${(err as Error).message}`);
  }
  ctx.defer('stop the proxy', async () => void (await proxy.stop()));
  const proxyHost = `127.0.0.1:${proxy.ports.git}`;
  ctx.print(`  proxy      http://${proxyHost} (dist/proxy.js)`);

  // The workload: a git HOME with the bundle's `git-config` output and nothing else; it knows
  // the proxy address and the host name, never the token, and does not trust the throwaway CA.
  const generated = await runProxyCommand(['git-config'], { GIT_AUTH_PROXY_HOST: proxyHost, GIT_HOST_A: server.hostKey });
  check(generated.code === 0, `\`proxy.js git-config\` failed (exit ${generated.code}): ${generated.stderr.trim()}`);
  const workload = makeGitHome();
  ctx.defer('remove the workload HOME', () => workload.cleanup());
  const configFile = join(workload.home, 'git-auth-proxy.gitconfig');
  writeFileSync(configFile, generated.stdout);
  const rewrite = /^\[url "([^"]+)"\]\n\tinsteadOf = (\S+)$/m.exec(generated.stdout);
  check(rewrite, `unexpected git-config output:\n${generated.stdout}`);
  ctx.print(`  workload   insteadOf ${rewrite[2]} -> ${rewrite[1]}  (no credentials)`);

  const gitOutput: string[] = [];
  const git = async (what: string, args: string[], cwd?: string): Promise<GitResult> => {
    const result = await runGit(args, { cwd, home: workload.home });
    gitOutput.push(result.stdout, result.stderr);
    check(result.code === 0, `${what} failed (git exit ${result.code}):\n${result.stderr.trim()}\n-- proxy output --\n${proxy.output().trim()}`);
    return result;
  };
  await git('configuring the workload git', ['config', '--global', '--add', 'include.path', configFile]);

  // Clone, commit, push: plain https URLs, exactly as a workload would type them.
  const work = ctx.tempDir('git-work');
  const clone = join(work, 'hello');
  await git('clone', ['clone', '--quiet', `https://${server.hostKey}/demo/hello.git`, clone]);
  const readme = readFileSync(join(clone, 'README.md'), 'utf8').trim();
  ctx.print(`  clone      ok  (README.md: ${JSON.stringify(readme)})`);

  writeFileSync(join(clone, 'from-the-workload.txt'), `pushed through the git proxy at ${new Date().toISOString()}\n`);
  await git('git add', ['add', 'from-the-workload.txt'], clone);
  await git('commit', ['commit', '--quiet', '-m', 'Push through the credential-injecting proxy'], clone);
  const head = (await git('rev-parse', ['rev-parse', 'HEAD'], clone)).stdout.trim();
  await git('push', ['push', '--quiet', 'origin', 'main'], clone);
  const upstreamMain = execFileSync('git', ['--git-dir', bare, 'rev-parse', 'main'], { env: gitEnv(workload.home), encoding: 'utf8' }).trim();
  check(upstreamMain === head, `push reported success but upstream main is ${upstreamMain}, not ${head}`);
  ctx.print(`  push       ok  (main -> ${head.slice(0, 7)})`);

  // The access log line of the push is written once its response is relayed: wait for it.
  await Promise.race([
    proxy.waitForRecord((r) => r.event === 'request' && r.route === 'receive-pack', 'the access-log line of the push'),
    new Promise((_, reject) => setTimeout(() => reject(new DemoFailure('the proxy did not log the push')), 5000).unref()),
  ]);
  const requests = proxy.records().filter((r) => r.event === 'request');
  ctx.print(`  proxy log  ${summarizeAccessLog(requests)}`);
  check(requests.every((r) => r.status === 200), 'the proxy logged a request that did not get 200');
  check(server.requests.every((r) => r.authorized), 'the git server saw a request without the right credential');

  // Check the closing claim rather than just print it.
  try {
    for (const file of [...filesUnder(workload.home), ...filesUnder(work)]) {
      assertNoSecrets(readFileSync(file).toString('latin1'), secrets, `workload file ${file}`);
    }
    assertNoSecrets(gitOutput.join('\n'), secrets, 'git output');
    assertNoSecrets(generated.stdout + generated.stderr, secrets, 'the git-config output');
    assertNoSecrets(proxy.output(), secrets, 'the proxy log');
  } catch (err) {
    throw new DemoFailure((err as Error).message);
  }
  ctx.print('  the token never left the proxy: it is in no workload file, no git output, no proxy log line');
}

async function scopedGitDemo(ctx: DemoContext): Promise<void> {
  ctx.print('');
  ctx.print('scoped git access demo (a workload token that names its repositories)');
  const token = `demo_${randomBytes(20).toString('hex')}`;
  const signingKey = randomBytes(32).toString('hex');
  const pki = makeTestPki();
  ctx.defer('remove the throwaway CA', () => pki.cleanup());
  const server = await startGitServer({ pki, auth: { type: 'bearer', token } });
  ctx.defer('stop the git server', () => server.close());
  server.createBareRepo('demo/hello.git');
  server.createBareRepo('demo/secret.git');
  const env = { GIT_HOST_A: server.hostKey, GIT_HOST_A_TOKEN: token, NODE_EXTRA_CA_CERTS: pki.caFile, GIT_PROXY_SIGNING_KEY: signingKey };
  let proxy: ProxyProcess;
  try {
    proxy = await startProxy({ env });
  } catch (err) {
    throw new DemoFailure(`the proxy did not start: ${(err as Error).message}`);
  }
  ctx.defer('stop the scoped proxy', async () => void (await proxy.stop()));
  const proxyHost = `127.0.0.1:${proxy.ports.git}`;

  // The orchestrator mints a token for one repository, read-only; the workload gets a git
  // configuration with a credential helper that reads it from a variable.
  const minted = await runProxyCommand(['mint-token', '--instance-id', 'demo-bot', '--workflow', 'demo', '--run-id', 'run-1', '--ttl', '10m', '--git-repo', `${server.hostKey}/demo/hello:read`], env);
  check(minted.code === 0, `mint-token --git-repo failed: ${minted.stderr.trim()}`);
  const generated = await runProxyCommand(['git-config', '--proxy-host', proxyHost, '--workload-token-env', 'GIT_WORKLOAD_TOKEN'], { GIT_HOST_A: server.hostKey });
  check(generated.code === 0, `git-config failed: ${generated.stderr.trim()}`);
  ctx.print(`  token      mint-token --git-repo ${server.hostKey}/demo/hello:read (10 min), in $GIT_WORKLOAD_TOKEN`);
  const workload = makeGitHome();
  ctx.defer('remove the scoped workload HOME', () => workload.cleanup());
  const configFile = join(workload.home, 'git-auth-proxy.gitconfig');
  writeFileSync(configFile, generated.stdout);
  const gitEnvExtra = { GIT_WORKLOAD_TOKEN: minted.stdout.trim() };
  const git = (args: string[], cwd?: string) => runGit(args, { cwd, home: workload.home, env: gitEnvExtra });
  check((await git(['config', '--global', '--add', 'include.path', configFile])).code === 0, 'configuring the workload git failed');
  const work = ctx.tempDir('git-scoped');
  const clone = join(work, 'hello');
  const cloned = await git(['clone', '--quiet', `https://${server.hostKey}/demo/hello.git`, clone]);
  check(cloned.code === 0, `the clone in scope failed:\n${cloned.stderr}`);
  ctx.print('  clone      demo/hello: ok');
  writeFileSync(join(clone, 'f.txt'), 'a change\n');
  await git(['add', 'f.txt'], clone);
  await git(['commit', '--quiet', '-m', 'c'], clone);
  const pushed = await git(['push', '--quiet', 'origin', 'main'], clone);
  check(pushed.code !== 0, 'a push with a read-only token succeeded');
  ctx.print(`  push       refused: ${firstProxyLine(pushed.stderr)}`);
  const other = await git(['clone', '--quiet', `https://${server.hostKey}/demo/secret.git`, join(work, 'secret')]);
  check(other.code !== 0, 'a clone outside the scope succeeded');
  ctx.print(`  clone      demo/secret: refused: ${firstProxyLine(other.stderr)}`);
  try {
    assertNoSecrets(proxy.output() + generated.stdout + pushed.stderr + other.stderr, [token], 'the proxy log or git output');
  } catch (err) {
    throw new DemoFailure((err as Error).message);
  }
}

/** The proxy's own line in what git printed (`remote: git-auth-proxy: ...`). */
function firstProxyLine(stderr: string): string {
  return /git-auth-proxy: ([^\n]+)/.exec(stderr)?.[1]?.trim() ?? stderr.trim().split('\n')[0] ?? '';
}

/** Sends one streamed chat completion as a bot would; calls onText for each content delta. */
function streamChat(port: number, token: string, model: string, onText: (text: string) => void): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` } },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (s: string) => {
          body += s;
          for (const m of s.matchAll(/"content":"((?:[^"\\]|\\.)+)"/g)) onText(JSON.parse(`"${m[1]}"`) as string);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ model, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Say hello.' }] }));
  });
}

async function modelDemo(ctx: DemoContext): Promise<void> {
  ctx.print('');
  ctx.print('model gateway demo');
  const apiKey = `sk-demo-${randomBytes(20).toString('hex')}`;
  const signingKey = randomBytes(32).toString('hex');
  const model = 'demo-model';

  // The upstream: a fake OpenAI-compatible API behind a throwaway CA. It demands the key and
  // streams its answer one word every 150 ms, so the pace is visible at the client.
  const pki = makeTestPki();
  ctx.defer('remove the throwaway CA', () => pki.cleanup());
  const upstream = await startModelUpstream(pki);
  ctx.defer('stop the model upstream', () => upstream.close());
  const words = ['Hello', ' from', ' behind', ' the', ' gateway', '.'];
  upstream.script((req, res) => {
    if (req.headers.authorization !== `Bearer ${apiKey}`) {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key","param":null}}');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': 'req_demo_1' });
    const events = [
      ...words.map((w) => sseEvent(chunk(model, { content: w }))),
      sseEvent(chunk(model, {}, 'stop')),
      sseEvent({ id: 'chatcmpl-demo', object: 'chat.completion.chunk', created: 1, model, choices: [], usage: USAGE }),
      sseEvent('[DONE]'),
    ];
    const next = () => {
      res.write(events.shift());
      if (events.length > 0) setTimeout(next, 150);
      else res.end();
    };
    setTimeout(next, 150);
  });
  ctx.print(`  upstream   ${upstream.baseUrl} (fake OpenAI-compatible API, throwaway CA, demands the API key)`);

  // Two more providers beside it, from a providers file: a fake Responses API (what Codex
  // speaks) and a fake Anthropic Messages API (what Claude Code speaks).
  const [responsesUpstream, anthropicUpstream] = await Promise.all([startResponsesUpstream(pki), startAnthropicUpstream(pki)]);
  ctx.defer('stop the Responses and Messages upstreams', async () => void (await Promise.all([responsesUpstream.close(), anthropicUpstream.close()])));
  const providersFile = join(ctx.tempDir('providers'), 'providers.json');
  writeFileSync(
    providersFile,
    JSON.stringify({
      providers: [
        { name: 'codex-provider', kind: 'openai', baseUrl: responsesUpstream.baseUrl, keyEnv: 'RESPONSES_KEY', models: ['demo-codex'], caFile: pki.caFile },
        { name: 'anthropic', kind: 'anthropic', baseUrl: anthropicUpstream.baseUrl, keyEnv: 'ANTHROPIC_KEY', models: ['demo-claude'], caFile: pki.caFile },
      ],
    }),
  );
  const otherKeys = { RESPONSES_KEY: `sk-demo-${randomBytes(12).toString('hex')}`, ANTHROPIC_KEY: `sk-ant-demo-${randomBytes(12).toString('hex')}` };
  const env = { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_API_KEY: apiKey, UPSTREAM_ALLOWED_MODELS: model, UPSTREAM_CA_FILE: pki.caFile, MODEL_PROXY_SIGNING_KEY: signingKey, ...otherKeys };
  let gateway: ProxyProcess;
  try {
    gateway = await startProxy({ env, args: ['--model-gateway-listen', '127.0.0.1:0', '--providers', providersFile], listeners: ['model'] });
  } catch (err) {
    throw new DemoFailure(`the gateway did not start: ${(err as Error).message}`);
  }
  ctx.defer('stop the gateway', async () => void (await gateway.stop()));
  const port = gateway.ports.model!;
  ctx.print(`  gateway    http://127.0.0.1:${port}/v1 (dist/proxy.js), allowed models: ${model} (chat), demo-codex (Responses), demo-claude (Messages)`);

  const minted = await runProxyCommand(['mint-token', '--instance-id', 'demo-bot', '--workflow', 'demo', '--run-id', 'run-1', '--ttl', '10m'], { MODEL_PROXY_SIGNING_KEY: signingKey });
  check(minted.code === 0, `mint-token failed: ${minted.stderr.trim()}`);
  const botToken = minted.stdout.trim();
  ctx.print('  bot token  from `proxy.js mint-token` (instance demo-bot, 10 min); the bot never sees the API key');

  const started = performance.now();
  const arrivals: string[] = [];
  const reply = await streamChat(port, botToken, model, (text) => arrivals.push(`+${Math.round(performance.now() - started)}ms ${JSON.stringify(text)}`));
  check(reply.status === 200, `the streamed completion got ${reply.status}: ${reply.body}`);
  ctx.print(`  stream     ${arrivals.join('  ')}`);
  const rec = await gateway.waitForRecord((r) => r.event === 'request' && r.stream === true, 'the record of the stream');
  check(rec.usage_complete === true, 'the gateway did not record the usage chunk');
  ctx.print(
    `  recorded   input ${String(rec.input_tokens)} · output ${String(rec.output_tokens)} · reasoning ${String(rec.reasoning_tokens)} · cached ${String(rec.cached_tokens)} tokens · ttft ${Math.round(Number(rec.ttft_ms))} ms · ${Math.round(Number(rec.duration_ms))} ms total · instance ${String(rec.instance_id)}`,
  );

  const refused = await streamChat(port, botToken, 'gpt-expensive', () => {});
  const code = (JSON.parse(refused.body) as { error: { code: string } }).error.code;
  ctx.print(`  refused    model "gpt-expensive" -> ${refused.status} ${code}; a request without the bot token -> ${(await streamChat(port, 'none', model, () => {})).status}`);

  // A Responses stream, as Codex sends it (store: false, the whole history in input).
  const auth = { 'content-type': 'application/json', authorization: `Bearer ${botToken}` };
  const responses = await send(port, 'POST', '/v1/responses', { headers: auth, body: JSON.stringify({ model: 'demo-codex', stream: true, store: false, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Say hello.' }] }] }) });
  check(responses.status === 200, `the Responses stream got ${responses.status}: ${responses.body.toString()}`);
  const eventTypes = [...responses.body.toString().matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);
  const responsesRecord = await gateway.waitForRecord((r) => r.event === 'request' && r.api === 'responses', 'the record of the Responses stream');
  ctx.print(`  responses  ${eventTypes.length} events, ${eventTypes[0]} ... ${eventTypes.at(-1)}; recorded input ${String(responsesRecord.input_tokens)} · output ${String(responsesRecord.output_tokens)} tokens, usage complete: ${String(responsesRecord.usage_complete)}`);

  // An Anthropic Messages call, as Claude Code sends it: the bot token as x-api-key.
  const messages = await send(port, 'POST', '/v1/messages', {
    headers: { 'content-type': 'application/json', 'x-api-key': botToken, 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: 'demo-claude', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello.' }] }),
  });
  check(messages.status === 200, `the Messages call got ${messages.status}: ${messages.body.toString()}`);
  const messagesRecord = await gateway.waitForRecord((r) => r.event === 'request' && r.api === 'messages', 'the record of the Messages call');
  const text = (JSON.parse(messages.body.toString()) as { content?: { text?: string }[] }).content?.[0]?.text ?? '';
  ctx.print(`  messages   ${JSON.stringify(text.slice(0, 60))}; provider ${String(messagesRecord.provider)}, input ${String(messagesRecord.input_tokens)} (cache reads ${String(messagesRecord.cached_tokens)}) · output ${String(messagesRecord.output_tokens)} tokens`);

  // The same requests as Prometheus sees them.
  const scrape = (await send(gateway.ports.metrics!, 'GET', '/metrics')).body.toString();
  const lines = scrape.split('\n').filter((l) => l.startsWith('model_gateway_requests_total{'));
  check(lines.length >= 3, `the metrics scrape lacks the requests:\n${scrape.slice(0, 500)}`);
  ctx.print(`  metrics    GET :${gateway.ports.metrics}/metrics:`);
  for (const line of lines) ctx.print(`             ${line}`);

  try {
    assertNoSecrets(reply.body + refused.body + responses.body.toString() + messages.body.toString() + scrape + gateway.output(), [apiKey, botToken, signingKey, ...Object.values(otherKeys)], 'a response, the metrics or the gateway log');
  } catch (err) {
    throw new DemoFailure((err as Error).message);
  }
  ctx.print('  the API keys never left the gateway: they are in no response, metric or log line');
}

/** How to run the same by hand, against real upstreams (printed last). */
function tryByHand(ctx: DemoContext): void {
  for (const line of [
    '',
    'try it by hand (see README.md, "Five minutes to production"):',
    '  npm run build',
    '  UPSTREAM_API_KEY=sk-... UPSTREAM_ALLOWED_MODELS=gpt-5.5 MODEL_PROXY_SIGNING_KEY=$(openssl rand -hex 32) node dist/proxy.js',
    '  TOKEN=$(MODEL_PROXY_SIGNING_KEY=... node dist/proxy.js mint-token --instance-id me --workflow try --run-id 1)',
    '  curl -s localhost:8450/v1/chat/completions -H "authorization: Bearer $TOKEN" -H content-type:application/json \\',
    '       -d \'{"model":"gpt-5.5","messages":[{"role":"user","content":"hi"}]}\'',
    '  GIT_HOST_A_TOKEN=ghp_... node dist/proxy.js &  then  node dist/proxy.js git-config --proxy-host localhost:8447',
    '  curl -s localhost:9464/metrics | grep -E "^(model_gateway|git_proxy)_requests_total"',
  ]) ctx.print(line);
}

async function main(): Promise<void> {
  const ctx = createContext();
  let interrupted = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    process.stderr.write(`\ndemo: ${signal}, cleaning up\n`);
    void ctx.cleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      gitDemo(ctx)
        .then(() => scopedGitDemo(ctx))
        .then(() => modelDemo(ctx))
        .then(() => tryByHand(ctx)),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new DemoFailure(`did not finish within ${DEMO_TIMEOUT_MS / 1000} s`)), DEMO_TIMEOUT_MS);
      }),
    ]);
  } catch (err) {
    if (!interrupted) {
      // Expected failures explain themselves; anything else gets its stack for debugging.
      const message = err instanceof DemoFailure ? err.message : `${(err as Error)?.message ?? String(err)}\n\n${(err as Error)?.stack ?? ''}`;
      process.stderr.write(`\ndemo FAILED: ${message}\n`);
      process.exitCode = 1;
    }
  } finally {
    clearTimeout(timer);
    await ctx.cleanup();
  }
}

void main();
