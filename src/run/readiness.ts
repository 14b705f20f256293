// Readiness: the credential files the configuration names (a git host's token or username file,
// a provider's key file, service-account key, web-identity token or AWS key files), checked at
// start-up and again whenever a probe asks. A file that gives nothing usable (missing, unreadable,
// empty, or a header credential that is not a valid header value) is named in a start-up
// warning, and /healthz answers 503 naming it until it does: on the listener whose calls need it,
// and on the metrics listener, which Kubernetes probes. A credential given in an environment
// variable cannot change while the process runs; an empty one is the listening line's `missing`.
// So does a shared store unreachable for longer than --limits-store-unready-after, under the
// closed failure policy: a replica that admits nothing leaves the load balancer until it is back.
import { fileSecret, sanitizePassword, type SecretRef, type SecretSource } from '../config/secret.ts';
import type { GatewayConfig } from '../gateway/config.ts';
import type { HostConfig } from '../git/hosts.ts';
import type { StartupWarning } from './warnings.ts';

export interface CredentialFile {
  readonly listener: 'git' | 'model';
  /** `git host github.com`, `provider openai`. */
  readonly owner: string;
  /** `token file`, `key file`, ... */
  readonly what: string;
  readonly file: string;
  /** Read as the requests read it: one stat a check, the file itself again only when it changed. */
  readonly source: SecretSource;
}

const isFile = (ref: SecretRef | undefined): ref is { file: string } => ref !== undefined && 'file' in ref;

/** The credential files of the registered git hosts. */
export function gitCredentialFiles(hosts: readonly HostConfig[]): CredentialFile[] {
  const out: CredentialFile[] = [];
  for (const h of hosts) {
    const owner = `git host ${h.key}`;
    if (isFile(h.token)) out.push({ listener: 'git', owner, what: 'token file', file: h.token.file, source: fileSecret(h.token.file) });
    if (h.username !== undefined && 'file' in h.username) out.push({ listener: 'git', owner, what: 'username file', file: h.username.file, source: fileSecret(h.username.file) });
    if (h.githubApp) out.push({ listener: 'git', owner, what: 'githubApp.privateKeyFile', file: h.githubApp.privateKeyFile, source: fileSecret(h.githubApp.privateKeyFile, sanitizePassword) });
  }
  return out;
}

/** The credential files of the gateway's providers. */
export function modelCredentialFiles(gateway: GatewayConfig): CredentialFile[] {
  const out: CredentialFile[] = [];
  for (const p of gateway.providers) {
    const owner = `provider ${p.name}`;
    const header = (what: string, ref: SecretRef | undefined) => isFile(ref) && out.push({ listener: 'model', owner, what, file: ref.file, source: fileSecret(ref.file) });
    const anyBytes = (what: string, file: string) => out.push({ listener: 'model', owner, what, file, source: fileSecret(file, sanitizePassword) });
    const c = p.credential;
    if (c.type === 'key') header('key file', c.key);
    else if (c.type === 'aws-sigv4') {
      header('accessKeyId file', c.accessKeyId);
      header('secretAccessKey file', c.secretAccessKey);
      header('sessionToken file', c.sessionToken);
    } else if (c.type === 'google-service-account') anyBytes('keyFile', c.keyFile);
    else if (c.type === 'aws-web-identity') anyBytes('tokenFile', c.tokenFile);
  }
  return out;
}

/** The files that give nothing usable now. */
export function unusableFiles(files: readonly CredentialFile[]): CredentialFile[] {
  return files.filter((f) => !f.source.read().ok);
}

/** Pure: how a file that gives nothing usable is named, in warnings and in the 503. */
function describeUnusable(f: Pick<CredentialFile, 'owner' | 'what' | 'file'>): string {
  return `${f.owner}: its ${f.what} ${f.file} cannot be read, is empty or holds no valid value`;
}

/** Pure: /healthz's reason to answer 503, or undefined when every credential file is usable. */
export function notReadyReason(unusable: readonly Pick<CredentialFile, 'owner' | 'what' | 'file'>[]): string | undefined {
  if (unusable.length === 0) return undefined;
  return `not ready: ${unusable.map(describeUnusable).join('; ')}; the calls that need it are refused (503) until it can be read`;
}

/** Pure: one start-up warning per file that gives nothing usable. */
export function credentialFileWarnings(unusable: readonly CredentialFile[]): StartupWarning[] {
  // Fields written out, not spread: a log event's literal is checked field by field against its type.
  return unusable.map((f): StartupWarning => ({
    event: 'warning',
    listener: f.listener,
    host: f.listener === 'git' ? f.owner.replace(/^git host /, '') : undefined,
    provider: f.listener === 'git' ? undefined : f.owner.replace(/^provider /, ''),
    message: `${describeUnusable(f)}: the calls that need it are refused (503), and /healthz answers 503 until it can be read`,
  }));
}

/**
 * Pure: /healthz's reason to answer 503 for the shared store (under --limits-store-failure closed,
 * where a replica that cannot reach it admits nothing): unreachable since `downSinceMs` for longer
 * than `unreadyAfterMs` (0: never). The reason the store is down is logged, not served here.
 */
export function storeNotReadyReason(downSinceMs: number | undefined, nowMs: number, unreadyAfterMs: number): string | undefined {
  if (downSinceMs === undefined || unreadyAfterMs === 0 || nowMs - downSinceMs < unreadyAfterMs) return undefined;
  return `not ready: the limits store has been unreachable for ${Math.floor((nowMs - downSinceMs) / 1000)} s (--limits-store-unready-after ${unreadyAfterMs / 1000} s): model calls and the tokens it checks are refused (503) until it is back`;
}
