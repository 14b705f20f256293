// README.md's shell blocks, run as written against local fakes, so that a reader who copies one
// gets what it promises.
//
// How the README says what runs: an HTML comment on the line right before a fenced block.
//   <!-- readme-test: run -->               the block runs (below)
//   <!-- readme-test: skip: REASON -->       the block cannot run here; the reason says why
//   <!-- readme-test: file /abs/path -->     the block is that file's content (written first)
// Every ```sh block carries one of the first two, and the counts are asserted, so that a block
// added without a marker, or a block quietly switched to skip, fails this test.
//
// How a block runs: as written, in bash (set -euo pipefail), in one working directory that
// holds proxy.js (the built bundle), HOME a fresh directory, and the fakes' CA in
// NODE_EXTRA_CA_CERTS. Only names of the outside world are substituted, nothing else:
//   /var/run/secrets/, /etc/proxy/, /opt/proxy/   directories under a temporary root (the
//                                                 secrets are written there first, as mounted)
//   github.com                                    an HTTPS git server (git http-backend) on port 0
//   https://api.openai.com/v1, api.anthropic.com  an HTTPS fake model provider on port 0
//   redis://redis:6379                            a redis-server on a free loopback port
//   git-proxy.ns.svc:8447                         the git listener the block started
//   claude (the real Claude Code, on PATH)        a stand-in that checks what the block gave it:
//                                                 the settings agent-config wrote, and a bot token
// A line that starts the proxy (`node …proxy.js` with flags or none, `&` or not) is started in
// the background with `--git-auth-listen`, `--model-gateway-listen` and `--metrics-listen` on
// 127.0.0.1:0 appended, and the block goes on once its metrics listener is up; it must still be
// running when the block ends, and is stopped then. Variables exported before such a line reach
// it and the lines after it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gitEnv } from '../support/git-client.ts';
import { startGitServer } from '../support/git-server.ts';
import { startModelUpstream } from '../support/model-upstream.ts';
import { BUNDLE, ROOT } from '../support/proxy-process.ts';
import { startRedis } from '../support/redis-server.ts';
import { makeTestPki } from '../support/tls.ts';

type Marker = { kind: 'run' } | { kind: 'skip'; reason: string } | { kind: 'file'; path: string } | undefined;
interface Block {
  readonly lang: string;
  readonly text: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly marker: Marker;
}

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The fenced blocks of a markdown text, each with the readme-test comment right above it, if any. */
function fencedBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.indexOf('```', i + 1);
    assert.ok(end > i, `README.md:${i + 1}: a fence that is never closed`);
    const above = /^<!-- readme-test: (run|skip: (.+)|file (\S+)) -->$/.exec(lines[i - 1] ?? '');
    const marker: Marker = !above ? undefined : above[1] === 'run' ? { kind: 'run' } : above[2] !== undefined ? { kind: 'skip', reason: above[2] } : { kind: 'file', path: above[3]! };
    blocks.push({ lang: open[1]!, text: lines.slice(i + 1, end).join('\n'), line: i + 1, marker });
    i = end;
  }
  return blocks;
}

const BLOCKS = fencedBlocks(README);
const SHELL = BLOCKS.filter((b) => b.lang === 'sh');

test('every shell block of README.md is marked run or skip (with its reason): 6 run, 2 skipped, none unmarked', () => {
  const unmarked = SHELL.filter((b) => b.marker === undefined || b.marker.kind === 'file').map((b) => `README.md:${b.line}`);
  assert.deepEqual(unmarked, [], 'a shell block without <!-- readme-test: run --> or <!-- readme-test: skip: REASON -->');
  const count = (kind: string) => SHELL.filter((b) => b.marker?.kind === kind).length;
  assert.deepEqual({ run: count('run'), skip: count('skip') }, { run: 6, skip: 2 });
  for (const b of SHELL) if (b.marker?.kind === 'skip') assert.ok(b.marker.reason.length >= 20, `README.md:${b.line}: say why it cannot run`);
  const files = BLOCKS.filter((b) => b.marker?.kind === 'file');
  assert.deepEqual(files.map((b) => b.lang), ['json', 'json']);
});

// ---- running a block ------------------------------------------------------------------------

interface World {
  readonly root: string;
  readonly work: string;
  readonly env: NodeJS.ProcessEnv;
  readonly envFile: string;
  /** Names of the outside world and what stands for them here (addresses are added as proxies start). */
  readonly names: [string, string][];
}

function substitute(text: string, names: readonly [string, string][]): string {
  let out = text;
  for (const [from, to] of names) out = out.split(from).join(to);
  return out;
}

/** The block's logical lines (a line ending in a backslash joined with the next), raw. */
function logicalLines(text: string): string[] {
  const out: string[] = [];
  let current = '';
  for (const line of text.split('\n')) {
    current += current === '' ? line : `\n${line}`;
    if (!line.endsWith('\\')) {
      out.push(current);
      current = '';
    }
  }
  if (current !== '') out.push(current);
  return out;
}

/** `node …proxy.js` followed by a flag, `&` or nothing: the proxy itself, not one of its commands. */
function startsTheProxy(line: string): boolean {
  if (line.trimStart().startsWith('#')) return false;
  const m = /(?:^|\s)node\s+\S*proxy\.js(?:\s+(\S+))?/.exec(line.replace(/\s+#\s.*$/, ''));
  return m !== null && (m[1] === undefined || m[1].startsWith('--') || m[1] === '&');
}

function runBash(script: string, world: World): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', `set -euo pipefail\nsource ${world.envFile}\n${script}\nexport -p > ${world.envFile}\n`], { cwd: world.work, env: world.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

interface Started {
  readonly child: ChildProcess;
  readonly output: () => string;
  readonly addresses: Map<string, string>;
}

/** Starts the proxy line in the background, with its listeners on port 0, and waits for its metrics listener. */
function startProxyLine(line: string, world: World): Promise<Started> {
  const command = line.replace(/\s+#\s.*$/, '').replace(/\s*&\s*$/, '');
  const script = `source ${world.envFile}\n${command} --git-auth-listen 127.0.0.1:0 --model-gateway-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0`;
  const child = spawn('bash', ['-c', script], { cwd: world.work, env: world.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  const addresses = new Map<string, string>();
  return new Promise((resolve, reject) => {
    const onData = (s: string) => {
      output += s;
      for (const text of output.split('\n')) {
        if (!text.startsWith('{')) continue;
        const entry = JSON.parse(text) as { event?: string; listener?: string; address?: string };
        if (entry.event === 'listening' && entry.listener && entry.address) addresses.set(entry.listener, entry.address);
      }
      if (addresses.has('metrics')) resolve({ child, output: () => output, addresses });
    };
    child.stdout!.setEncoding('utf8').on('data', onData);
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (output += s));
    child.once('exit', (code) => reject(new Error(`the proxy line exited (${code}) before it listened:\n${line}\n${output}`)));
  });
}

async function stopProxy(started: Started): Promise<void> {
  if (started.child.exitCode !== null) return;
  const exited = new Promise((resolve) => started.child.once('exit', resolve));
  process.kill(-started.child.pid!, 'SIGTERM');
  await exited;
}

/** Runs one block: its lines in bash, the proxy lines in the background; every proxy must still run at its end. */
async function runBlock(block: Block, world: World): Promise<void> {
  const where = `README.md:${block.line}`;
  const proxies: Started[] = [];
  try {
    let segment: string[] = [];
    const flush = async (): Promise<void> => {
      const lines = segment;
      segment = [];
      if (lines.every((l) => l.trim() === '' || l.trim().startsWith('#'))) return;
      const script = substitute(lines.join('\n'), world.names);
      const r = await runBash(script, world);
      assert.equal(r.code, 0, `${where}: exit ${r.code}\n--- script\n${script}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`);
    };
    for (const line of logicalLines(block.text)) {
      if (!startsTheProxy(line)) {
        segment.push(line);
        continue;
      }
      await flush();
      const started = await startProxyLine(substitute(line, world.names), world);
      proxies.push(started);
      const git = started.addresses.get('git');
      if (git) world.names.push(['git-proxy.ns.svc:8447', git]);
    }
    await flush();
    for (const p of proxies) assert.equal(p.child.exitCode, null, `${where}: the proxy it started has stopped:\n${p.output()}`);
  } finally {
    for (const p of proxies) await stopProxy(p);
    // The next block starts its own proxy.
    const added = world.names.findIndex(([from]) => from === 'git-proxy.ns.svc:8447');
    if (added >= 0) world.names.splice(added, 1);
  }
}

test('README.md\'s shell blocks run as written against local fakes: git clone through the proxy, the gateway with one and several providers, agent configs, limits with Redis', { timeout: 120_000 }, async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'readme-blocks-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const pki = makeTestPki();
  t.after(() => pki.cleanup());
  const gitToken = `ghp_${randomBytes(16).toString('hex')}`;
  const git = await startGitServer({ pki, auth: { type: 'bearer', token: gitToken } });
  t.after(() => git.close());
  git.createBareRepo('acme/widgets');
  const models = await startModelUpstream(pki);
  t.after(() => models.close());
  const redis = await startRedis();
  t.after(() => redis.close());

  // The mounted secrets, the directories the README writes to, and the one file it ships.
  const secrets: Record<string, string> = {
    'github/token': gitToken,
    'git-signing-key': randomBytes(32).toString('hex'),
    'model-signing-key': randomBytes(32).toString('hex'),
    'openai/key': `sk-${randomBytes(16).toString('hex')}`,
    'anthropic/key': `sk-ant-${randomBytes(16).toString('hex')}`,
  };
  for (const [name, value] of Object.entries(secrets)) {
    mkdirSync(dirname(join(root, 'secrets', name)), { recursive: true });
    writeFileSync(join(root, 'secrets', name), `${value}\n`);
  }
  const work = join(root, 'work');
  const home = join(root, 'home');
  for (const dir of [work, home, join(root, 'etc', 'proxy'), join(root, 'opt', 'proxy')]) mkdirSync(dir, { recursive: true });
  copyFileSync(BUNDLE, join(work, 'proxy.js'));
  copyFileSync(BUNDLE, join(root, 'opt', 'proxy', 'proxy.js'));
  const envFile = join(root, 'exported.sh');
  writeFileSync(envFile, '');
  // Claude Code itself is run by e2e:agents; here a stand-in records that it was given its
  // settings (Bedrock mode) and a token.
  const bin = join(root, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'claude'), `#!/bin/sh\ngrep -q CLAUDE_CODE_USE_BEDROCK "$HOME/.claude/settings.json" || exit 3\n[ -n "$MODEL_PROXY_TOKEN" ] || exit 4\nprintf %s "$MODEL_PROXY_TOKEN" > ${join(root, 'claude-ran')}\n`);
  chmodSync(join(bin, 'claude'), 0o755);

  const world: World = {
    root,
    work,
    env: gitEnv(home, { NODE_EXTRA_CA_CERTS: pki.caFile, PATH: `${bin}:${process.env.PATH}` }),
    envFile,
    names: [
      ['/var/run/secrets/', `${root}/secrets/`],
      ['/etc/proxy/', `${root}/etc/proxy/`],
      ['/opt/proxy/', `${root}/opt/proxy/`],
      ['https://api.openai.com/v1', models.baseUrl],
      ['https://api.anthropic.com', models.baseUrl.replace(/\/v1$/, '')],
      ['redis://redis:6379', `redis://127.0.0.1:${redis.port}`],
      ['github.com', git.hostKey],
    ],
  };
  for (const block of BLOCKS.filter((b) => b.marker?.kind === 'file')) {
    const path = substitute((block.marker as { path: string }).path, world.names);
    writeFileSync(path, substitute(block.text, world.names));
  }
  for (const block of SHELL.filter((b) => b.marker?.kind === 'run')) {
    await runBlock(block, world);
  }

  // What the blocks promise: the clone went through the proxy with the workload's token, and
  // each agent got its configuration file.
  assert.equal(readFileSync(join(work, 'widgets', 'README.md'), 'utf8'), 'hello\n');
  assert.ok(git.requests.some((r) => r.authorized && r.url.includes('/acme/widgets/')), 'the git host saw the proxy\'s credential');
  JSON.parse(readFileSync(join(home, '.config', 'opencode', 'opencode.json'), 'utf8'));
  assert.ok(existsSync(join(home, '.config', 'opencode', 'node_modules')), 'opencode\'s configuration directory holds the record of its plugin install');
  assert.match(readFileSync(join(work, 'opencode.env'), 'utf8'), /^export OPENCODE_DISABLE_MODELS_FETCH=1$/m);
  JSON.parse(readFileSync(join(home, '.claude', 'settings.json'), 'utf8'));
  assert.ok(existsSync(join(home, '.codex', 'config.toml')));
  // Claude Code's cloud block: the stand-in ran with its Bedrock settings and a bot token signed with the key it exported.
  assert.match(readFileSync(join(root, 'claude-ran'), 'utf8'), /^[\w-]+\.[\w-]+\.[\w-]+$/);
});
