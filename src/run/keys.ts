// Start-up: each listener's token keys, and the verifier it holds (src/auth/verifier.ts).
// A listener's keys are the union of its environment secret (MODEL_PROXY_SIGNING_KEY or
// GIT_PROXY_SIGNING_KEY, or the same from a file, *_FILE: the key without kid) and its key files
// (--bot-keys, --git-keys: keys by kid). Files are read here, where a problem stops start-up;
// the verifier then follows their changes (src/auth/key-files.ts).
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { keyRing, parseSigningKey, type KeyRing, type SigningKey, type VerificationKey } from '../auth/jwt.ts';
import { KeyFiles } from '../auth/key-files.ts';
import { secretFromFile, signingKeyFile as signingKeyFromFile } from '../auth/keys.ts';
import { composeVerifier, keyRingSource, type TokenSource, type TokenVerifier } from '../auth/verifier.ts';
import type { LogSink } from '../http/log.ts';
import type { KeyDescription, ListenerAuthFields, ListenerAuthMode, LogEvent } from './log-events.ts';

type KeyListener = 'model' | 'git';

/** A listener's keys as start-up read them. */
export interface ListenerKeys {
  readonly listener: KeyListener;
  /** The environment variable's secret (no kid). */
  readonly secret: Buffer | undefined;
  /** The *_FILE secret and the key files, followed as they change. */
  readonly files: readonly KeyFiles[];
}

const VARIABLE: Record<KeyListener, string> = { model: 'MODEL_PROXY_SIGNING_KEY', git: 'GIT_PROXY_SIGNING_KEY' };
const KEYS_FLAG: Record<KeyListener, string> = { model: '--bot-keys', git: '--git-keys' };

/**
 * A listener's keys: its variable's secret (`secret`, parsed with the listener's configuration),
 * or its *_FILE, not both, and the key files of `keysPath`; undefined when it has none
 * (network-policy mode). Every key is read now.
 */
export function loadListenerKeys(listener: KeyListener, secret: Buffer | undefined, env: NodeJS.ProcessEnv, keysPath: string | undefined): ListenerKeys | undefined {
  const variable = VARIABLE[listener];
  const secretFile = secretFileBeside(listener, secret, env, { after: ' (the file is re-read when it changes)' });
  const files = [
    ...(secretFile === undefined ? [] : [new KeyFiles({ path: secretFile, kind: 'secret', name: `${variable}_FILE` })]),
    ...(keysPath === undefined ? [] : [new KeyFiles({ path: keysPath, kind: 'keys', name: KEYS_FLAG[listener] })]),
  ];
  if (secret === undefined && files.length === 0) return undefined;
  const keys = { listener, secret, files };
  ringOf(keys);
  return keys;
}

/**
 * The listener's *_FILE (the key without kid, from a file), refused beside its variable's secret:
 * the rule serve and mint-token share, each with its own words around the message.
 */
function secretFileBeside(listener: KeyListener, secret: Buffer | undefined, env: NodeJS.ProcessEnv, words: { before?: string; after?: string }): string | undefined {
  const variable = VARIABLE[listener];
  const file = env[`${variable}_FILE`] || undefined;
  if (secret !== undefined && file !== undefined) throw new Error(`${words.before ?? ''}${variable} and ${variable}_FILE are both set: set one${words.after ?? ''}`);
  return file;
}

function ringOf(keys: ListenerKeys): KeyRing {
  const fromVariable: VerificationKey[] = keys.secret === undefined ? [] : [{ kid: undefined, alg: 'HS256', key: keys.secret }];
  return keyRing([...fromVariable, ...keys.files.flatMap((f) => f.keys)]);
}

/** The keys as the listening line and the reload line show them: kid and algorithm, never a key. */
export function describeKeys(ring: KeyRing): KeyDescription[] {
  return [...(ring.unnamed ? [ring.unnamed] : []), ...ring.byKid.values()].map((k) => ({ kid: k.kid ?? null, alg: k.alg }));
}

/**
 * Pure: how a listener authenticates its callers, as its start-up warnings and its `listening`
 * line say it: a client certificate (mutual TLS), a token (its own keys or service accounts), or
 * nobody (network-policy mode); and the fields that line adds (never a key's value).
 */
export function listenerAuthentication(tlsMode: 'plain' | 'tls' | 'mutual-tls', keys: { ring: () => KeyRing } | undefined, serviceAccountIssuer: string | undefined) {
  const mode: ListenerAuthMode = tlsMode === 'mutual-tls' ? 'mutual-tls' : keys || serviceAccountIssuer !== undefined ? 'jwt' : 'network-policy';
  const fields: ListenerAuthFields = { ...(serviceAccountIssuer !== undefined ? { service_account_issuer: serviceAccountIssuer } : {}), ...(keys ? { keys: describeKeys(keys.ring()) } : {}), tls: tlsMode };
  return { mode, authenticated: mode !== 'network-policy', fields } as const;
}

/** What the verifier tells of its key files: a new set of keys (logged), a problem (logged and counted). */
export interface KeyEvents {
  readonly log: LogSink<LogEvent>;
  readonly onProblem?: (listener: KeyListener) => void;
}

/**
 * The source of a listener's own keys (for listenerVerifier), followed as their files change;
 * undefined without keys. A re-read that changed the keys is logged (`keys_reloaded`, kid and
 * algorithm only); a problem of a re-read is logged once (`config_error`) and counted. `close`
 * stops following the files.
 */
export function openVerifier(keys: ListenerKeys | undefined, maxLifetimeSec: number, events: KeyEvents): { source: TokenSource; ring: () => KeyRing; close: () => void } | undefined {
  if (keys === undefined) return undefined;
  let ring = ringOf(keys);
  const stops = keys.files.map((files) =>
    files.watch(
      () => {
        ring = ringOf(keys);
        events.log({ event: 'keys_reloaded', listener: keys.listener, keys: describeKeys(ring) });
      },
      (message) => {
        events.log({ event: 'config_error', listener: keys.listener, message });
        events.onProblem?.(keys.listener);
      },
    ),
  );
  const current = () => ring;
  return { source: keyRingSource(current, maxLifetimeSec), ring: current, close: () => stops.forEach((stop) => stop()) };
}

/**
 * A listener's verifier, asking in this order: the client certificate (mutual TLS: every client
 * has one, so it always answers), the service-account source (it answers only tokens of its
 * issuer), then the listener's own keys. Undefined when there is none (network-policy mode).
 */
export function listenerVerifier(sources: readonly (TokenSource | undefined)[]): TokenVerifier | undefined {
  const present = sources.filter((s): s is TokenSource => s !== undefined);
  return present.length === 0 ? undefined : composeVerifier(present);
}

/** A key file's bytes for mint-token, or an Error naming it. */
function readMintKey(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new Error(`mint-token: ${what} ${path} cannot be read (${(err as NodeJS.ErrnoException).code})`);
  }
}

/**
 * mint-token's key: --signing-key's file (a private key or an HS256 secret, its kid the file's
 * name), else the listener's variable or its *_FILE (the key without kid); undefined: none set.
 */
export function mintingKey(listener: KeyListener, env: NodeJS.ProcessEnv, keyFile: string | undefined): SigningKey | undefined {
  if (keyFile !== undefined) {
    const pem = readMintKey(keyFile, '--signing-key');
    try {
      return signingKeyFromFile(basename(keyFile), pem);
    } catch (err) {
      throw new Error(`mint-token: --signing-key ${(err as Error).message}`);
    }
  }
  const variable = VARIABLE[listener];
  const secret = parseSigningKey(variable, env[variable]);
  const file = secretFileBeside(listener, secret, env, { before: 'mint-token: ' });
  if (secret !== undefined) return { kid: undefined, alg: 'HS256', key: secret };
  if (file === undefined) return undefined;
  return { kid: undefined, alg: 'HS256', key: secretFromFile(`${variable}_FILE ${file}`, readMintKey(file, `${variable}_FILE`)) };
}
