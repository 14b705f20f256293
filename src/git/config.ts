// The workload side of the git proxy: the git configuration a workload applies at start-up.
// Pure: it gets the registered host keys and the command-line and environment values, returns
// the config text and, when it falls back to credential helpers, a notice for stderr.
import { ENV_NAME } from '../config/config-file.ts';
import { parseServiceHost } from '../http/address.ts';
import { checkTokenFilePath, shellWord } from '../config/token-file.ts';

export const DEFAULT_PROXY_PORT = 8447;
export const DEFAULT_CREDENTIAL_HELPER = 'executor';

export interface GitConfigInput {
  readonly hostKeys: readonly string[];
  /** `--proxy-host`; when given it wins over GIT_AUTH_PROXY_HOST. */
  readonly proxyHostFlag: string | undefined;
  /** GIT_AUTH_PROXY_HOST; empty means unset. */
  readonly proxyHostEnv: string | undefined;
  /** GIT_CREDENTIAL_HELPER, for the fallback without a proxy; empty means the default. */
  readonly credentialHelper: string | undefined;
  /** `--workload-token-env VAR`: the variable holding the workload token when git runs. */
  readonly workloadTokenEnv: string | undefined;
  /** `--workload-token-file PATH`: the file holding the workload token when git runs (read at each git request for it). */
  readonly workloadTokenFile?: string | undefined;
  /** `--tls`: the git listener serves TLS (`--tls-cert`), so git reaches it over https. */
  readonly tls?: boolean;
}

export interface GitConfigOutput {
  readonly text: string;
  /** Said on stderr: the output is the credential-helper fallback, not the proxy configuration. */
  readonly notice: string | undefined;
}

/** `name` or `name:port` (default port 8447) as the proxy's base URL, https when the listener serves TLS; `source` names the flag or variable. */
export function proxyBaseUrl(proxyHost: string, source = 'GIT_AUTH_PROXY_HOST', tls = false): string {
  return `${tls ? 'https' : 'http'}://${parseServiceHost(source, proxyHost, DEFAULT_PROXY_PORT)}`;
}

// Values are written quoted; a helper command may contain spaces, quotes or backslashes.
function quote(value: string): string {
  if (/[\r\n\0]/.test(value)) throw new Error('git config values cannot contain line breaks');
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/**
 * A credential helper that answers git's `get` with the token in `$VAR` as it is when git asks:
 * a rotated token is used from the next git command on, and the token is never in a file. It
 * ignores `store` and `erase`, so git cannot write the token anywhere through it either.
 */
function workloadTokenHelper(variable: string): string {
  if (!ENV_NAME.test(variable)) throw new Error(`--workload-token-env: "${variable}" is not an environment variable name`);
  return (
    `!f() { test "$1" = get || exit 0; ` +
    `if test -z "$${variable}"; then echo 'git-auth-proxy: $${variable} is empty: no workload token for git to present' >&2; exit 0; fi; ` +
    `printf 'username=workload\\npassword=%s\\n' "$${variable}"; }; f`
  );
}

/**
 * What stderr says about the fallback: which helper was written and why, so that a workload pod
 * that lost GIT_AUTH_PROXY_HOST (and so sends git straight to the hosts) shows it in its log.
 */
function fallbackNotice(helper: string, fromEnv: boolean): string {
  const source = fromEnv ? 'from GIT_CREDENTIAL_HELPER' : 'the default; GIT_CREDENTIAL_HELPER is not set';
  return (
    `git-config: no proxy host (--proxy-host or GIT_AUTH_PROXY_HOST): printed the credential-helper fallback, ` +
    `helper "${helper}" (${source}), for local development, not the proxy configuration; ` +
    'in a workload pod this means GIT_AUTH_PROXY_HOST was lost and git will not go through the proxy'
  );
}

/**
 * A credential helper that answers git's `get` with the token in the file as it is when git
 * asks, so an orchestrator or the kubelet can rewrite the file during a run: the next git command
 * (or the next 401 within one) presents the new token. The path is one single-quoted shell word;
 * a missing or empty file is said on stderr. Like the variable's helper, it ignores `store` and
 * `erase`.
 */
function workloadTokenFileHelper(path: string): string {
  return (
    `!f() { test "$1" = get || exit 0; p=${shellWord(path)}; t=$(cat -- "$p" 2>/dev/null); ` +
    `if test -z "$t"; then printf 'git-auth-proxy: the workload token file %s is missing, unreadable or empty: no workload token for git to present\\n' "$p" >&2; exit 0; fi; ` +
    `printf 'username=workload\\npassword=%s\\n' "$t"; }; f`
  );
}

/** The helper for the token's source: a variable or a file (never both), or none. */
function tokenHelper(input: GitConfigInput): { helper: string; from: string } | undefined {
  if (input.workloadTokenEnv !== undefined && input.workloadTokenFile !== undefined) {
    throw new Error('git-config: give --workload-token-env or --workload-token-file, not both (the helper reads one source)');
  }
  if (input.workloadTokenEnv !== undefined) return { helper: workloadTokenHelper(input.workloadTokenEnv), from: `$${input.workloadTokenEnv}` };
  if (input.workloadTokenFile !== undefined) {
    const path = checkTokenFilePath('--workload-token-file', input.workloadTokenFile);
    return { helper: workloadTokenFileHelper(path), from: `the file ${path}` };
  }
  return undefined;
}

export function gitWorkloadConfig(input: GitConfigInput): GitConfigOutput {
  if (input.hostKeys.length === 0) {
    throw new Error('git-config: no git host is configured: set GIT_HOST_A and/or GIT_HOST_B (the host names; the tokens stay with the proxy) or give --git-hosts, as for the proxy');
  }
  const [proxyHost, source] =
    input.proxyHostFlag !== undefined ? [input.proxyHostFlag, '--proxy-host'] : input.proxyHostEnv ? [input.proxyHostEnv, 'GIT_AUTH_PROXY_HOST'] : [undefined, ''];
  const lines: string[] = [];
  if (proxyHost === undefined) {
    if (input.workloadTokenEnv !== undefined) throw new Error('git-config: --workload-token-env needs the proxy host (--proxy-host or GIT_AUTH_PROXY_HOST)');
    if (input.workloadTokenFile !== undefined) throw new Error('git-config: --workload-token-file needs the proxy host (--proxy-host or GIT_AUTH_PROXY_HOST)');
    if (input.tls === true) throw new Error('git-config: --tls needs the proxy host (--proxy-host or GIT_AUTH_PROXY_HOST): without one git goes straight to the hosts');
    const helper = input.credentialHelper || DEFAULT_CREDENTIAL_HELPER;
    lines.push('# git-auth-proxy: GIT_AUTH_PROXY_HOST is not set; falling back to a credential helper.');
    for (const key of input.hostKeys) {
      lines.push(`[credential "https://${key}"]`, `\thelper = ${quote(helper)}`);
    }
    return {
      text: `${lines.join('\n')}\n`,
      notice: fallbackNotice(helper, Boolean(input.credentialHelper)),
    };
  }
  const base = proxyBaseUrl(proxyHost, source, input.tls === true);
  lines.push(`# git-auth-proxy: route ${input.hostKeys.join(', ')} through ${base}; the proxy adds the credential.`);
  for (const key of input.hostKeys) {
    lines.push(`[url "${base}/${key}/"]`, `\tinsteadOf = https://${key}/`);
  }
  const token = tokenHelper(input);
  if (token !== undefined) {
    lines.push(
      `# git-auth-proxy: git answers the proxy's 401 with the workload token from ${token.from}, read when git asks.`,
      '# The empty helper drops helpers configured before this file, so none of them stores the token.',
      `[credential "${base}"]`,
      '\thelper = ""',
      `\thelper = ${quote(token.helper)}`,
    );
  }
  return { text: `${lines.join('\n')}\n`, notice: undefined };
}
