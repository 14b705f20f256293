// Installs the pinned coding agents outside the project tree, once: they are test subjects, not
// dependencies of the project (its dev tools stay typescript, tsx and esbuild), and each weighs
// hundreds of megabytes of native binary. One directory per package and version under the
// cache root; a marker file written after a verified install makes the next run skip it.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** `${E2E_AGENTS_CACHE_DIR}`, else `${XDG_CACHE_HOME:-$HOME/.cache}/credential-proxy-e2e`. */
export function cacheRoot(): string {
  if (process.env.E2E_AGENTS_CACHE_DIR) return process.env.E2E_AGENTS_CACHE_DIR;
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'credential-proxy-e2e');
}

export interface Pinned {
  /** npm package name. */
  pkg: string;
  version: string;
  /** The executable, relative to the install prefix. */
  bin: string;
}

export function installDir(p: Pick<Pinned, 'pkg' | 'version'>): string {
  return join(cacheRoot(), `${p.pkg}@${p.version}`);
}

export function binPath(p: Pinned): string {
  return join(installDir(p), p.bin);
}

const MARKER = '.e2e-installed';

function npm(args: string[], cwd: string): void {
  const r = spawnSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.status !== 0) {
    throw new Error(`\`npm ${args.join(' ')}\` failed (exit ${r.status ?? r.signal}) in ${cwd}:\n${(r.stderr || r.stdout).trim().split('\n').slice(-15).join('\n')}`);
  }
}

/** `<bin> --version` must mention the pinned version: proves the native binary is in place. */
function versionOk(p: Pinned): string | undefined {
  const r = spawnSync(binPath(p), ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: installDir(p) } });
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  return r.status === 0 && out.includes(p.version) ? undefined : `\`${binPath(p)} --version\` gave exit ${r.status ?? r.signal}: ${out.trim().slice(0, 300)}`;
}

/**
 * The three packages ship their native binary as an optional dependency and copy it into place
 * in a postinstall script. Should npm not run that script (npm's allowScripts policy warns about
 * it today), run it ourselves.
 */
function runPostinstall(p: Pinned): void {
  const pkgDir = join(installDir(p), 'node_modules', p.pkg);
  const manifest = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as { scripts?: { postinstall?: string } };
  const script = manifest.scripts?.postinstall;
  if (!script) return;
  const r = spawnSync('sh', ['-c', script], { cwd: pkgDir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.status !== 0) throw new Error(`postinstall of ${p.pkg}@${p.version} failed: ${(r.stderr || r.stdout).trim().slice(0, 500)}`);
}

export interface InstallResult {
  dir: string;
  /** True when this call installed it; false when the cache already had it. */
  installed: boolean;
}

/** Idempotent: skips when the marker is there and the binary answers with the pinned version. */
export function ensureInstalled(p: Pinned, log: (line: string) => void): InstallResult {
  const dir = installDir(p);
  if (existsSync(join(dir, MARKER)) && versionOk(p) === undefined) return { dir, installed: false };
  log(`installing ${p.pkg}@${p.version} into ${dir}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // `npm install --no-save` still wants a package.json in the prefix.
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ private: true, description: `e2e:agents install of ${p.pkg}@${p.version}` }, null, 2)}\n`);
  npm(['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', `${p.pkg}@${p.version}`], dir);
  if (versionOk(p) !== undefined) runPostinstall(p);
  const problem = versionOk(p);
  if (problem) throw new Error(`${p.pkg}@${p.version} installed but does not run: ${problem}`);
  writeFileSync(join(dir, MARKER), `${p.pkg}@${p.version}\n`);
  return { dir, installed: true };
}

/**
 * A package installed into its own prefix with a package.json and a lock file (npm install with
 * saving), for the tools the e2e runs beside the agents (e2e-cloud.ts: AWS's signer).
 * Idempotent like ensureInstalled.
 */
export function ensureDependencyDir(dir: string, spec: string, log: (line: string) => void): string {
  if (existsSync(join(dir, MARKER)) && readFileSync(join(dir, MARKER), 'utf8').trim() === spec) return dir;
  log(`installing ${spec} into ${dir}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ private: true }, null, 2)}\n`);
  npm(['install', '--prefix', dir, '--save-exact', '--no-audit', '--no-fund', spec], dir);
  writeFileSync(join(dir, MARKER), `${spec}\n`);
  return dir;
}
