// Request targets a workload might use to escape the git proxy's rules: to reach another host,
// to get our credential sent to a path that is not a git route, or to smuggle a dot segment
// upstream. `{host}` stands for a registered host key. `status` is what the proxy must answer;
// `parser` marks targets that Node's HTTP parser itself refuses (400) before our code runs.

export interface HostileTarget {
  readonly method: string;
  readonly target: string;
  readonly status: number;
  readonly why: string;
  readonly parser?: true;
}

const INFO = 'info/refs?service=git-upload-pack';

export const HOSTILE_TARGETS: readonly HostileTarget[] = [
  // Request-target form
  { method: 'GET', target: 'http://evil.example/org/repo.git/' + INFO, status: 400, why: 'absolute-form to another host' },
  { method: 'GET', target: 'http://{host}/org/repo.git/' + INFO, status: 400, why: 'absolute-form to the registered host' },
  { method: 'GET', target: '*', status: 400, why: 'asterisk-form' },
  { method: 'GET', target: '/', status: 400, why: 'bare path' },
  { method: 'GET', target: '//evil.example/org/repo.git/' + INFO, status: 400, why: 'empty host segment (scheme-relative)' },
  // Host segment
  { method: 'GET', target: '/evil.example/org/repo.git/' + INFO, status: 403, why: 'unregistered host' },
  { method: 'GET', target: '/{host}.evil.example/org/repo.git/' + INFO, status: 403, why: 'registered host as a prefix of another' },
  { method: 'GET', target: '/{host}%2fevil.example/org/repo.git/' + INFO, status: 403, why: 'encoded slash in host segment' },
  { method: 'GET', target: '/%67ithub.com/org/repo.git/' + INFO, status: 403, why: 'encoded letter in host segment' },
  { method: 'GET', target: '/{host}%2e/org/repo.git/' + INFO, status: 403, why: 'encoded trailing dot in host segment' },
  { method: 'GET', target: '/{host}./org/repo.git/' + INFO, status: 403, why: 'trailing dot in host segment' },
  { method: 'GET', target: '/user@{host}/org/repo.git/' + INFO, status: 403, why: 'userinfo in host segment' },
  { method: 'GET', target: '/user:pw@{host}/org/repo.git/' + INFO, status: 403, why: 'userinfo with password in host segment' },
  { method: 'GET', target: '/{host}@evil.example/org/repo.git/' + INFO, status: 403, why: 'registered host as userinfo of another' },
  { method: 'GET', target: '/[::1]/org/repo.git/' + INFO, status: 403, why: 'bracketed IPv6 host' },
  { method: 'GET', target: '/{host}:1/org/repo.git/' + INFO, status: 403, why: 'registered host with another port' },
  { method: 'GET', target: '/{host}%00/org/repo.git/' + INFO, status: 403, why: 'encoded NUL in host segment' },
  { method: 'GET', target: '/{host}%5cevil.example/org/repo.git/' + INFO, status: 403, why: 'encoded backslash in host segment' },
  { method: 'GET', target: '/{host}\\evil.example/org/repo.git/' + INFO, status: 403, why: 'raw backslash in host segment' },
  { method: 'GET', target: '/localhost/org/repo.git/' + INFO, status: 403, why: 'loopback name not in registry' },
  { method: 'GET', target: '/169.254.169.254/latest/meta-data/', status: 403, why: 'cloud metadata address' },
  { method: 'POST', target: '/{host}/org/repo.git/info/lfs/objects/batch', status: 501, why: 'Git LFS batch API (never forwarded)' },
  { method: 'GET', target: '/healthz/../{host}/org/repo.git/' + INFO, status: 403, why: 'healthz prefix with traversal' },
  // Dot segments and separators after the host
  { method: 'GET', target: '/{host}/../evil.example/org/repo.git/' + INFO, status: 403, why: 'dot-dot right after host' },
  { method: 'GET', target: '/{host}/org/../../evil.example/repo.git/' + INFO, status: 403, why: 'dot-dot escaping the host' },
  { method: 'GET', target: '/{host}/org/../other/repo.git/' + INFO, status: 403, why: 'dot-dot staying on the host' },
  { method: 'GET', target: '/{host}/org/./repo.git/' + INFO, status: 403, why: 'single-dot segment' },
  { method: 'GET', target: '/{host}/org/%2e%2e/repo.git/' + INFO, status: 403, why: 'encoded dot-dot, lower case' },
  { method: 'GET', target: '/{host}/org/%2E%2e/repo.git/' + INFO, status: 403, why: 'encoded dot-dot, mixed case' },
  { method: 'GET', target: '/{host}/org/.%2e/repo.git/' + INFO, status: 403, why: 'half-encoded dot-dot' },
  { method: 'GET', target: '/{host}/org/%2e/repo.git/' + INFO, status: 403, why: 'encoded single dot' },
  { method: 'GET', target: '/{host}/org/%252e%252e/repo.git/' + INFO, status: 403, why: 'double-encoded dot-dot' },
  { method: 'GET', target: '/{host}/org/%25%32%65/repo.git/' + INFO, status: 403, why: 'double-encoded dot, escape by escape' },
  { method: 'GET', target: '/{host}/org/repo%2egit/' + INFO, status: 403, why: 'encoded dot inside a segment' },
  { method: 'GET', target: '/{host}/org%2f..%2fevil/repo.git/' + INFO, status: 403, why: 'encoded slashes around dot-dot' },
  { method: 'GET', target: '/{host}/org/repo.git%2finfo/refs?service=git-upload-pack', status: 403, why: 'encoded slash before info/refs' },
  { method: 'GET', target: '/{host}/org%5c..%5cevil/repo.git/' + INFO, status: 403, why: 'encoded backslashes' },
  { method: 'GET', target: '/{host}/org\\..\\evil/repo.git/' + INFO, status: 403, why: 'raw backslashes' },
  { method: 'GET', target: '/{host}/org/..;/evil/repo.git/' + INFO, status: 403, why: 'dot-dot-semicolon (Tomcat-style)' },
  { method: 'GET', target: '/{host}/org;x=y/repo.git/' + INFO, status: 403, why: 'path parameter' },
  { method: 'GET', target: '/{host}/org/repo.git/info/refs;x?service=git-upload-pack', status: 403, why: 'path parameter on refs' },
  { method: 'GET', target: '/{host}/org/%3b/repo.git/' + INFO, status: 403, why: 'encoded semicolon' },
  { method: 'GET', target: '/{host}/org//repo.git/' + INFO, status: 403, why: 'empty segment' },
  { method: 'GET', target: '/{host}/', status: 403, why: 'empty path after host' },
  { method: 'GET', target: '/{host}/org/%0d%0aX-Injected:1/repo.git/' + INFO, status: 403, why: 'encoded CRLF' },
  { method: 'GET', target: '/{host}/org/%u002e%u002e/repo.git/' + INFO, status: 403, why: 'IIS %u escapes' },
  { method: 'GET', target: '/{host}/org/%zz/repo.git/' + INFO, status: 403, why: 'malformed escape' },
  { method: 'GET', target: '/{host}/org/repo.git/info/refs/..?service=git-upload-pack', status: 403, why: 'dot-dot after refs' },
  // Not a git smart-HTTP route: the credential would work against the host's API
  { method: 'GET', target: '/{host}', status: 403, why: 'host only' },
  { method: 'GET', target: '/{host}/api/v3/user', status: 403, why: 'REST API on the same origin' },
  { method: 'POST', target: '/{host}/graphql', status: 403, why: 'GraphQL API on the same origin' },
  { method: 'GET', target: '/{host}/user/repos', status: 403, why: 'listing private repositories' },
  { method: 'GET', target: '/{host}/org/repo.git/HEAD', status: 403, why: 'dumb protocol HEAD' },
  { method: 'GET', target: '/{host}/org/repo.git/objects/info/packs', status: 403, why: 'dumb protocol objects' },
  { method: 'GET', target: '/{host}/org/repo/archive/refs/heads/main.zip', status: 403, why: 'archive download' },
  { method: 'GET', target: '/{host}/org/repo.git/info/refs', status: 403, why: 'info/refs without service' },
  { method: 'GET', target: '/{host}/org/repo.git/info/refs?service=git-upload-archive', status: 403, why: 'upload-archive service' },
  { method: 'GET', target: '/{host}/org/repo.git/info/refs?Service=git-upload-pack', status: 403, why: 'service parameter in other case' },
  { method: 'GET', target: '/{host}/org/repo.git/info/refs?service=git-upload-pack&x=1', status: 403, why: 'extra query parameter' },
  { method: 'GET', target: '/{host}/org/repo.git/info/refs?service=git-upload-pack&service=git-receive-pack', status: 403, why: 'repeated service parameter' },
  { method: 'GET', target: '/{host}/org/repo.git/info/refs?service=git-upload-pack%00', status: 403, why: 'encoded NUL in service' },
  { method: 'GET', target: '/{host}/info/refs?service=git-upload-pack', status: 403, why: 'no repository path' },
  { method: 'POST', target: '/{host}/git-upload-pack', status: 403, why: 'service without repository' },
  { method: 'POST', target: '/{host}/org/repo.git/git-receive-pack?x=1', status: 403, why: 'query on a POST route' },
  { method: 'POST', target: '/{host}/org/repo.git/git-upload-archive', status: 403, why: 'upload-archive RPC' },
  // Right route, wrong method
  { method: 'POST', target: '/{host}/org/repo.git/' + INFO, status: 405, why: 'POST to info/refs' },
  { method: 'GET', target: '/{host}/org/repo.git/git-upload-pack', status: 405, why: 'GET to upload-pack' },
  { method: 'PUT', target: '/{host}/org/repo.git/git-receive-pack', status: 405, why: 'PUT to receive-pack' },
  { method: 'DELETE', target: '/{host}/org/repo.git/git-receive-pack', status: 405, why: 'DELETE to receive-pack' },
  // Refused by Node's parser before any of our code
  { method: 'GET', target: '/{host}/org/repo .git/' + INFO, status: 400, why: 'raw space in target', parser: true },
];
