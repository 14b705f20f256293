// The build of dist/proxy.js as a function: build.mjs calls it for dist/, the reproducibility
// test calls it for two temporary directories. The same sources, lockfile and build scripts give
// the same bytes wherever the checkout lies and whichever directory the build runs from: the
// header holds no time and no absolute path, and esbuild works relative to the checkout
// (absWorkingDir), so its `// src/<file>.ts` module comments name the same files everywhere.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { build, version as esbuildVersion } from 'esbuild';
import { onlySrcAndBuiltins } from './bundle-policy.mjs';

/**
 * The files whose change changes the bundle's bytes: a checkout with uncommitted changes to any
 * of them is marked `-dirty` in the header. tsconfig.json counts because esbuild reads it.
 */
export const BUILD_INPUTS = ['src', 'package.json', 'package-lock.json', 'tsconfig.json', 'build.mjs', 'scripts/build-bundle.mjs', 'scripts/bundle-policy.mjs'];

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

/** Every file under `dir` (relative to root, `/`-separated), sorted bytewise as `LC_ALL=C sort` does. */
function filesUnder(root, dir) {
  const files = readdirSync(path.join(root, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(root, path.join(e.parentPath ?? e.path, e.name)).split(path.sep).join('/'));
  return files.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
}

/**
 * SHA-256 of the sources, computed as the shell does from the checkout's root:
 *   find src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum
 * (the digest of sha256sum's listing: "<hex>  <path>" a line, every file under src/).
 */
export function sourcesSha256(root) {
  const listing = filesUnder(root, 'src').map((file) => `${sha256(readFileSync(path.join(root, file)))}  ${file}\n`).join('');
  return sha256(listing);
}

function git(root, args) {
  try {
    // --no-optional-locks: a status never takes .git/index.lock from someone committing. The
    // ceiling: only a repository at the checkout's root names its commit, never one around it.
    const env = { ...process.env, GIT_CEILING_DIRECTORIES: path.dirname(root) };
    return execFileSync('git', ['--no-optional-locks', ...args], { cwd: root, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

/**
 * Where the bytes come from: { version and license (package.json), commit (`git rev-parse HEAD`, with
 * `-dirty` when a build input has uncommitted changes; 'unknown' outside git), sourcesSha256,
 * lockfileSha256, esbuild (the version that bundled) }.
 */
export function provenance(root) {
  const { version, license } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
  const head = git(root, ['rev-parse', '--verify', '--quiet', 'HEAD']);
  let commit = 'unknown';
  if (head !== null && /^[0-9a-f]{40,64}$/.test(head)) {
    const status = git(root, ['status', '--porcelain', '--untracked-files=all', '--', ...BUILD_INPUTS]);
    commit = status === null ? 'unknown' : status === '' ? head : `${head}-dirty`;
  }
  const lockfile = path.join(root, 'package-lock.json');
  return { version, license, commit, sourcesSha256: sourcesSha256(root), lockfileSha256: sha256(readFileSync(lockfile)), esbuild: esbuildVersion };
}

/** The header at the top of the bundle: what it is, where it comes from, how to check that. */
export function bundleHeader(p) {
  return [
    '#!/usr/bin/env node',
    `// credential-proxy ${p.version}: bundled from src/ by build.mjs (esbuild ${p.esbuild}). Imports only node: built-ins.`,
    `// source commit:   ${p.commit}`,
    `// sources sha256:  ${p.sourcesSha256}  (find src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum)`,
    `// lockfile sha256: ${p.lockfileSha256}  (sha256sum package-lock.json)`,
    '// Verify: at that commit, npm ci && node build.mjs gives this file byte for byte (sha256sum dist/proxy.js);',
    '// SECURITY.md, "How to review". A name with a digit that src/ does not spell (reject2) is the',
    '// source\'s name (reject), numbered by esbuild because another module declares it too.',
    '// The source\'s comments are in src/, not here: read src/, then compare this file with a rebuild.',
    `// SPDX-License-Identifier: ${p.license} (the licence's full text: LICENSE, at the root of the sources)`,
  ].join('\n');
}

/**
 * Bundles <root>/src/main.ts into `outfile`. Returns { outfile, bytes, text, sha256, header,
 * provenance, metafile, requires (the modules the output requires, in order of first use),
 * sources (each bundled file, src/..., to its text) }.
 * Throws when the output requires anything but a node: built-in (the plugin refuses them while
 * bundling; this reads the output as well, belt and braces).
 */
export async function buildBundle({ root, outfile }) {
  const p = provenance(root);
  const header = bundleHeader(p);
  mkdirSync(path.dirname(outfile), { recursive: true });
  const result = await build({
    absWorkingDir: root,
    entryPoints: [path.join(root, 'src', 'main.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    minify: false,
    sourcemap: false,
    legalComments: 'inline',
    banner: { js: header },
    // The commit the header names, for proxy_build_info (src/config/version.ts).
    define: { PROXY_COMMIT: JSON.stringify(p.commit) },
    metafile: true,
    plugins: [onlySrcAndBuiltins(path.join(root, 'src') + path.sep, root)],
    logLevel: 'warning',
  });
  const bytes = readFileSync(outfile);
  const text = bytes.toString('utf8');
  const requires = [...new Set([...text.matchAll(/\brequire\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]))];
  const foreign = requires.filter((r) => !r.startsWith('node:'));
  if (foreign.length > 0) throw new Error(`build: ${path.relative(root, outfile)} requires non-builtin modules: ${foreign.join(', ')}`);
  const sources = Object.fromEntries(Object.keys(result.metafile.inputs).map((file) => [file, readFileSync(path.join(root, file), 'utf8')]));
  return { outfile, bytes, text, sha256: sha256(bytes), header, provenance: p, metafile: result.metafile, requires, sources };
}
