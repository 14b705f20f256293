// Registry keys: the one spelling of a git host that the registry, the request's first path
// segment and the git scope of workload tokens are compared in. Pure.

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/**
 * `github.com`, `git.example.com:8443`, `127.0.0.1:9000`. No userinfo, brackets, trailing dot
 * or IPv6 literal: a key is compared as a plain string against the request's first segment.
 */
export function parseHostKey(text: string): { key: string; hostname: string; port: number } | null {
  const lower = text.toLowerCase();
  const colon = lower.indexOf(':');
  const hostname = colon < 0 ? lower : lower.slice(0, colon);
  let port = 443;
  if (colon >= 0) {
    const portText = lower.slice(colon + 1);
    if (!/^[1-9]\d{0,4}$/.test(portText) || Number(portText) > 65535) return null;
    port = Number(portText);
  }
  if (hostname.length === 0 || hostname.length > 253) return null;
  if (!IPV4.test(hostname) && !hostname.split('.').every((l) => LABEL.test(l))) return null;
  return { key: lower, hostname, port };
}
