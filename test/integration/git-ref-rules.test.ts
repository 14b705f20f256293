// Ref rules end to end: the REAL git, with workload tokens minted by `mint-token --git-repo
// host/repo:write:refs/...`, through the proxy as `serve` starts it, in front of a real `git
// http-backend`. Each rule is pushed against with git itself: what git prints is checked as git
// prints it, and the host's refs are read before and after (`git ls-remote` on the upstream's
// repository) so that a refusal is seen to have changed nothing. Hostile bodies, sent raw, are
// each refused before any byte reaches the host.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, before, test } from 'node:test';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { gitEnv, type GitResult, includeGitConfig, makeGitHome, runGit } from '../support/git-client.ts';
import { startGitServer, type GitServer } from '../support/git-server.ts';
import { send } from '../support/http-client.ts';
import { type LogRecord, type ProxyProcess, stopProxyAndCleanUp } from '../support/proxy-process.ts';
import { certificateLines, commandLine, emptyPack, FLUSH, GIT_CAPS, pkt, ZERO } from '../support/push-bodies.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const HOST_TOKEN = `refs_${randomBytes(16).toString('hex')}`;
const SIGNING_KEY = randomBytes(32).toString('hex');
const TOKEN_VAR = 'GIT_WORKLOAD_TOKEN';

let pki: TestPki;
let server: GitServer;
let proxy: ProxyProcess;
let workload: { home: string; cleanup(): void };
let work: string;
let counter = 0;
/** Its branches only: write on acme/widgets, refs/heads/agent/run-42/*. */
let agentToken: string;
/** Its branches and tags, deletions allowed. */
let fullToken: string;
/** Write on every acme repository, no ref rules (only the host's rules apply). */
let openToken: string;

async function mint(...repos: string[]): Promise<string> {
  const r = await runCommandInProcess(['mint-token', '--instance-id', 'bot-7', '--workflow', 'refs', '--run-id', 'run-42', '--ttl', '10m', ...repos.flatMap((g) => ['--git-repo', g])], { GIT_PROXY_SIGNING_KEY: SIGNING_KEY });
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim();
}

before(async () => {
  pki = makeTestPki();
  server = await startGitServer({ pki, auth: { type: 'bearer', token: HOST_TOKEN } });
  work = mkdtempSync(join(tmpdir(), 'test-git-ref-rules-'));
  const hostsFile = join(work, 'hosts.json');
  const host = { host: server.hostKey, auth: 'bearer', tokenEnv: 'HOST_TOKEN', protectedRefs: ['refs/heads/main', 'refs/tags/release/*'], repos: ['acme/widgets', 'acme/gadgets:refs/heads/bots/*'] };
  writeFileSync(hostsFile, JSON.stringify({ hosts: [host] }));
  proxy = await startServe({
    env: { HOST_TOKEN, GIT_PROXY_SIGNING_KEY: SIGNING_KEY, NODE_EXTRA_CA_CERTS: pki.caFile },
    args: ['--git-auth-listen', '127.0.0.1:0', '--git-hosts', hostsFile],
    listeners: ['git'],
  });
  const widgets = `${server.hostKey}/acme/widgets`;
  agentToken = await mint(`${widgets}:write:refs/heads/agent/run-42/*`);
  fullToken = await mint(`${widgets}:write:refs/heads/agent/run-42/*:refs/tags/run-42/*:delete`);
  openToken = await mint(`${server.hostKey}/acme/*:write`);

  const generated = await runCommandInProcess(['git-config', '--git-hosts', hostsFile, '--proxy-host', `127.0.0.1:${proxy.ports.git}`, '--workload-token-env', TOKEN_VAR], {});
  assert.equal(generated.code, 0, generated.stderr);
  workload = makeGitHome();
  includeGitConfig(workload.home, generated.stdout);
  for (const name of ['acme/widgets.git', 'acme/gadgets.git']) {
    const path = server.createBareRepo(name);
    execFileSync('git', ['-C', path, 'config', 'receive.advertisePushOptions', 'true'], { env: gitEnv(workload.home) });
  }
});

after(() => stopProxyAndCleanUp(proxy, { close: [server], cleanup: [workload, pki], dirs: [work] }));

async function git(args: string[], token: string, cwd?: string): Promise<GitResult> {
  return runGit(args, { cwd, home: workload.home, env: { [TOKEN_VAR]: token } });
}

async function mustGit(args: string[], token: string, cwd?: string): Promise<GitResult> {
  const r = await git(args, token, cwd);
  assert.equal(r.code, 0, `git ${args.join(' ')} failed (exit ${r.code}):\n${r.stderr}\nproxy output:\n${proxy.output()}`);
  return r;
}

/** The upstream's refs, read on the host's own repository: `ref -> id`. */
function lsRemote(repo = 'acme/widgets.git'): Record<string, string> {
  const out = execFileSync('git', ['ls-remote', join(server.root, repo)], { env: gitEnv(workload.home), encoding: 'utf8' });
  return Object.fromEntries(out.trim().split('\n').filter(Boolean).map((l) => l.split('\t').reverse() as [string, string]));
}

/** A clone with one new commit on top of main; returns its directory and the commit. */
async function cloneWithCommit(token: string, repo = 'acme/widgets.git'): Promise<{ dir: string; head: string }> {
  const dir = join(work, `clone-${++counter}`);
  await mustGit(['clone', '--quiet', `https://${server.hostKey}/${repo}`, dir], token);
  return { dir, head: await commit(dir, token) };
}

async function commit(dir: string, token: string): Promise<string> {
  writeFileSync(join(dir, `f-${++counter}.txt`), `${randomBytes(8).toString('hex')}\n`);
  await mustGit(['add', '-A'], token, dir);
  await mustGit(['commit', '--quiet', '-m', `change ${counter}`], token, dir);
  return (await mustGit(['rev-parse', 'HEAD'], token, dir)).stdout.trim();
}

const receivePackPosts = () => server.requests.filter((r) => r.method === 'POST' && r.url.endsWith('/git-receive-pack')).length;
const pushRecords = (): LogRecord[] => proxy.records().filter((r) => r.event === 'request' && r.route === 'receive-pack');
type PushRef = { ref: string; old: string; new: string; refused: string | null; result: string | null };
// A log line leaves out its null fields (docs/operations.md, "Logs"): an absent refused or result is null.
const refsOf = (r: LogRecord): PushRef[] => ((r.push as { refs?: Partial<PushRef>[] } | undefined)?.refs ?? []).map((u) => ({ ...(u as PushRef), refused: u.refused ?? null, result: u.result ?? null }));
const recordFor = (ref: string, what = `the record of the push of ${ref}`) => proxy.waitForRecord((r) => r.route === 'receive-pack' && refsOf(r).some((x) => x.ref === ref), what);

/** Runs a push that must be refused: git fails, the host's refs stay as they were and no push reached it. */
async function refusedPush(args: string[], token: string, dir: string, repo = 'acme/widgets.git'): Promise<GitResult> {
  const refsBefore = lsRemote(repo);
  const postsBefore = receivePackPosts();
  const r = await git(args, token, dir);
  assert.notEqual(r.code, 0, `git ${args.join(' ')} was expected to fail:\n${r.stderr}`);
  assert.deepEqual(lsRemote(repo), refsBefore, 'the refs on the host are unchanged');
  assert.equal(receivePackPosts(), postsBefore, 'no push reached the host');
  return r;
}

test('ref rules, allowed branch: a token scoped to refs/heads/agent/run-42/* pushes its branch; the record lists the update and the host\'s ok', async () => {
  const { dir, head } = await cloneWithCommit(agentToken);
  await mustGit(['push', '--quiet', 'origin', 'HEAD:refs/heads/agent/run-42/feature'], agentToken, dir);
  assert.equal(lsRemote()['refs/heads/agent/run-42/feature'], head);
  const rec = await recordFor('refs/heads/agent/run-42/feature');
  assert.deepEqual([rec.status, rec.error], [200, undefined]);
  assert.deepEqual(refsOf(rec), [{ ref: 'refs/heads/agent/run-42/feature', old: ZERO, new: head, refused: null, result: 'ok' }]);
  assert.equal((rec.push as { unpack?: string }).unpack, 'ok');
});

test('ref rules, main: a push to main is refused as git shows a declined ref, naming the ref and the rule, and nothing reaches the host', async () => {
  const { dir, head } = await cloneWithCommit(agentToken);
  const main = lsRemote()['refs/heads/main'];
  const r = await refusedPush(['push', 'origin', 'HEAD:main'], agentToken, dir);
  assert.ok(r.stderr.includes(`! [remote rejected] HEAD -> main (git-auth-proxy: refs/heads/main is protected on ${server.hostKey} (the hosts file's protectedRefs: refs/heads/main))`), r.stderr);
  assert.ok(r.stderr.includes(`remote: git-auth-proxy: push refused, nothing was sent to ${server.hostKey}:`), r.stderr);
  const rec = await recordFor('refs/heads/main');
  assert.deepEqual([rec.status, rec.error, rec.bytes_in], [200, 'ref_not_allowed', 0]);
  assert.deepEqual(refsOf(rec), [{ ref: 'refs/heads/main', old: main, new: head, refused: `refs/heads/main is protected on ${server.hostKey} (the hosts file's protectedRefs: refs/heads/main)`, result: null }]);
  // Another branch outside the token's rules: refused by the scope, which the message names.
  const other = await refusedPush(['push', 'origin', 'HEAD:refs/heads/other'], agentToken, dir);
  assert.ok(other.stderr.includes(`(git-auth-proxy: refs/heads/other is outside this workload's scope (${server.hostKey}/acme/widgets:write:refs/heads/agent/run-42/*))`), other.stderr);
});

test('ref rules, atomic or not: a push of one allowed and one refused ref is refused whole, both refs rejected, neither changed', async () => {
  const { dir } = await cloneWithCommit(agentToken);
  for (const atomic of [['--atomic'], []]) {
    const r = await refusedPush(['push', ...atomic, 'origin', 'HEAD:refs/heads/agent/run-42/both', 'HEAD:main'], agentToken, dir);
    assert.ok(r.stderr.includes('! [remote rejected] HEAD -> agent/run-42/both (git-auth-proxy: the push is refused as a whole: 1 of its 2 ref updates are outside the rules)'), r.stderr);
    assert.match(r.stderr, /! \[remote rejected\] HEAD -> main \(git-auth-proxy: refs\/heads\/main is protected/);
    assert.equal(lsRemote()['refs/heads/agent/run-42/both'], undefined);
  }
});

test('ref rules, delete: deleting a branch is refused unless the rule says delete; with it, the branch goes', async () => {
  const { dir, head } = await cloneWithCommit(fullToken);
  await mustGit(['push', '--quiet', 'origin', 'HEAD:refs/heads/agent/run-42/gone'], fullToken, dir);
  const r = await refusedPush(['push', 'origin', ':refs/heads/agent/run-42/gone'], agentToken, dir);
  assert.ok(r.stderr.includes(`(git-auth-proxy: deleting refs/heads/agent/run-42/gone needs :delete in this workload's scope (${server.hostKey}/acme/widgets:write:refs/heads/agent/run-42/*))`), r.stderr);
  assert.equal(lsRemote()['refs/heads/agent/run-42/gone'], head);
  await mustGit(['push', '--quiet', 'origin', ':refs/heads/agent/run-42/gone'], fullToken, dir);
  assert.equal(lsRemote()['refs/heads/agent/run-42/gone'], undefined);
  const rec = await proxy.waitForRecord((x) => refsOf(x).some((u) => u.ref === 'refs/heads/agent/run-42/gone' && u.new === ZERO && u.result === 'ok'), 'the record of the deletion');
  assert.equal(rec.error, undefined);
});

test('ref rules, tags: a tag is refused unless a rule names it; a protected tag is refused even to a scope without ref rules', async () => {
  const { dir, head } = await cloneWithCommit(fullToken);
  await mustGit(['tag', 'v1'], fullToken, dir);
  const r = await refusedPush(['push', 'origin', 'v1'], agentToken, dir);
  assert.match(r.stderr, /\(git-auth-proxy: refs\/tags\/v1 is outside this workload's scope \([^)]*\) \(a tag: only a pattern under refs\/tags\/ names tags\)\)/);
  await mustGit(['tag', 'run-42/v1'], fullToken, dir);
  await mustGit(['push', '--quiet', 'origin', 'run-42/v1'], fullToken, dir);
  assert.equal(lsRemote()['refs/tags/run-42/v1'], head);
  await mustGit(['tag', 'release/v1'], openToken, dir);
  const p = await refusedPush(['push', 'origin', 'release/v1'], openToken, dir);
  assert.ok(p.stderr.includes("(git-auth-proxy: refs/tags/release/v1 is protected on"), p.stderr);
  await mustGit(['push', '--quiet', 'origin', 'v1'], openToken, dir);
  assert.equal(lsRemote()['refs/tags/v1'], head, 'a scope without ref rules may push any tag the host does not protect');
});

test('ref rules, force-update: an allowed branch may be rewritten (the proxy cannot tell a forced update); main may not, forced or not', async () => {
  const { dir } = await cloneWithCommit(agentToken);
  await mustGit(['push', '--quiet', 'origin', 'HEAD:refs/heads/agent/run-42/rewrite'], agentToken, dir);
  await mustGit(['commit', '--quiet', '--amend', '-m', 'rewritten'], agentToken, dir);
  const rewritten = (await mustGit(['rev-parse', 'HEAD'], agentToken, dir)).stdout.trim();
  await mustGit(['push', '--quiet', '--force', 'origin', 'HEAD:refs/heads/agent/run-42/rewrite'], agentToken, dir);
  assert.equal(lsRemote()['refs/heads/agent/run-42/rewrite'], rewritten);
  const r = await refusedPush(['push', '--force', 'origin', 'HEAD:main'], openToken, dir);
  assert.match(r.stderr, /\[remote rejected\] HEAD -> main \(git-auth-proxy: refs\/heads\/main is protected/);
});

test('ref rules, push options: a push with -o to an allowed branch passes whole (options and all); with a refused ref it is refused', async () => {
  const { dir, head } = await cloneWithCommit(agentToken);
  await mustGit(['push', '--quiet', '-o', 'ci.skip', '-o', 'merge_request.create', 'origin', 'HEAD:refs/heads/agent/run-42/opts'], agentToken, dir);
  assert.equal(lsRemote()['refs/heads/agent/run-42/opts'], head);
  await refusedPush(['push', '-o', 'ci.skip', 'origin', 'HEAD:main'], agentToken, dir);
});

test('ref rules, many refs: 300 allowed branches go in one push; 300 and one refused ref are refused whole', async () => {
  const { dir, head } = await cloneWithCommit(agentToken);
  const refspecs = Array.from({ length: 300 }, (_, i) => `HEAD:refs/heads/agent/run-42/many/${i}`);
  await mustGit(['push', '--quiet', 'origin', ...refspecs], agentToken, dir);
  const after = lsRemote();
  assert.equal(refspecs.filter((_, i) => after[`refs/heads/agent/run-42/many/${i}`] === head).length, 300);
  const rec = await recordFor('refs/heads/agent/run-42/many/299');
  assert.equal(refsOf(rec).length, 300);
  assert.ok(refsOf(rec).every((u) => u.result === 'ok' && u.refused === null));
  await commit(dir, agentToken);
  await refusedPush(['push', 'origin', ...refspecs.map((s) => s.replace('many', 'more')), 'HEAD:refs/heads/elsewhere'], agentToken, dir);
});

test("ref rules, the hosts file: a repos entry's ref rules bind every workload on that repository, and a scope without ref rules is said once", async () => {
  const warnings = () => proxy.records().filter((r) => r.event === 'warning' && String(r.message).startsWith('a push went through under a write scope without ref rules'));
  const { dir, head } = await cloneWithCommit(openToken, 'acme/gadgets.git');
  const r = await refusedPush(['push', 'origin', 'HEAD:refs/heads/feature'], openToken, dir, 'acme/gadgets.git');
  assert.ok(r.stderr.includes(`(git-auth-proxy: refs/heads/feature is outside the hosts file's repos for ${server.hostKey} (acme/gadgets:refs/heads/bots/*))`), r.stderr);
  await mustGit(['push', '--quiet', 'origin', 'HEAD:refs/heads/bots/x'], openToken, dir);
  assert.equal(lsRemote('acme/gadgets.git')['refs/heads/bots/x'], head);
  await mustGit(['push', '--quiet', 'origin', 'HEAD:refs/heads/bots/y'], openToken, dir);
  await recordFor('refs/heads/bots/y');
  assert.equal(warnings().length, 1, 'said once, however many pushes follow');
  assert.match(String(warnings()[0]!.message), new RegExp(`\\(${server.hostKey.replace(/\./g, '\\.')}/acme/\\*:write\\)`));
});

/** A push sent raw with a token: the answer, and whether any push reached the host. */
async function rawPush(body: Buffer | Buffer[], headers: Record<string, string> = {}): Promise<{ status: number; body: string; reached: boolean }> {
  const before = receivePackPosts();
  const path = `/${server.hostKey}/acme/widgets.git/git-receive-pack`;
  const head = { authorization: `Bearer ${agentToken}`, 'content-type': 'application/x-git-receive-pack-request', ...headers };
  if (Buffer.isBuffer(body)) {
    const r = await send(proxy.ports.git!, 'POST', path, { headers: head, body });
    return { status: r.status, body: r.body.toString('latin1'), reached: receivePackPosts() !== before };
  }
  // Chunked, each piece its own chunk and its own write, a moment apart (the proxy reads them apart).
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect(proxy.ports.git!, '127.0.0.1');
    let out = '';
    socket.on('data', (c: Buffer) => (out += c.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => resolve(out));
    const lines = [`POST ${path} HTTP/1.1`, 'Host: proxy', 'Transfer-Encoding: chunked', 'Connection: close', ...Object.entries(head).map(([k, v]) => `${k}: ${v}`)];
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    void (async () => {
      for (const piece of body) {
        await new Promise((r) => setTimeout(r, 20));
        socket.write(Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]));
      }
      socket.write('0\r\n\r\n');
    })();
  });
  return { status: Number(/^HTTP\/1\.1 (\d+)/.exec(text)?.[1]), body: text, reached: receivePackPosts() !== before };
}

test('ref rules, hostile bodies: a refused ref hidden later, lying lengths, upper-case hex, a command split across chunks, a second list after a flush, NUL games, an oversized line, a pack without a flush, a certificate: each refused, nothing reaches the host', async () => {
  const main = lsRemote()['refs/heads/main']!;
  const id = main.replace(/^./, (c) => (c === 'f' ? 'e' : 'f'));
  const allowed = pkt(commandLine(main, id, 'refs/heads/agent/run-42/x', GIT_CAPS));
  const toMain = commandLine(main, id, 'refs/heads/main');
  const plain = pkt(commandLine(main, id, 'refs/heads/agent/run-42/x'));
  const whole = (b: Buffer) => Buffer.concat([b, emptyPack()]);
  const cases: [string, Buffer | Buffer[], 'ref_not_allowed' | 'push_unreadable', Record<string, string>?][] = [
    ['a refused ref hidden as a later command', whole(Buffer.concat([allowed, pkt(commandLine(main, id, 'refs/heads/agent/run-42/y')), pkt(toMain), FLUSH])), 'ref_not_allowed'],
    ['a length that swallows the next line', whole(Buffer.concat([allowed, Buffer.from((plain.length + pkt(toMain).length).toString(16).padStart(4, '0')), plain.subarray(4), pkt(toMain), FLUSH])), 'ref_not_allowed'],
    ['a length shorter than its line', whole(Buffer.concat([Buffer.from('0030'), allowed.subarray(4), FLUSH])), 'push_unreadable'],
    ['upper-case hex in the length and the ids', whole(Buffer.concat([allowed, pkt(commandLine(main.toUpperCase(), id.toUpperCase(), 'refs/heads/main'), 'upper'), FLUSH])), 'ref_not_allowed'],
    ['a command split across chunks', [allowed, pkt(toMain).subarray(0, 3), pkt(toMain).subarray(3, 50), pkt(toMain).subarray(50), FLUSH, emptyPack()], 'ref_not_allowed'],
    ['a second command list after the flush', whole(Buffer.concat([allowed, FLUSH, pkt(toMain), FLUSH])), 'push_unreadable'],
    ['a name cut by a NUL in a certificate, joined with the next line', whole(Buffer.concat([...certificateLines([`${main} ${id} refs/heads/agent/run-42/z\n`]).slice(0, 6), pkt(`${main} ${id} refs/heads/\0agent/run-42/`), pkt('main\n'), pkt('push-cert-end\n'), FLUSH])), 'ref_not_allowed'],
    ['capabilities after a second NUL on a later line', whole(Buffer.concat([allowed, pkt(`${main} ${id} refs/heads/main\0\0refs/heads/agent/run-42/w\n`), FLUSH])), 'ref_not_allowed'],
    ['an oversized line', whole(Buffer.concat([allowed, Buffer.from('fff0'), Buffer.alloc(0xfff0 - 4, 0x61), FLUSH])), 'push_unreadable'],
    ['a pack with no flush before it', whole(allowed), 'push_unreadable'],
    ['a delim before the refused ref', whole(Buffer.concat([allowed, Buffer.from('0001'), pkt(toMain), FLUSH])), 'push_unreadable'],
    ['a push certificate naming main', whole(Buffer.concat([...certificateLines([toMain]), FLUSH])), 'ref_not_allowed'],
    ['a gzip body', gzipSync(whole(Buffer.concat([pkt(toMain), FLUSH]))), 'push_unreadable', { 'content-encoding': 'gzip' }],
  ];
  const failures: string[] = [];
  const refsBefore = lsRemote();
  const seen = new Set(pushRecords().map((r) => r.request_id as string));
  for (const [name, body, error, headers] of cases) {
    const answer = await rawPush(body, headers);
    const rec = await proxy.waitForRecord((r) => r.route === 'receive-pack' && r.error !== undefined && !seen.has(r.request_id as string), name);
    seen.add(rec.request_id as string);
    if (answer.reached || rec.error !== error) failures.push(`${name}: reached ${answer.reached}, ${answer.status}, recorded ${rec.error}`);
  }
  assert.deepEqual(failures, []);
  assert.deepEqual(lsRemote(), refsBefore);
});
