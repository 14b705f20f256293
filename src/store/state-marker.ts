// Whether the shared store still holds what the gateways gave it. Revocations (`rev:*`) and spend
// (`lim:*`) live only in Redis: a Redis restarted without persistence, flushed, or evicting keys
// forgets them, which silently un-revokes tokens and resets budgets. So the store carries a marker,
// `cp:state`: its kind, a random epoch (new at every write) and a time. Each gateway reads it on
// every connection, before the connection carries a call, and again every few seconds; a marker it
// knew that is gone, or replaced by one no operator wrote, means the store lost its state. The
// loss is written into the marker, so that every replica, and one started later, sees it.
//
// A lost store is not trusted (under --limits-store-failure closed: calls are refused and tokens
// are unchecked, as in an outage) until an operator confirms it (`confirm-store-reset` writes a
// confirmed marker) or every token issued before the loss has expired (--max-token-lifetime after
// it). The decisions are pure functions; StoreStateWatch does the reading and writing.
import { randomBytes } from 'node:crypto';
import { RespError, type RespValue } from './resp.ts';

export const STATE_KEY = 'cp:state';

/**
 * `new`: written by a gateway that found no marker and knew none (a store it takes as new);
 * `lost`: written by a gateway that found the store had lost its state, `sinceSec` the moment it
 * found out; `confirmed`: written by an operator (`confirm-store-reset`).
 */
export interface StateMarker {
  readonly kind: 'new' | 'lost' | 'confirmed';
  readonly epoch: string;
  readonly sinceSec: number;
}

/** Tokens are checked against clocks of several machines: a minute more, as revocation entries get. */
const CLOCK_SKEW_SEC = 60;
/** How often a gateway reads the marker between connections: while the store is trusted, and while it is not (to see a confirmation soon). */
const CHECK_TRUSTED_MS = 10_000;
const CHECK_LOST_MS = 1000;

export const formatMarker = (m: StateMarker): string => `${m.kind} ${m.epoch} ${m.sinceSec}`;

/** Pure: the marker in `text`, or undefined when it is not one (whatever wrote it is not a gateway). */
export function parseMarker(text: string): StateMarker | undefined {
  const m = /^(new|lost|confirmed) ([0-9a-f]{32}) (\d{1,12})$/.exec(text);
  return m ? { kind: m[1] as StateMarker['kind'], epoch: m[2]!, sinceSec: Number(m[3]) } : undefined;
}

export const newEpoch = (): string => randomBytes(16).toString('hex');

/** What a gateway does with the marker it read: take it as it is, create one (SET NX), or replace the one read (compare-and-set). */
type MarkerStep =
  | { readonly kind: 'adopt'; readonly marker: StateMarker }
  | { readonly kind: 'create'; readonly marker: StateMarker }
  | { readonly kind: 'replace'; readonly found: string; readonly marker: StateMarker };

/**
 * Pure: the step after reading `found` (null: no marker) when the gateway last knew `known`
 * (undefined: it has read none since it started).
 * - No marker: a gateway that knew one finds the store lost its state; one that knew none cannot
 *   tell a new store from an emptied one and takes it as new (another replica that knew the old
 *   marker turns it into a loss, below).
 * - A marker that is not one: lost (fail closed).
 * - The marker it knew, or the first it sees: taken as it is, whatever its kind.
 * - Another epoch of kind `new`: a replica that knew nothing created it on an emptied store, so
 *   the store lost its state. Other kinds (a loss another replica wrote, an operator's
 *   confirmation) are taken as they are.
 */
export function markerStep(known: StateMarker | undefined, found: string | null, nowSec: number, epoch: string): MarkerStep {
  const lost: StateMarker = { kind: 'lost', epoch, sinceSec: nowSec };
  if (found === null) return { kind: 'create', marker: known === undefined ? { kind: 'new', epoch, sinceSec: nowSec } : lost };
  const marker = parseMarker(found);
  if (marker === undefined) return { kind: 'replace', found, marker: lost };
  if (known === undefined || marker.epoch === known.epoch || marker.kind !== 'new') return { kind: 'adopt', marker };
  return { kind: 'replace', found, marker: lost };
}

/** Pure: until when (unix seconds) the store is not trusted under `marker`; 0 when it is. */
export function distrustedUntil(marker: StateMarker | undefined, maxTokenLifetimeSec: number): number {
  return marker?.kind === 'lost' ? marker.sinceSec + maxTokenLifetimeSec + CLOCK_SKEW_SEC : 0;
}

export type StateChange =
  | { readonly state: 'lost'; readonly lostAtSec: number; readonly untilSec: number }
  | { readonly state: 'trusted'; readonly reason: 'confirmed' | 'expired' };

/**
 * Pure: what to tell when the gateway takes `marker`, given the epoch of the loss it last told
 * (undefined: none, or it was told trusted again since): a loss once per lost marker, and the
 * end of one once, by confirmation or because every token issued before it has expired.
 */
export function stateChange(toldLost: string | undefined, marker: StateMarker, nowSec: number, maxTokenLifetimeSec: number): { change: StateChange | undefined; toldLost: string | undefined } {
  const until = distrustedUntil(marker, maxTokenLifetimeSec);
  if (nowSec < until) {
    return toldLost === marker.epoch ? { change: undefined, toldLost } : { change: { state: 'lost', lostAtSec: marker.sinceSec, untilSec: until }, toldLost: marker.epoch };
  }
  if (toldLost === undefined) return { change: undefined, toldLost };
  return { change: { state: 'trusted', reason: marker.kind === 'lost' ? 'expired' : 'confirmed' }, toldLost: undefined };
}

/** Pure: the value of a `CONFIG GET name` reply ([name, value]); undefined when the reply is anything else. */
export function configValue(reply: RespValue, name: string): string | undefined {
  return Array.isArray(reply) && reply.length === 2 && reply[0] === name && typeof reply[1] === 'string' ? reply[1] : undefined;
}

/**
 * Pure: what is wrong, for keeping the state, with the store's settings as CONFIG GET gave them
 * (undefined: it would not say). Without AOF a restart loses every write since the last snapshot;
 * with any eviction policy but noeviction, a full Redis drops revocations and spend to make room.
 */
export function settingsWarnings(appendonly: string | undefined, maxmemoryPolicy: string | undefined): string[] {
  if (appendonly === undefined || maxmemoryPolicy === undefined) {
    return ['the limits store did not answer CONFIG GET (a managed Redis may refuse it): whether it persists its state (appendonly yes) and never evicts keys (maxmemory-policy noeviction) could not be checked; a store that loses its state is detected, and refuses calls under --limits-store-failure closed'];
  }
  const warnings: string[] = [];
  if (appendonly !== 'yes') warnings.push(`the limits store does not persist every write (appendonly ${appendonly}): restarted, it forgets revocations and spend since its last snapshot; set appendonly yes`);
  if (maxmemoryPolicy !== 'noeviction') warnings.push(`the limits store may evict keys when full (maxmemory-policy ${maxmemoryPolicy}): revocations and spend can be dropped to make room; set maxmemory-policy noeviction`);
  return warnings;
}

/** Pure: the marker a confirmation replaces, in words (confirm-store-reset prints it). */
export function describeMarker(found: string | null): string {
  if (found === null) return 'it had no state marker';
  const m = parseMarker(found);
  if (m === undefined) return 'its state marker was not one a gateway writes';
  const at = new Date(m.sinceSec * 1000).toISOString();
  return m.kind === 'lost' ? `it was marked as having lost its state at ${at}` : m.kind === 'confirmed' ? `it was last confirmed at ${at}` : `its marker was written at ${at}, with no loss found`;
}

/** Replaces the marker only if it is still the one read, and answers the marker now in the store. */
const REPLACE = `
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return ARGV[2] end
return v`;

type Command = (args: readonly (string | number)[]) => Promise<RespValue>;

export interface StoreStateOptions {
  readonly maxTokenLifetimeSec: number;
  /** Told when the store is found to have lost its state, and when it is trusted again. */
  readonly onChange: (change: StateChange) => void;
  /** Told once, at the first connection, what is wrong with the store's settings. */
  readonly onWarning: (message: string) => void;
  readonly nowMs?: () => number;
}

/** The marker of one store, as this gateway knows it: checked on every connection and every few seconds. */
export class StoreStateWatch {
  readonly #opts: StoreStateOptions;
  #marker: StateMarker | undefined;
  #toldLost: string | undefined;
  #settingsChecked = false;
  #checkedAtMs = 0;

  constructor(opts: StoreStateOptions) {
    this.#opts = opts;
  }

  #nowMs(): number {
    return (this.#opts.nowMs ?? Date.now)();
  }

  #nowSec(): number {
    return Math.floor(this.#nowMs() / 1000);
  }

  /** Whether the store is not to be trusted now: it lost its state, and neither a confirmation nor the tokens' expiry has ended that. */
  get lost(): boolean {
    return this.#nowSec() < distrustedUntil(this.#marker, this.#opts.maxTokenLifetimeSec);
  }

  /** On every connection, before it carries anything else (RespOptions.handshake). */
  async onConnect(command: Command): Promise<void> {
    if (!this.#settingsChecked) {
      const [appendonly, policy] = await Promise.all([command(['CONFIG', 'GET', 'appendonly']), command(['CONFIG', 'GET', 'maxmemory-policy'])]);
      this.#settingsChecked = true;
      for (const warning of settingsWarnings(configValue(appendonly, 'appendonly'), configValue(policy, 'maxmemory-policy'))) this.#opts.onWarning(warning);
    }
    await this.check(command);
  }

  /** Reads the marker, writes one when the step says so, and takes what the store then holds. */
  async check(command: Command): Promise<void> {
    this.#checkedAtMs = this.#nowMs();
    // Each write is conditional: another replica that wrote first is read again (a few times at most).
    for (let attempt = 0; attempt < 4; attempt++) {
      const found = await command(['GET', STATE_KEY]);
      if (found instanceof RespError) throw found;
      if (found !== null && typeof found !== 'string') throw new Error(`the store answered GET ${STATE_KEY} with something else`);
      const step = markerStep(this.#marker, found, this.#nowSec(), newEpoch());
      if (step.kind === 'adopt') return this.#take(step.marker);
      const text = formatMarker(step.marker);
      const reply = step.kind === 'create' ? await command(['SET', STATE_KEY, text, 'NX']) : await command(['EVAL', REPLACE, 1, STATE_KEY, step.found, text]);
      if (reply instanceof RespError) throw reply;
      if (reply === (step.kind === 'create' ? 'OK' : text)) return this.#take(step.marker);
    }
    throw new Error(`the store's state marker (${STATE_KEY}) changed under every attempt to write it`);
  }

  /**
   * Reads the marker through `client` while it is up: every 10 s, and every second while the store
   * is not trusted, until the returned stop is called.
   */
  watch(client: { readonly up: boolean; command: Command }): () => void {
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    const tick = () => {
      const due = client.up && (this.lost || this.#nowMs() - this.#checkedAtMs >= CHECK_TRUSTED_MS);
      const checked = due ? this.check((args) => client.command(args)) : Promise.resolve();
      // A failure here is the connection's: it is dropped, and the next one checks before carrying calls.
      void checked.catch(() => {}).finally(() => {
        if (!stopped) timer = setTimeout(tick, CHECK_LOST_MS).unref();
      });
    };
    timer = setTimeout(tick, CHECK_LOST_MS).unref();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }

  #take(marker: StateMarker): void {
    const { change, toldLost } = stateChange(this.#toldLost, marker, this.#nowSec(), this.#opts.maxTokenLifetimeSec);
    this.#marker = marker;
    this.#toldLost = toldLost;
    if (change) this.#opts.onChange(change);
  }
}
