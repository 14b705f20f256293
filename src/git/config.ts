// The workload side of the git proxy: the git configuration a workload applies at start-up.
// Pure: it gets the registered host keys and the two environment values, returns config text.

export const DEFAULT_PROXY_PORT = 8447;
export const DEFAULT_CREDENTIAL_HELPER = 'executor';

const PROXY_HOST = /^[A-Za-z0-9.-]+(?::[1-9]\d{0,4})?$/;

/** GIT_AUTH_PROXY_HOST is `name` or `name:port`; the port defaults to 8447. */
export function proxyBaseUrl(proxyHost: string): string {
  if (!PROXY_HOST.test(proxyHost) || Number(proxyHost.split(':')[1] ?? 0) > 65535) {
    throw new Error(`GIT_AUTH_PROXY_HOST: "${proxyHost}" is not host or host:port`);
  }
  const withPort = proxyHost.includes(':') ? proxyHost : `${proxyHost}:${DEFAULT_PROXY_PORT}`;
  return `http://${withPort}`;
}

// Values are written quoted; a helper command may contain spaces, quotes or backslashes.
function quote(value: string): string {
  if (/[\r\n\0]/.test(value)) throw new Error('git config values cannot contain line breaks');
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

export function gitWorkloadConfig(hostKeys: readonly string[], proxyHost: string | undefined, credentialHelper: string | undefined): string {
  const lines: string[] = [];
  if (proxyHost) {
    const base = proxyBaseUrl(proxyHost);
    lines.push(`# git-auth-proxy: route ${hostKeys.join(', ')} through ${base}; the proxy adds the credential.`);
    for (const key of hostKeys) {
      lines.push(`[url "${base}/${key}/"]`, `\tinsteadOf = https://${key}/`);
    }
  } else {
    const helper = credentialHelper || DEFAULT_CREDENTIAL_HELPER;
    lines.push('# git-auth-proxy: GIT_AUTH_PROXY_HOST is not set; falling back to a credential helper.');
    for (const key of hostKeys) {
      lines.push(`[credential "https://${key}"]`, `\thelper = ${quote(helper)}`);
    }
  }
  return `${lines.join('\n')}\n`;
}
