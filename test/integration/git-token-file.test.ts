// Token files for git (issue 28 item 4): the REAL git, configured by the proxy's `git-config
// --workload-token-file PATH`, presents the workload token the file holds each time git asks;
// rewritten between two fetches, the second fetch carries the new identity. The path has a
// space, a single quote and a $ in it, as the helper's quoting must survive.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type GitResult, includeGitConfig, makeGitHome, runGit } from '../support/git-client.ts';
import { startGitServer, type GitServer } from '../support/git-server.ts';
import { assertNoSecrets, type LogRecord, type ProxyProcess, stopProxyAndCleanUp } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const HOST_TOKEN = `tokenfile_${randomBytes(16).toString('hex')}`;
const SIGNING_KEY = randomBytes(32).toString('hex');

let pki: TestPki;
let server: GitServer;
let proxy: ProxyProcess;
let workload: { home: string; cleanup(): void };
let work: string;
let tokenFile: string;
const tokens: Record<'first' | 'second', string> = { first: '', second: '' };
const gitOutputs: string[] = [];

async function mint(instance: string): Promise<string> {
  const r = await runCommandInProcess(['mint-token', '--instance-id', instance, '--workflow', 'triage', '--run-id', 'run-file', '--ttl', '10m', '--git-repo', `${server.hostKey}/acme/*:read`], { GIT_PROXY_SIGNING_KEY: SIGNING_KEY, GIT_HOST_A: server.hostKey });
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim();
}

before(async () => {
  pki = makeTestPki();
  server = await startGitServer({ pki, auth: { type: 'bearer', token: HOST_TOKEN } });
  proxy = await startServe({ env: { GIT_HOST_A: server.hostKey, GIT_HOST_A_TOKEN: HOST_TOKEN, GIT_PROXY_SIGNING_KEY: SIGNING_KEY, NODE_EXTRA_CA_CERTS: pki.caFile } });
  server.createBareRepo('acme/widgets.git');
  tokens.first = await mint('bot-first');
  tokens.second = await mint('bot-second');
  work = mkdtempSync(join(tmpdir(), 'test-git-token-file-'));
  mkdirSync(join(work, 'token dir'));
  tokenFile = join(work, 'token dir', "it's the $HOME token");
  const generated = await runCommandInProcess(['git-config', '--proxy-host', `127.0.0.1:${proxy.ports.git}`, '--workload-token-file', tokenFile], { GIT_HOST_A: server.hostKey });
  assert.equal(generated.code, 0, generated.stderr);
  workload = makeGitHome();
  // A store helper configured before the include: the generated empty helper drops it.
  await runGit(['config', '--global', '--add', 'credential.helper', 'store'], { home: workload.home });
  includeGitConfig(workload.home, generated.stdout);
});

after(() => stopProxyAndCleanUp(proxy, { close: [server], cleanup: [workload, pki], dirs: [work] }));

async function git(args: string[], cwd?: string): Promise<GitResult> {
  const r = await runGit(args, { cwd, home: workload.home });
  gitOutputs.push(`${r.stdout}${r.stderr}`);
  return r;
}

const served = (): LogRecord[] => proxy.records().filter((r) => r.event === 'request' && r.listener === 'git' && r.status === 200);

/**
 * The proxy's records of every request the git server has seen: each request it served reached
 * the server first, and its line may come a moment after git has exited.
 */
async function servedSoFar(): Promise<LogRecord[]> {
  while (served().length < server.requests.length) await new Promise((r) => setTimeout(r, 5));
  return served();
}

test('git-config --workload-token-file: the real git reads the token file at each fetch; rewritten between two fetches, the second carries the new identity', async () => {
  const clone = join(work, 'clone');
  writeFileSync(tokenFile, `${tokens.first}\n`);
  const cloned = await git(['clone', `https://${server.hostKey}/acme/widgets.git`, clone]);
  assert.equal(cloned.code, 0, `${cloned.stderr}\n${proxy.output()}`);
  const cloneRecords = await servedSoFar();
  const afterClone = cloneRecords.length;
  assert.ok(afterClone > 0 && cloneRecords.every((r) => r.instance_id === 'bot-first'), JSON.stringify(cloneRecords.map((r) => r.instance_id)));

  // The orchestrator (or the kubelet) rewrites the file during the run; nothing else changes.
  writeFileSync(tokenFile, tokens.second);
  const fetched = await git(['fetch', 'origin'], clone);
  assert.equal(fetched.code, 0, `${fetched.stderr}\n${proxy.output()}`);
  const later = (await servedSoFar()).slice(afterClone);
  assert.ok(later.length > 0, 'the fetch reached the proxy');
  assert.deepEqual([...new Set(later.map((r) => r.instance_id))], ['bot-second']);
  assert.ok(!existsSync(join(workload.home, '.git-credentials')), 'no helper stored the token');
});

test('git-config --workload-token-file: a missing token file fails the fetch with git saying which file', async () => {
  rmSync(tokenFile, { force: true });
  const r = await git(['ls-remote', `https://${server.hostKey}/acme/widgets.git`]);
  assert.notEqual(r.code, 0);
  assert.ok(r.stderr.includes(`the workload token file ${tokenFile} is missing, unreadable or empty`), r.stderr);
});

test('git-config --workload-token-file: neither token reaches the git server or any output', () => {
  for (const req of server.requests) assert.ok(!JSON.stringify(req.headers).includes(tokens.first) && !JSON.stringify(req.headers).includes(tokens.second));
  assertNoSecrets([proxy.output(), ...gitOutputs].join('\n'), [tokens.first, tokens.second, HOST_TOKEN], 'the proxy output and what git printed');
});
