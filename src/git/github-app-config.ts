// A git host whose credential is a GitHub App (`"auth": "github-app"` and a `githubApp` object in
// the hosts file): which app, which installation, where its private key is, where the API is, and
// what the installation tokens are narrowed to. Parsing is pure and strict: every mistake stops
// start-up naming the field, and nothing read from the key file ever appears in a message.
import { entryReader, type FieldFailure } from '../config/config-file.ts';
import { isObject } from '../json/keys.ts';

export interface GitHubAppConfig {
  /** The JWT's `iss`: the client ID (GitHub's advice) or the numeric app ID, as given. */
  readonly issuer: string | number;
  readonly installationId: number;
  readonly privateKeyFile: string;
  /** The REST API's base, https, without a trailing slash: `https://api.github.com`, `https://ghe.example/api/v3`. */
  readonly apiUrl: string;
  /** Repository names (without owner) the tokens are narrowed to; undefined: every repository of the installation. */
  readonly repositories: readonly string[] | undefined;
  /** Permission name to level the tokens are narrowed to; undefined: every permission of the app. */
  readonly permissions: Readonly<Record<string, PermissionLevel>> | undefined;
}

export type PermissionLevel = 'read' | 'write' | 'admin';

const GITHUB_APP_FIELDS = new Set(['appId', 'clientId', 'installationId', 'privateKeyFile', 'apiUrl', 'repositories', 'permissions']);

const DEFAULT_GITHUB_API_URL = 'https://api.github.com';

/** GitHub's own cap on the repositories one token may be narrowed to. */
const MAX_REPOSITORIES = 500;
const REPOSITORY_NAME = /^[A-Za-z0-9._-]{1,100}$/;
const CLIENT_ID = /^[A-Za-z0-9._-]{1,64}$/;
const PERMISSION_NAME = /^[a-z][a-z_]{0,63}$/;
const LEVELS: readonly PermissionLevel[] = ['read', 'write', 'admin'];

const isId = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v > 0;

/**
 * Pure: the API base from the `apiUrl` text, or the reason it is refused. Https only (the JWT and
 * the token cross it); no user, query or fragment; the path kept (GitHub Enterprise Server's
 * `/api/v3`), its trailing slash dropped.
 */
export function parseApiUrl(text: string): { ok: true; value: string } | { ok: false; reason: string } {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { ok: false, reason: 'is not a URL (e.g. "https://api.github.com" or "https://ghe.example.com/api/v3")' };
  }
  if (url.protocol !== 'https:') return { ok: false, reason: 'must be an https URL: the app\'s JWT and its tokens cross it' };
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '' || /[\s\\]/.test(text)) {
    return { ok: false, reason: 'must be a plain https URL: no user, query, fragment, space or backslash' };
  }
  return { ok: true, value: `${url.origin}${url.pathname.replace(/\/+$/, '')}` };
}

function parseRepositories(raw: unknown, at: string, fail: FieldFailure): string[] {
  if (!Array.isArray(raw) || raw.length === 0) return fail(at, 'must be a non-empty array of repository names (leave it out for every repository of the installation)');
  if (raw.length > MAX_REPOSITORIES) return fail(at, `lists ${raw.length} repositories; GitHub narrows a token to at most ${MAX_REPOSITORIES}`);
  const seen = new Set<string>();
  return raw.map((name, i) => {
    if (typeof name !== 'string') return fail(`${at}[${i}]`, 'must be a string (a repository name such as "widgets")');
    if (name.includes('/')) return fail(`${at}[${i}]`, `"${name}": give the name without its owner ("${name.slice(name.lastIndexOf('/') + 1)}"): the installation's account owns them all`);
    if (!REPOSITORY_NAME.test(name) || name === '.' || name === '..') return fail(`${at}[${i}]`, 'must be a repository name: 1 to 100 of A-Z a-z 0-9 . _ -');
    if (seen.has(name.toLowerCase())) return fail(`${at}[${i}]`, `"${name}" is listed twice`);
    seen.add(name.toLowerCase());
    return name;
  });
}

function parsePermissions(raw: unknown, at: string, fail: FieldFailure): Record<string, PermissionLevel> {
  if (!isObject(raw) || Object.keys(raw).length === 0) return fail(at, 'must be a non-empty object of permission levels, e.g. {"contents": "read"} (leave it out for every permission of the app)');
  const out: Record<string, PermissionLevel> = {};
  for (const [name, level] of Object.entries(raw)) {
    if (!PERMISSION_NAME.test(name)) fail(`${at}.${name}`, 'is not a GitHub App permission name (lower case and _, e.g. "contents")');
    if (typeof level !== 'string' || !LEVELS.includes(level as PermissionLevel)) fail(`${at}.${name}`, 'must be "read", "write" or "admin"');
    out[name] = level as PermissionLevel;
  }
  // git reads and writes through the contents permission: a token without it can do nothing here.
  if (out.contents !== 'read' && out.contents !== 'write') fail(`${at}.contents`, 'is required when permissions are given: "read" to fetch, "write" to push too');
  return out;
}

/** Pure: the `githubApp` object of hosts file entry `where` (`hosts[0]`). */
export function parseGitHubApp(raw: unknown, where: string, fail: FieldFailure): GitHubAppConfig {
  const { entry, at, str } = entryReader(raw, `${where}.githubApp`, GITHUB_APP_FIELDS, fail);
  if ((entry.appId === undefined) === (entry.clientId === undefined)) fail(at('appId'), 'exactly one of appId (a number) and clientId (GitHub advises it) is required');
  if (entry.appId !== undefined && !isId(entry.appId)) fail(at('appId'), 'must be a positive whole number (the app ID on its settings page)');
  const clientId = str('clientId');
  if (clientId !== undefined && !CLIENT_ID.test(clientId)) fail(at('clientId'), 'must be the client ID on the app\'s settings page (e.g. "Iv23liAbCdEf0123")');
  if (!isId(entry.installationId)) fail(at('installationId'), 'is required: a positive whole number (the number at the end of the installation\'s settings URL)');
  const privateKeyFile = str('privateKeyFile') ?? fail(at('privateKeyFile'), 'is required: the path of the app\'s private key (PEM)');
  const api = parseApiUrl(str('apiUrl') ?? DEFAULT_GITHUB_API_URL);
  const apiUrl = api.ok ? api.value : fail(at('apiUrl'), api.reason);
  return {
    issuer: clientId ?? (entry.appId as number),
    installationId: entry.installationId as number,
    privateKeyFile,
    apiUrl,
    repositories: entry.repositories === undefined ? undefined : parseRepositories(entry.repositories, at('repositories'), fail),
    permissions: entry.permissions === undefined ? undefined : parsePermissions(entry.permissions, at('permissions'), fail),
  };
}
