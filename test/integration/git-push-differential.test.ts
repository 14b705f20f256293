// Differential: the proxy's reader of a push's command list (src/git/push-commands.ts) against
// git's own receive-pack (`git receive-pack --stateless-rpc`, what git http-backend runs), on
// scratch repositories whose pre-receive hook writes down the commands git read and declines
// them (so nothing changes). Random command lists, in the forms git clients send and the forms a
// hostile client might (upper-case hex, NUL games, push certificates, shallow lines, lines split
// across a certificate's pkt-lines, bytes flipped): whatever git reads, the proxy reads the same.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { PushHeadReader, type PushHeadVerdict } from '../../src/git/push-commands.ts';
import { gitEnv } from '../support/git-client.ts';
import { fuzzSeed, mulberry32, type Rng } from '../support/prng.ts';
import { emptyPack, FLUSH, pkt } from '../support/push-bodies.ts';

const SEED = fuzzSeed(4142);
const CASES = 240;

let work: string;
const repos: Record<'sha1' | 'sha256', { dir: string; commit: string }> = {} as never;

before(() => {
  work = mkdtempSync(join(tmpdir(), 'test-push-differential-'));
  for (const format of ['sha1', 'sha256'] as const) {
    const dir = join(work, `${format}.git`);
    const git = (args: string[], cwd = dir) => execFileSync('git', args, { cwd, env: gitEnv(work), encoding: 'utf8' }).trim();
    execFileSync('git', ['init', '--quiet', '--bare', `--object-format=${format}`, dir], { env: gitEnv(work) });
    git(['config', 'receive.advertisePushOptions', 'true']);
    const tree = git(['mktree'], dir);
    const commit = execFileSync('git', ['commit-tree', tree, '-m', 'c'], { cwd: dir, env: gitEnv(work, { GIT_AUTHOR_NAME: 'a', GIT_AUTHOR_EMAIL: 'a@b', GIT_COMMITTER_NAME: 'a', GIT_COMMITTER_EMAIL: 'a@b' }), encoding: 'utf8' }).trim();
    git(['update-ref', 'refs/heads/main', commit]);
    // What git read, written down; then declined, so that the repository never changes.
    writeFileSync(join(dir, 'hooks', 'pre-receive'), '#!/bin/sh\ncat > "$HOOK_OUT"\nexit 1\n');
    chmodSync(join(dir, 'hooks', 'pre-receive'), 0o755);
    repos[format] = { dir, commit };
  }
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** git's reading: the commands its pre-receive hook got (`old new ref` lines), or `died`, or `none`. */
function gitReads(format: 'sha1' | 'sha256', body: Buffer, n: number): Promise<{ hook: string | undefined; code: number; stderr: string }> {
  const hookOut = join(work, `hook-${n}`);
  return new Promise((resolve, reject) => {
    const child = spawn('git', ['receive-pack', '--stateless-rpc', repos[format].dir], { env: gitEnv(work, { HOOK_OUT: hookOut }), stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('latin1').on('data', (s: string) => (stderr += s));
    child.stdin.on('error', () => {}); // git may stop reading at a fatal line
    child.stdin.end(body);
    child.on('error', reject);
    child.on('close', (code) => {
      const hook = existsSync(hookOut) ? readFileSync(hookOut, 'latin1') : undefined;
      if (hook !== undefined) rmSync(hookOut);
      resolve({ hook, code: code ?? -1, stderr });
    });
  });
}

/** The proxy's reading, as the hook's stdin would show it. */
function proxyReads(body: Buffer, rng: Rng): PushHeadVerdict {
  const reader = new PushHeadReader();
  let verdict: PushHeadVerdict = { kind: 'more' };
  for (let at = 0; at < body.length && verdict.kind === 'more'; ) {
    const n = rng.between(1, 64);
    verdict = reader.push(body.subarray(at, at + n));
    at += n;
  }
  return verdict.kind === 'more' ? reader.end() : verdict;
}

const randomCase = (rng: Rng, hex: string) => [...hex].map((c) => (rng.chance(0.3) ? c.toUpperCase() : c)).join('');

/** A random push body: commands (some in a certificate), capabilities, shallow lines, push options, the pack; sometimes damaged. */
function randomBody(rng: Rng, format: 'sha1' | 'sha256'): { body: Buffer; damaged: boolean } {
  const size = format === 'sha1' ? 40 : 64;
  const zero = '0'.repeat(size);
  const { commit } = repos[format];
  const id = () => rng.pick([zero, commit, [...Array(size)].map(() => '0123456789abcdef'[rng.int(16)]).join('')]);
  const refs = ['refs/heads/main', 'refs/heads/agent/run-42/x', 'refs/tags/v1', 'refs/heads/a b', 'refs/heads/x\n', 'HEAD', '', 'refs/heads/\x01', 'refs/heads/é', 'refs/heads/a..b', 'refs/heads/x.lock', 'refs/for/main'];
  const caps = [`report-status${rng.chance(0.5) ? ' side-band-64k' : ''}${rng.chance(0.3) ? ' push-options' : ''}${rng.chance(0.3) ? ' atomic' : ''}`, format === 'sha256' || rng.chance(0.5) ? `object-format=${format}` : '', rng.chance(0.2) ? 'agent=git/2.39.5 session-id=x' : '']
    .filter(Boolean)
    .join(' ');
  const count = rng.int(5);
  const lines = Array.from({ length: count }, () => `${randomCase(rng, id())} ${rng.chance(0.8) ? commit : zero} ${rng.pick(refs)}`);
  const onlyDeletes = lines.every((l) => l.split(' ')[1] === zero);
  const parts: Buffer[] = [];
  const capsAt = format === 'sha256' ? 0 : rng.int(count + 1);
  const certified = count > 0 && rng.chance(0.2);
  const outside = certified ? lines.slice(0, rng.int(count)) : lines;
  for (const [i, line] of outside.entries()) {
    if (rng.chance(0.15)) parts.push(pkt(`shallow ${randomCase(rng, id())}\n`));
    const nul = i === capsAt ? `\0${caps}${rng.chance(0.1) ? '\0side-band-64k' : ''}` : '';
    parts.push(pkt(`${line}${nul}${rng.chance(0.9) ? '\n' : ''}`, rng.chance(0.3) ? 'upper' : 'lower'));
  }
  if (certified) {
    parts.push(pkt(`push-cert${outside.length === 0 || capsAt >= outside.length ? `\0${caps}` : ''}\n`), pkt('certificate version 0.1\n'), pkt('pusher a\n'), pkt('\n'));
    // The certificate's text, cut into pkt-lines anywhere (git joins them).
    const text = lines.slice(outside.length).map((l) => `${l}\n`).join('') + rng.pick(['-----BEGIN PGP SIGNATURE-----\nabc\n', '-----BEGIN SSH SIGNATURE-----\nabc\n']);
    for (let at = 0; at < text.length; ) {
      const n = rng.between(1, 60);
      parts.push(pkt(text.slice(at, at + n)));
      at += n;
    }
    parts.push(pkt('push-cert-end\n'));
  }
  parts.push(FLUSH);
  if (caps.includes('push-options') && count > 0) parts.push(pkt('ci.skip'), FLUSH);
  let list = Buffer.concat(parts);
  let damaged = false;
  if (rng.chance(0.15) && list.length > 0) {
    list = Buffer.from(list);
    list[rng.int(list.length)] = rng.pick([0x00, 0x0a, 0x20, 0x30, 0x41, 0x61, 0x66, 0x67]);
    damaged = true;
  }
  return { body: Buffer.concat([list, onlyDeletes && rng.chance(0.5) ? Buffer.alloc(0) : emptyPack(format)]), damaged };
}

/** Readings that are the proxy's choice to refuse though git reads on (the file comment of push-commands.ts). */
const STRICTER = /delim|response-end|neither a pack|more than|longer than/;

test(`push differential: ${CASES} random command lists, read by the proxy exactly as git receive-pack reads them, or refused where git refuses them (seed ${SEED})`, async (t) => {
  const rng = mulberry32(SEED);
  const failures: string[] = [];
  const counts = { read: 0, died: 0, none: 0, damaged: 0 };
  for (let n = 0; n < CASES; n++) {
    const format = rng.chance(0.2) ? 'sha256' : 'sha1';
    const { body, damaged } = randomBody(rng, format);
    if (damaged) counts.damaged++;
    const [git, ours] = [await gitReads(format, body, n), proxyReads(body, rng)];
    const mine = ours.kind === 'read' ? ours.head.commands.map((c) => `${c.old} ${c.new} ${c.ref}\n`).join('') : undefined;
    const show = () => `case ${n} (${format}): ${JSON.stringify(body.toString('latin1').slice(0, 600))}\n  git: ${JSON.stringify(git)}\n  proxy: ${JSON.stringify(ours.kind === 'unreadable' ? ours.reason : mine)}`;
    if (git.hook !== undefined) {
      counts.read++;
      if (mine !== git.hook && !(ours.kind === 'unreadable' && STRICTER.test(ours.reason))) failures.push(show());
    } else if (git.code !== 0 || /fatal|error/.test(git.stderr)) {
      counts.died++;
      if (ours.kind === 'read' && ours.head.commands.length > 0) failures.push(show());
    } else {
      counts.none++;
      if (ours.kind === 'read' && ours.head.commands.length > 0) failures.push(show());
    }
  }
  t.diagnostic(`seed ${SEED}: ${JSON.stringify(counts)}`);
  assert.ok(counts.read > CASES / 3 && counts.died > CASES / 20, `the cases exercise both readings: ${JSON.stringify(counts)}`);
  assert.deepEqual(failures, [], `reproduce with FUZZ_SEED=${SEED}`);
});
