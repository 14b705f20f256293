// The shared store's settings (--limits-store and the flags beside it): where it is (one Redis,
// or the sentinels that name its master), the ACL user, TLS and its CA bundle, and the passwords
// to give; the client options they make.
import type { ServeOptions } from '../config/cli.ts';
import { fileSecret, sanitizePassword, type SecretSource } from '../config/secret.ts';
import { showAddress, type StoreAddress } from './node.ts';
import type { RespOptions } from './resp.ts';
import { sentinelMaster, watchSwitches } from './sentinel.ts';

/** Where the store is, as --limits-store names it. */
export type StoreUrl = {
  /** rediss: TLS to every node (the sentinels too). */
  readonly tls: boolean;
  /** The ACL user the gateway authenticates as (AUTH user password); undefined: the default user. */
  readonly user: string | undefined;
} & ({ readonly kind: 'direct'; readonly address: StoreAddress } | { readonly kind: 'sentinel'; readonly sentinels: readonly StoreAddress[]; readonly master: string });

const FORMS = 'memory, redis://[USER@]HOST:PORT, rediss://[USER@]HOST:PORT, or redis+sentinel:// or rediss+sentinel://[USER@]HOST:PORT[,HOST:PORT...]/MASTER';
const NAME = /^[A-Za-z0-9._-]{1,64}$/;

/** Pure: `HOST:PORT` (a name, an IPv4 address or a bracketed IPv6 one), or undefined. */
function nodeAddress(text: string): StoreAddress | undefined {
  const m = /^([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$/.exec(text);
  return m && Number(m[2]) <= 65535 ? { host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) } : undefined;
}

/**
 * Pure: the store --limits-store names. No password (it comes from a file, never argv) and no
 * database number; a user name and a master name are letters, digits, `.`, `_` and `-`.
 */
export function parseStoreUrl(text: string): StoreUrl {
  // A password someone put in the URL is not shown back (the message reaches logs and terminals).
  const shown = text.replace(/(\/\/[^@/]*?):[^@/]*@/, '$1:<hidden>@');
  const fail = (why: string) => new Error(`--limits-store: "${shown}" ${why}; give ${FORMS} (a password goes in --limits-store-password-file)`);
  const m = /^(rediss?)(\+sentinel)?:\/\/(?:([^@/]*)@)?([^@/]*)(?:\/([^/]*))?$/.exec(text);
  if (!m) throw fail('is not a store URL');
  const [, scheme, sentinel, user, hosts, path] = m;
  if (user !== undefined && !NAME.test(user)) throw fail(user.includes(':') ? 'holds a password' : 'has a user name that is not letters, digits, ".", "_" or "-"');
  const addresses = hosts!.split(',').map(nodeAddress);
  if (addresses.some((a) => a === undefined)) throw fail('needs HOST:PORT for every node');
  const common = { tls: scheme === 'rediss', user };
  if (sentinel === undefined) {
    if (addresses.length !== 1) throw fail('names several nodes: several are sentinels (redis+sentinel://)');
    if (path !== undefined && path !== '') throw fail('names a database: the gateway uses database 0');
    return { ...common, kind: 'direct', address: addresses[0]! };
  }
  if (path === undefined || !NAME.test(path)) throw fail('needs the master\'s name after the sentinels (/MASTER)');
  return { ...common, kind: 'sentinel', sentinels: addresses as StoreAddress[], master: path };
}

/** Pure: the store as the log lines name it (`redis:6379`, `mymaster via s1:26379,s2:26379`). */
export function describeStore(url: StoreUrl): string {
  return url.kind === 'direct' ? showAddress(url.address) : `${url.master} via ${url.sentinels.map(showAddress).join(',')}`;
}

/** A password file: read again on every connection, so a rotated file is used from the next reconnect on; missing or empty at start-up stops it, naming the flag. */
function passwordFile(flag: string, file: string | undefined): SecretSource | undefined {
  if (file === undefined) return undefined;
  const source = fileSecret(file, sanitizePassword);
  if (!source.read().ok) throw new Error(`--${flag}: ${file} cannot be read, or is empty`);
  return source;
}

/** The limits store's password (--limits-store-password-file). */
export const storePassword = (file: string | undefined): SecretSource | undefined => passwordFile('limits-store-password-file', file);

/** The flags that say how to reach the store. */
export interface StoreFlags {
  readonly url: string;
  readonly passwordFile: string | undefined;
  readonly caFile: string | undefined;
  readonly sentinelUser: string | undefined;
  readonly sentinelPasswordFile: string | undefined;
}

/** The flags of a command line that say how to reach the store (serve, revoke and confirm-store-reset take them all). */
export const storeFlags = (o: ServeOptions): StoreFlags => ({ url: o.limitsStore, passwordFile: o.limitsStorePasswordFile, ...o.limitsStoreAccess });

/** Each command, and each sentinel's answer, is waited for this long (RespClient's own default). */
const ANSWER_MS = 2000;

/**
 * The client options that reach the store of these flags, and its name in logs. A flag that the
 * URL gives no use for is refused, not ignored: a CA file without rediss://, a sentinel's password
 * or user without sentinels, a user without a password.
 */
export function storeConnection(flags: StoreFlags): {
  url: StoreUrl;
  where: string;
  options: Pick<RespOptions, 'address' | 'tls' | 'user' | 'password' | 'role'>;
  /** With sentinels: follows their +switch-master announcements (sentinel.ts: watchSwitches) until the function it returns is called. */
  switches?: (onSwitch: (to: StoreAddress) => void) => () => void;
} {
  const url = parseStoreUrl(flags.url);
  if (flags.caFile !== undefined && !url.tls) throw new Error('--limits-store-ca-file: the store is reached without TLS; name it rediss:// (or rediss+sentinel://) to use the CA bundle');
  if (url.kind !== 'sentinel' && (flags.sentinelUser !== undefined || flags.sentinelPasswordFile !== undefined)) {
    throw new Error(`--limits-store-sentinel-${flags.sentinelUser === undefined ? 'password-file' : 'user'}: the store is not reached through sentinels; name them with redis+sentinel://HOST:PORT,.../MASTER`);
  }
  if (url.user !== undefined && flags.passwordFile === undefined) throw new Error(`--limits-store: the user ${url.user} needs its password in --limits-store-password-file`);
  if (flags.sentinelUser !== undefined && flags.sentinelPasswordFile === undefined) throw new Error('--limits-store-sentinel-user: the sentinels\' user needs its password in --limits-store-sentinel-password-file');
  if (flags.sentinelUser !== undefined && !NAME.test(flags.sentinelUser)) throw new Error(`--limits-store-sentinel-user: "${flags.sentinelUser}" is not letters, digits, ".", "_" or "-"`);
  const tls = url.tls ? { caFile: readable(flags.caFile) } : (false as const);
  const password = storePassword(flags.passwordFile);
  const common = { tls, user: url.user, password };
  if (url.kind === 'direct') return { url, where: describeStore(url), options: { ...common, address: url.address, role: 'if-answered' } };
  const sentinelPassword = passwordFile('limits-store-sentinel-password-file', flags.sentinelPasswordFile);
  const sentinels = { sentinels: url.sentinels, master: url.master, tls, user: flags.sentinelUser, password: sentinelPassword, timeoutMs: ANSWER_MS };
  return { url, where: describeStore(url), options: { ...common, address: sentinelMaster(sentinels), role: 'required' }, switches: (onSwitch) => watchSwitches(sentinels, onSwitch) };
}

/** The CA file, when it can be read now (it is read again on every connection). */
function readable(caFile: string | undefined): string | undefined {
  passwordFile('limits-store-ca-file', caFile);
  return caFile;
}
