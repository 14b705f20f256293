// Design behaviour 10, end to end: the REAL git client, configured only by the bundle's own
// `git-config` output (insteadOf rewrites, no credential, no CA), clones, fetches and pushes
// through the proxy as `serve` starts it to real `git http-backend` servers over HTTPS.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { gitEnv, type GitResult, includeGitConfig, makeGitHome, runGit } from '../support/git-client.ts';
import { startGitServer, type GitServer, type RecordedRequest } from '../support/git-server.ts';
import { assertNoSecrets, type LogRecord, type ProxyProcess, runProxyCommand, stopProxyAndCleanUp } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const TOKEN_A = `e2eA_${randomBytes(16).toString('hex')}`;
const TOKEN_B = `e2eB_${randomBytes(16).toString('hex')}`;
const USER_B = 'x-e2e-bot';
const BASIC_B = Buffer.from(`${USER_B}:${TOKEN_B}`).toString('base64');
// assertNoSecrets checks the literal strings it is given: the basic value goes in explicitly.
const SECRETS = [TOKEN_A, TOKEN_B, BASIC_B];

let pki: TestPki;
let serverA: GitServer; // bearer
let serverB: GitServer; // basic
let proxy: ProxyProcess;
let workloadConfig: string;
/** The workload's git HOME: identity and protocol v2 plus the proxy's insteadOf rules, nothing else. */
let workload: { home: string; cleanup(): void };
/** A HOME for local-only git work on the server side (seeding upstream repositories). */
let admin: { home: string; cleanup(): void };
let work: string;
let counter = 0;

/** Every stdout/stderr of every git run, checked for secrets at the end. */
const gitOutputs: string[] = [];
/** Requests the sanity test deliberately sends without the proxy (and so without credentials). */
const unproxiedRequests = new Set<RecordedRequest>();

before(async () => {
  pki = makeTestPki();
  [serverA, serverB] = await Promise.all([
    startGitServer({ pki, auth: { type: 'bearer', token: TOKEN_A } }),
    startGitServer({ pki, auth: { type: 'basic', username: USER_B, token: TOKEN_B } }),
  ]);
  proxy = await startServe({
    env: {
      GIT_HOST_A: serverA.hostKey,
      GIT_HOST_A_TOKEN: TOKEN_A,
      GIT_HOST_B: serverB.hostKey,
      GIT_HOST_B_TOKEN: TOKEN_B,
      GIT_HOST_B_USERNAME: USER_B,
      NODE_EXTRA_CA_CERTS: pki.caFile,
    },
  });

  // The workload side gets only the proxy address and the host names: never a token.
  const generated = await runProxyCommand(['git-config'], {
    GIT_AUTH_PROXY_HOST: `127.0.0.1:${proxy.ports.git}`,
    GIT_HOST_A: serverA.hostKey,
    GIT_HOST_B: serverB.hostKey,
  });
  assert.equal(generated.code, 0, `git-config failed: ${generated.stderr}`);
  workloadConfig = generated.stdout;

  workload = makeGitHome();
  admin = makeGitHome();
  work = mkdtempSync(join(tmpdir(), 'test-git-e2e-'));
  includeGitConfig(workload.home, workloadConfig);
});

after(() => stopProxyAndCleanUp(proxy, { close: [serverA, serverB], cleanup: [workload, admin, pki], dirs: [work] }));

/** Runs git as the workload; records its output; fails unless it exits 0 (unless `allowFailure`). */
async function git(args: string[], opts: { cwd?: string; home?: string; allowFailure?: boolean } = {}): Promise<GitResult> {
  const result = await runGit(args, { cwd: opts.cwd, home: opts.home ?? workload.home });
  gitOutputs.push(`$ git ${args.join(' ')}\n${result.stdout}${result.stderr}`);
  if (!opts.allowFailure) {
    assert.equal(result.code, 0, `git ${args.join(' ')} failed (exit ${result.code}):\n${result.stderr}\nproxy output:\n${proxy.output()}`);
  }
  return result;
}

function freshDir(label: string): string {
  return join(work, `${label}-${++counter}`);
}

const repoUrl = (server: GitServer, name: string) => `https://${server.hostKey}/${name}`;

async function clone(server: GitServer, name: string, extra: string[] = []): Promise<string> {
  const dir = freshDir(name.replace(/[^A-Za-z0-9]+/g, '_'));
  await git([...extra, 'clone', '--quiet', repoUrl(server, name), dir]);
  return dir;
}

async function commitFile(dir: string, file: string, content: string | Buffer, message: string): Promise<string> {
  writeFileSync(join(dir, file), content);
  await git(['add', file], { cwd: dir });
  await git(['commit', '--quiet', '-m', message], { cwd: dir });
  return (await git(['rev-parse', 'HEAD'], { cwd: dir })).stdout.trim();
}

/** Reads an object straight out of a bare repository on the server side. */
function showInBare(bare: string, spec: string): Buffer {
  return execFileSync('git', ['--git-dir', bare, 'show', spec], { env: gitEnv(admin.home), maxBuffer: 64 << 20 });
}

function bareRev(bare: string, ref: string): string {
  return execFileSync('git', ['--git-dir', bare, 'rev-parse', ref], { env: gitEnv(admin.home), encoding: 'utf8' }).trim();
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

const requestRecords = (): LogRecord[] => proxy.records().filter((r) => r.event === 'request');

/** Clone, push from one clone, fetch the push into another: the whole round trip for one host. */
async function cloneFetchPush(server: GitServer, name: string): Promise<void> {
  const bare = server.createBareRepo(name);
  const seenBefore = server.requests.length;
  const logBefore = requestRecords().length;

  const pusher = await clone(server, name);
  const fetcher = await clone(server, name);
  assert.equal(readFileSync(join(pusher, 'README.md'), 'utf8'), 'hello\n');

  const content = `pushed through the proxy ${randomBytes(8).toString('hex')}\n`;
  const head = await commitFile(pusher, 'pushed.txt', content, 'push through the proxy');
  await git(['push', '--quiet', 'origin', 'main'], { cwd: pusher });
  assert.equal(bareRev(bare, 'main'), head, 'the upstream main is the pushed commit');

  await git(['fetch', '--quiet', 'origin'], { cwd: fetcher });
  assert.equal((await git(['rev-parse', 'origin/main'], { cwd: fetcher })).stdout.trim(), head, 'fetch brings the pushed commit');
  await git(['merge', '--quiet', '--ff-only', 'origin/main'], { cwd: fetcher });
  assert.equal(readFileSync(join(fetcher, 'pushed.txt'), 'utf8'), content);

  // The upstream saw all four smart-HTTP routes, every one with the right credential.
  const seen = server.requests.slice(seenBefore);
  for (const path of ['info/refs?service=git-upload-pack', 'git-upload-pack', 'info/refs?service=git-receive-pack', 'git-receive-pack']) {
    assert.ok(seen.some((r) => r.url === `/${name}/${path}`), `upstream saw /${name}/${path}`);
  }
  assert.ok(seen.every((r) => r.authorized), 'every upstream request carried the right Authorization');

  // And the proxy logged them, each answered 200. Each proxied request reached the upstream, and
  // its line comes a moment after its answer (after git has exited): wait for one per request seen.
  const hostRecords = () => requestRecords().slice(logBefore).filter((r) => r.host === server.hostKey);
  await proxy.waitForRecord(() => hostRecords().length >= seen.length, `the log lines of the ${seen.length} requests the upstream saw`);
  const logged = hostRecords();
  assert.deepEqual(new Set(logged.map((r) => r.route)), new Set(['info-refs', 'upload-pack', 'receive-pack']));
  assert.ok(logged.every((r) => r.status === 200), `all proxied requests answered 200: ${JSON.stringify(logged)}`);
}

test('the workload git config holds only insteadOf rewrites to the proxy: no credential, no CA', () => {
  const proxyBase = `http://127.0.0.1:${proxy.ports.git}`;
  for (const server of [serverA, serverB]) {
    assert.ok(workloadConfig.includes(`[url "${proxyBase}/${server.hostKey}/"]\n\tinsteadOf = https://${server.hostKey}/\n`), workloadConfig);
  }
  // (The comment line may say that the proxy adds the credential; the settings must not.)
  const settings = workloadConfig.split('\n').filter((l) => !l.startsWith('#')).join('\n');
  assert.doesNotMatch(settings, /credential|helper|ssl|extraHeader|authorization/i);
  assertNoSecrets(workloadConfig, SECRETS, 'the generated workload git config');
});

test('bearer host: clone, fetch and push succeed through the proxy', async () => {
  await cloneFetchPush(serverA, 'org/bearer-repo.git');
});

test('basic host: clone, fetch and push succeed through the proxy', async () => {
  await cloneFetchPush(serverB, 'team/basic-repo.git');
});

test('git protocol v2 is negotiated end to end (Git-Protocol reaches the upstream)', async () => {
  const name = 'org/protocol-v2.git';
  serverA.createBareRepo(name);
  const before = serverA.requests.length;
  const dir = await clone(serverA, name);
  const seen = serverA.requests.slice(before);
  const v2 = (r: RecordedRequest) => String(r.headers['git-protocol'] ?? '').includes('version=2');
  assert.ok(seen.some((r) => r.method === 'GET' && v2(r)), 'the ref advertisement was requested with version=2');
  assert.ok(seen.some((r) => r.method === 'POST' && r.url.endsWith('/git-upload-pack') && v2(r)), 'the fetch POST carried version=2');
  // v2 is what the server actually answered with, not just what the client asked for.
  const traced = await runGit(['ls-remote', '--heads', 'origin'], { cwd: dir, home: workload.home, env: { GIT_TRACE_PACKET: '1' } });
  gitOutputs.push(traced.stdout + traced.stderr);
  assert.equal(traced.code, 0, traced.stderr);
  assert.match(traced.stderr, /packet:\s+git< version 2/);
  assert.match(traced.stdout, /\trefs\/heads\/main\n/);
});

test('a push large enough for chunked transfer encoding lands intact', async () => {
  const name = 'org/large-push.git';
  const bare = serverA.createBareRepo(name);
  const dir = await clone(serverA, name);
  // Random bytes do not compress: the pack is ~3 MiB, far over the 64 KiB post buffer.
  const blob = randomBytes(3 * 1024 * 1024);
  const head = await commitFile(dir, 'random.bin', blob, 'large incompressible blob');
  const before = serverA.requests.length;
  await git(['-c', 'http.postBuffer=65536', 'push', '--quiet', 'origin', 'main'], { cwd: dir });

  const chunked = serverA.requests
    .slice(before)
    .filter((r) => r.method === 'POST' && r.url === `/${name}/git-receive-pack` && r.headers['transfer-encoding'] === 'chunked');
  assert.equal(chunked.length, 1, 'the upstream received one chunked receive-pack POST');
  assert.equal(chunked[0]!.headers['content-length'], undefined);

  assert.equal(bareRev(bare, 'main'), head);
  const again = await clone(serverA, name);
  const cloned = readFileSync(join(again, 'random.bin'));
  assert.equal(cloned.length, blob.length);
  assert.equal(sha256(cloned), sha256(blob));
  assert.equal((await git(['rev-parse', 'HEAD'], { cwd: again })).stdout.trim(), head);
  assert.equal(sha256(showInBare(bare, 'main:random.bin')), sha256(blob));
});

test('a fetch whose request body git gzips (many refs) works through the proxy', async () => {
  const name = 'team/many-refs.git';
  const bare = serverB.createBareRepo(name);
  // 60 branches on 60 distinct commits, made upstream in one fast-import: a clone then
  // sends 60+ "want" lines (> 1 KiB), which git compresses with gzip.
  const branches = 60;
  const stream: string[] = [];
  for (let i = 0; i < branches; i++) {
    const msg = `branch ${i}\n`;
    stream.push(
      `commit refs/heads/b${i}`,
      `committer Fixture <fixture@example.invalid> ${1700000000 + i} +0000`,
      `data ${Buffer.byteLength(msg)}`,
      msg.slice(0, -1),
      `from refs/heads/main^0`,
      `M 644 inline b${i}.txt`,
      `data ${`${i}\n`.length}`,
      `${i}`,
      '',
    );
  }
  execFileSync('git', ['--git-dir', bare, 'fast-import', '--quiet'], { input: `${stream.join('\n')}\n`, env: gitEnv(admin.home) });
  assert.equal(bareRev(bare, 'b59:b59.txt').length, 40);

  const before = serverB.requests.length;
  const dir = await clone(serverB, name);
  const gzipped = serverB.requests
    .slice(before)
    .filter((r) => r.method === 'POST' && r.url === `/${name}/git-upload-pack` && r.headers['content-encoding'] === 'gzip');
  assert.ok(gzipped.length >= 1, 'the upstream received a gzipped upload-pack POST');

  const refs = (await git(['for-each-ref', '--format=%(refname)', 'refs/remotes/origin/'], { cwd: dir })).stdout.split('\n').filter(Boolean);
  for (let i = 0; i < branches; i++) assert.ok(refs.includes(`refs/remotes/origin/b${i}`), `b${i} was fetched`);
  assert.equal((await git(['show', 'origin/b42:b42.txt'], { cwd: dir })).stdout, '42\n');
});

test('eight concurrent pushes to eight different repositories all land with the right content', async () => {
  const repos = Array.from({ length: 8 }, (_, i) => {
    const server = i % 2 === 0 ? serverA : serverB;
    const name = `concurrent/repo-${i}.git`;
    return { i, server, name, bare: server.createBareRepo(name), file: `only-in-repo-${i}.txt`, content: `repo ${i} ${randomBytes(8).toString('hex')}\n` };
  });
  const logBefore = requestRecords().length;

  const heads = await Promise.all(
    repos.map(async (r) => {
      const dir = await clone(r.server, r.name);
      // Some weight per push, so that the transfers really overlap.
      writeFileSync(join(dir, 'payload.bin'), randomBytes(256 * 1024));
      await git(['add', 'payload.bin'], { cwd: dir });
      const head = await commitFile(dir, r.file, r.content, `commit for repo ${r.i}`);
      await git(['push', '--quiet', 'origin', 'main'], { cwd: dir });
      return head;
    }),
  );

  for (const [k, r] of repos.entries()) {
    assert.equal(bareRev(r.bare, 'main'), heads[k], `repo ${r.i}: main is its own pushed commit`);
    assert.equal(showInBare(r.bare, `main:${r.file}`).toString(), r.content, `repo ${r.i}: its file`);
    const tree = execFileSync('git', ['--git-dir', r.bare, 'ls-tree', '--name-only', 'main'], { env: gitEnv(admin.home), encoding: 'utf8' });
    assert.deepEqual(tree.split('\n').filter(Boolean).sort(), ['README.md', r.file, 'payload.bin'].sort(), `repo ${r.i}: nothing from another repo`);
  }
  // A push's log line is written once its response is relayed, a moment after git exits.
  const pushRecords = () => requestRecords().slice(logBefore).filter((r) => r.route === 'receive-pack');
  await proxy.waitForRecord(() => pushRecords().length >= 8, 'the log lines of the eight pushes');
  const pushes = pushRecords();
  assert.equal(pushes.length, 8, 'eight receive-pack requests went through the proxy');
  assert.ok(pushes.every((r) => r.status === 200));

  // One fresh clone through the proxy as well, for the end-to-end view of one of them.
  const check = await clone(repos[5]!.server, repos[5]!.name);
  assert.equal(readFileSync(join(check, repos[5]!.file), 'utf8'), repos[5]!.content);
});

test('without the proxy config the same clone fails: the proxy is what authenticates', async () => {
  const name = 'org/bearer-repo.git';
  const bare = join(serverA.root, name);
  assert.ok(statSync(bare).isDirectory(), 'the repository exists upstream');
  const plain = makeGitHome();
  try {
    // No insteadOf: git goes straight to the upstream, whose CA it does not trust.
    const direct = await git(['clone', '--quiet', repoUrl(serverA, name), freshDir('direct')], { home: plain.home, allowFailure: true });
    assert.notEqual(direct.code, 0);
    assert.match(direct.stderr, /certificate|SSL/i);

    // Even trusting the CA, git has no credential: the upstream answers 401.
    const before = serverA.requests.length;
    const trusted = await git(['-c', `http.sslCAInfo=${pki.caFile}`, 'clone', '--quiet', repoUrl(serverA, name), freshDir('trusted')], {
      home: plain.home,
      allowFailure: true,
    });
    assert.notEqual(trusted.code, 0);
    const seen = serverA.requests.slice(before);
    for (const r of seen) unproxiedRequests.add(r);
    assert.ok(seen.length >= 1 && seen.every((r) => !r.authorized && r.headers.authorization === undefined));
    assert.match(trusted.stderr, /Authentication failed|could not read Username|401/i);
  } finally {
    plain.cleanup();
  }
});

test('the git servers saw only correctly authorized requests, and no secret reached the workload or the logs', () => {
  for (const server of [serverA, serverB]) {
    const proxied = server.requests.filter((r) => !unproxiedRequests.has(r));
    assert.ok(proxied.length > 0);
    const bad = proxied.filter((r) => !r.authorized);
    assert.deepEqual(bad.map((r) => `${r.method} ${r.url}`), [], `${server.hostKey} saw requests without the right Authorization`);
  }
  assertNoSecrets(proxy.output(), SECRETS, 'the proxy output');
  assertNoSecrets(gitOutputs.join('\n'), SECRETS, "git's stdout/stderr");
  assertNoSecrets(workloadConfig, SECRETS, 'the workload git config');
  // Nor any file the workload's git wrote: its HOME and the .git/config of every clone.
  const files = readdirSync(workload.home).map((f) => join(workload.home, f));
  for (const d of readdirSync(work)) files.push(join(work, d, '.git', 'config'), join(work, d, '.git', 'FETCH_HEAD'));
  for (const f of files) {
    let text: string;
    try {
      text = readFileSync(f, 'utf8');
    } catch {
      continue;
    }
    assertNoSecrets(text, SECRETS, f);
  }
  // The access log lines are there (the secret check above is not vacuous).
  assert.ok(requestRecords().length >= 30);
});
