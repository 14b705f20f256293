// A credential the gateway mints and keeps: fetched once, used until shortly before it expires,
// refreshed ahead of expiry with one refresh in flight at a time (so no call waits on it once the
// first is in), the current one kept in use when a refresh fails until it expires. A minted value
// is checked like a static key before it is kept (visible ASCII only), and a call waits on a
// refresh for a bounded time. Google access tokens (service account, metadata server) and AWS
// temporary credentials (web identity) share it.
import { isVisibleAscii } from '../../config/secret.ts';
import { ERRORS } from '../../http/errors.ts';
import type { Secret } from '../../http/secret-value.ts';
import type { Authenticated, CredentialSource, OutgoingCall } from './source.ts';

/** Refreshed this long before it expires (Google's tokens and STS credentials live an hour). */
const REFRESH_AHEAD_MS = 5 * 60_000;
/** One this close to its expiry is not sent (clock skew, the call's own duration). */
const EXPIRY_MARGIN_MS = 30_000;

/**
 * The longest a call waits for a refresh in flight before it is answered 502: the refresh goes
 * on (bounded by its fetch's deadline, fetch.ts), and serves the calls after it.
 */
const REFRESH_WAIT_MS = 5_000;

export interface Minted<T> {
  readonly value: T;
  readonly expiresAtMs: number;
}

/**
 * Pure: the name of a minted value's field that is not visible ASCII (CR, LF, NUL, DEL, a space,
 * anything above 0x7e, or empty), or undefined. Such a value, from a broken or hostile token
 * endpoint, is a failed refresh: never kept, never sent, and named by field, never by value.
 */
export function mintedValueProblem(fields: Readonly<Record<string, string>>): string | undefined {
  for (const [name, value] of Object.entries(fields)) if (typeof value !== 'string' || !isVisibleAscii(value)) return name;
  return undefined;
}

/** Pure: what to do with what is held at `nowMs`: use it, use it and refresh ahead, or wait for one. */
export function mintedAction(held: { readonly expiresAtMs: number } | undefined, nowMs: number): 'use' | 'use_and_refresh' | 'wait' {
  if (held === undefined || nowMs >= held.expiresAtMs - EXPIRY_MARGIN_MS) return 'wait';
  return nowMs >= held.expiresAtMs - REFRESH_AHEAD_MS ? 'use_and_refresh' : 'use';
}

export interface MintedSourceOptions<T> {
  readonly type: CredentialSource['type'];
  /** What is minted, for the refusal's reason: "Google access token", "AWS web-identity credentials". */
  readonly what: string;
  /** Fetches a fresh one (the side effect). */
  readonly mint: (nowMs: number) => Promise<Minted<T>>;
  /** The value's credential fields by their wire names (`access_token`, `SessionToken`), checked before it is kept. */
  readonly fields: (value: T) => Readonly<Record<string, string>>;
  /** How long a call waits for a refresh in flight (REFRESH_WAIT_MS unless a test needs a shorter one). */
  readonly waitMs?: number;
  /** The headers and secrets of one call with it. */
  readonly use: (value: T, call: OutgoingCall, nowMs: number) => { headers: Record<string, Secret>; secrets: readonly Secret[] };
  readonly present: () => boolean;
  readonly onRefresh: (outcome: { ok: true } | { ok: false; reason: string }) => void;
}

export type MintedSource = CredentialSource & { refresh(nowMs: number): Promise<void>; refreshIfDue(nowMs: number): Promise<void> };

export function mintedSource<T>(opts: MintedSourceOptions<T>): MintedSource {
  let held: Minted<T> | undefined;
  let inFlight: Promise<void> | undefined;
  let lastError = 'none fetched yet';
  const waitMs = opts.waitMs ?? REFRESH_WAIT_MS;
  const refresh = (nowMs: number): Promise<void> => {
    inFlight ??= (async () => {
      try {
        const minted = await opts.mint(nowMs);
        const bad = mintedValueProblem(opts.fields(minted.value));
        if (bad !== undefined) throw new Error(`${bad} in the answer is not visible ASCII (it holds CR, LF, NUL, DEL, a space or a non-ASCII character)`);
        held = minted;
        opts.onRefresh({ ok: true });
      } catch (err) {
        lastError = (err as Error).message;
        opts.onRefresh({ ok: false, reason: lastError });
      } finally {
        inFlight = undefined;
      }
    })();
    return inFlight;
  };
  return {
    type: opts.type,
    present: opts.present,
    refresh,
    refreshIfDue: (nowMs) => (mintedAction(held, nowMs) === 'use' ? Promise.resolve() : refresh(nowMs)),
    async authenticate(call, nowMs): Promise<Authenticated> {
      const action = mintedAction(held, nowMs);
      if (action === 'use_and_refresh') void refresh(nowMs);
      if (action === 'wait') {
        if (!(await settledWithin(refresh(nowMs), waitMs))) return { ok: false, error: ERRORS.upstreamCredentialFailed, reason: `no valid ${opts.what} (the refresh in flight did not finish within ${waitMs / 1000} s)` };
        if (mintedAction(held, nowMs) === 'wait') return { ok: false, error: ERRORS.upstreamCredentialFailed, reason: `no valid ${opts.what} (${lastError})` };
      }
      return { ok: true, ...opts.use(held!.value, call, nowMs) };
    },
  };
}

/** Whether `work` (which never rejects) settled within `ms`; the timer goes either way. */
function settledWithin(work: Promise<void>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms, false);
    void work.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
