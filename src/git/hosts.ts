// The git host registry: the only upstreams the git listener will ever contact. Built once at
// start-up from the environment (GIT_HOST_A / GIT_HOST_B) and an optional JSON hosts file.
// Parsing is pure and strict: an unknown or ill-typed field stops start-up with its name.
import { entryReader, parseConfigJson } from '../config/config-file.ts';
import { isObject } from '../json/keys.ts';
import type { SecretRef } from '../config/secret.ts';
import { parseGitHubApp, type GitHubAppConfig } from './github-app-config.ts';
import { parseHostKey } from './host-key.ts';
import { parseRefPattern, type RefPattern } from './ref-rules.ts';
import { parseRepoRule, type RepoRule } from './scope.ts';

/** `github-app`: the token is an installation token the proxy mints from the host's `githubApp`. */
export type AuthType = 'bearer' | 'basic' | 'github-app';

export type UsernameRef = SecretRef | { readonly literal: string };

export interface HostConfig {
  /** Registry key, lower case: `host` or `host:port`; the first path segment of a request. */
  readonly key: string;
  readonly hostname: string;
  readonly port: number;
  readonly authType: AuthType;
  /** Where the token is read from; undefined for a GitHub App host (its token is minted). */
  readonly token: SecretRef | undefined;
  /** The GitHub App that mints this host's tokens (`auth: "github-app"`); absent otherwise. */
  readonly githubApp?: GitHubAppConfig;
  readonly username: UsernameRef | undefined;
  readonly caFile: string | undefined;
  readonly tlsInsecureSkipVerify: boolean;
  /** Hosts file `repos`: the only repositories any workload may reach on this host (with the refs a push may change); undefined: all. */
  readonly repos: readonly RepoRule[] | undefined;
  /** Hosts file `readOnly: true`: no workload may push to this host. */
  readonly readOnly: boolean;
  /** Hosts file `protectedRefs`: refs no push through the proxy may change on this host. */
  readonly protectedRefs: readonly RefPattern[];
}

function envHost(nameVar: string, name: string, authType: AuthType): HostConfig {
  const parsed = parseHostKey(name);
  if (!parsed) throw new Error(`${nameVar}: "${name}" is not a host name (host or host:port)`);
  return {
    ...parsed,
    authType,
    token: { env: `${nameVar}_TOKEN` },
    username: authType === 'basic' ? { env: `${nameVar}_USERNAME` } : undefined,
    caFile: undefined,
    tlsInsecureSkipVerify: false,
    repos: undefined,
    readOnly: false,
    protectedRefs: [],
  };
}

const DEFAULT_HOST_A = 'github.com';

/**
 * The environment's hosts. Host A (bearer) is configured when GIT_HOST_A or GIT_HOST_A_TOKEN is
 * non-empty; its name defaults to github.com. With neither there is no host A, so git-config
 * does not route github.com through a proxy that has no credential for it, and a hosts file may
 * define github.com itself. Host B (basic) exists only when GIT_HOST_B is set; its token or
 * username without it is an error, because a credential meant for no host is a mistake.
 * (An empty variable counts as unset, as everywhere else.)
 */
export function hostsFromEnv(env: NodeJS.ProcessEnv): HostConfig[] {
  const hosts: HostConfig[] = [];
  if (env.GIT_HOST_A || env.GIT_HOST_A_TOKEN) hosts.push(envHost('GIT_HOST_A', env.GIT_HOST_A || DEFAULT_HOST_A, 'bearer'));
  if (env.GIT_HOST_B) hosts.push(envHost('GIT_HOST_B', env.GIT_HOST_B, 'basic'));
  else {
    for (const orphan of ['GIT_HOST_B_TOKEN', 'GIT_HOST_B_USERNAME']) {
      if (env[orphan]) throw new Error(`${orphan} is set but GIT_HOST_B is not: set GIT_HOST_B to the basic-auth host it is for`);
    }
  }
  return hosts;
}

export const HOST_FIELDS = new Set([
  'host',
  'auth',
  'tokenEnv',
  'tokenFile',
  'username',
  'usernameEnv',
  'usernameFile',
  'caFile',
  'tlsInsecureSkipVerify',
  'repos',
  'readOnly',
  'protectedRefs',
  'githubApp',
]);

/** Parses the --git-hosts JSON file: `{"hosts": [{"host": ..., "auth": ..., ...}]}`. */
export function parseHostsFile(text: string, fileName: string): HostConfig[] {
  const { doc, fail } = parseConfigJson(text, fileName);
  if (!isObject(doc)) return fail('(file)', 'must be a JSON object with a "hosts" array');
  for (const k of Object.keys(doc)) if (k !== 'hosts') fail(k, 'unknown field (expected only "hosts")');
  if (!Array.isArray(doc.hosts)) return fail('hosts', 'must be an array');

  return doc.hosts.map((raw: unknown, i: number): HostConfig => {
    const { entry, at, str, envName, secretRef } = entryReader(raw, `hosts[${i}]`, HOST_FIELDS, fail);

    const hostText = str('host') ?? fail(at('host'), 'is required');
    const parsed = parseHostKey(hostText) ?? fail(at('host'), `"${hostText}" is not host or host:port`);
    const auth = str('auth') ?? fail(at('auth'), 'is required ("bearer", "basic" or "github-app")');
    if (auth !== 'bearer' && auth !== 'basic' && auth !== 'github-app') fail(at('auth'), 'must be "bearer", "basic" or "github-app"');

    // A GitHub App host's token is minted from its githubApp; any other host's is read from one place.
    let token: SecretRef | undefined;
    let githubApp: GitHubAppConfig | undefined;
    if (auth === 'github-app') {
      if (entry.githubApp === undefined) fail(at('githubApp'), 'is required with "auth": "github-app" (appId or clientId, installationId, privateKeyFile)');
      for (const f of ['tokenEnv', 'tokenFile']) if (entry[f] !== undefined) fail(at(f), 'a github-app host takes no token: the proxy mints it from githubApp');
      githubApp = parseGitHubApp(entry.githubApp, `hosts[${i}]`, fail);
    } else {
      if (entry.githubApp !== undefined) fail(at('githubApp'), 'is only for "auth": "github-app"');
      token = secretRef('tokenEnv', 'tokenFile');
    }

    const userLiteral = str('username');
    const userEnv = envName('usernameEnv');
    const userFile = str('usernameFile');
    const userCount = [userLiteral, userEnv, userFile].filter((v) => v !== undefined).length;
    let username: UsernameRef | undefined;
    if (auth === 'basic') {
      if (userCount !== 1) fail(at('username'), 'basic auth needs exactly one of username, usernameEnv, usernameFile');
      username = userLiteral !== undefined ? { literal: userLiteral } : userEnv !== undefined ? { env: userEnv } : { file: userFile! };
    } else if (userCount !== 0) {
      fail(at('username'), auth === 'github-app' ? 'a github-app host takes no username: its token goes upstream as x-access-token' : 'only basic auth takes a username');
    }

    const bool = (f: string): boolean => {
      const v = entry[f];
      if (v !== undefined && typeof v !== 'boolean') fail(at(f), 'must be true or false');
      return v === true;
    };

    let repos: RepoRule[] | undefined;
    if (entry.repos !== undefined) {
      if (!Array.isArray(entry.repos) || entry.repos.length === 0) fail(at('repos'), 'must be a non-empty array of repository patterns (leave it out to allow every repository)');
      repos = (entry.repos as unknown[]).map((p, j) => {
        if (typeof p !== 'string') return fail(at(`repos[${j}]`), 'must be a string such as "acme/widgets" or "acme/*" (with ref rules: "acme/widgets:refs/heads/agent/*")');
        const rule = parseRepoRule(p);
        return rule.ok ? rule.value : fail(at(`repos[${j}]`), rule.reason);
      });
    }
    const protectedRefs = (entry.protectedRefs ?? []) as unknown[];
    if (!Array.isArray(protectedRefs)) fail(at('protectedRefs'), 'must be an array of ref patterns such as "refs/heads/main" or "refs/tags/*"');

    return {
      ...parsed,
      authType: auth as AuthType,
      token,
      ...(githubApp ? { githubApp } : {}),
      username,
      caFile: str('caFile'),
      tlsInsecureSkipVerify: bool('tlsInsecureSkipVerify'),
      repos,
      readOnly: bool('readOnly'),
      protectedRefs: protectedRefs.map((p, j) => {
        const pattern = typeof p === 'string' ? parseRefPattern(p) : { ok: false as const, reason: 'must be a string such as "refs/heads/main" or "refs/tags/*"' };
        return pattern.ok ? pattern.value : fail(at(`protectedRefs[${j}]`), pattern.reason);
      }),
    };
  });
}

/** Environment hosts first, then file hosts; the same key twice is a configuration error. */
export function mergeHosts(...lists: HostConfig[][]): HostConfig[] {
  const seen = new Set<string>();
  const all = lists.flat();
  for (const h of all) {
    if (seen.has(h.key)) throw new Error(`git host "${h.key}" is registered twice (environment and/or hosts file)`);
    seen.add(h.key);
  }
  return all;
}
