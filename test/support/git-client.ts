// Helpers for running the real `git` CLI in tests, isolated from the user's
// and the system's git configuration and never prompting for credentials.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';

export interface GitResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Environment for a git process: PATH is the only thing inherited, so no
 * GIT_* variable, proxy setting or askpass helper of the caller leaks in.
 */
export function gitEnv(home: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '',
    LANG: 'C',
    ...extra,
  };
}

/** Runs git asynchronously; resolves with the exit status rather than throwing. */
export function runGit(
  args: string[],
  opts: { cwd?: string; home: string; env?: Record<string, string> },
): Promise<GitResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, {
      cwd: opts.cwd,
      env: gitEnv(opts.home, opts.env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    // 'error' means git could not be started at all, which is not a git result.
    child.on('error', reject);
    child.on('close', (code, signal) => {
      resolve({
        // Killed by a signal: report it the way a shell would (128 + signo).
        code: code ?? 128 + (signal ? constants.signals[signal] : 0),
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr: Buffer.concat(stderr).toString('utf8'),
      });
    });
  });
}

/** A temporary HOME whose .gitconfig makes commits and protocol v2 work out of the box. */
export function makeGitHome(): { home: string; cleanup(): void } {
  const home = mkdtempSync(join(tmpdir(), 'test-git-home-'));
  writeFileSync(
    join(home, '.gitconfig'),
    [
      '[user]',
      '\tname = Test User',
      '\temail = test@example.invalid',
      '[init]',
      '\tdefaultBranch = main',
      '[protocol]',
      '\tversion = 2',
      '',
    ].join('\n'),
  );
  return { home, cleanup: () => rmSync(home, { recursive: true, force: true }) };
}

/**
 * What `git-config` printed, installed as a workload does: written to a file in `home` and
 * included from its global configuration (after whatever that already holds). The file's path.
 */
export function includeGitConfig(home: string, text: string, name = 'git-auth-proxy.gitconfig'): string {
  const file = join(home, name);
  writeFileSync(file, text);
  execFileSync('git', ['config', '--global', '--add', 'include.path', file], { env: gitEnv(home) });
  return file;
}
