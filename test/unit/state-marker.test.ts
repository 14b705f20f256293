// The shared store's state marker (cp:state): how a gateway tells a store that lost its state
// (restarted empty, flushed, evicting) from one it knows, how replicas come to agree on it, when a
// lost store is trusted again, and what the store's settings must be. Pure decisions first, then
// StoreStateWatch over an in-memory store that answers GET, SET NX and the compare-and-set script.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RespError, type RespValue } from '../../src/store/resp.ts';
import { configValue, distrustedUntil, formatMarker, markerStep, parseMarker, settingsWarnings, stateChange, STATE_KEY, StoreStateWatch, type StateChange, type StateMarker } from '../../src/store/state-marker.ts';

const E1 = '1'.repeat(32);
const E2 = '2'.repeat(32);
const E3 = '3'.repeat(32);
const NOW = 1_800_000_000;
const DAY = 86_400;
const marker = (kind: StateMarker['kind'], epoch: string, sinceSec = NOW - 100): StateMarker => ({ kind, epoch, sinceSec });

test('state marker: a gateway that knew a marker and finds none has found a lost store; one that knew none takes the store as new (markerStep)', () => {
  assert.deepEqual(markerStep(undefined, null, NOW, E3), { kind: 'create', marker: marker('new', E3, NOW) });
  for (const kind of ['new', 'lost', 'confirmed'] as const) {
    assert.deepEqual(markerStep(marker(kind, E1), null, NOW, E3), { kind: 'create', marker: marker('lost', E3, NOW) }, `knew a ${kind} marker`);
  }
});

test('state marker: another epoch of kind new (written by a replica that knew nothing, on an emptied store) is turned into a loss; a loss or a confirmation another wrote is taken as it is (markerStep)', () => {
  const known = marker('new', E1);
  const fresh = formatMarker(marker('new', E2));
  assert.deepEqual(markerStep(known, fresh, NOW, E3), { kind: 'replace', found: fresh, marker: marker('lost', E3, NOW) });
  assert.deepEqual(markerStep(known, formatMarker(marker('lost', E2)), NOW, E3), { kind: 'adopt', marker: marker('lost', E2) });
  assert.deepEqual(markerStep(marker('lost', E1), formatMarker(marker('confirmed', E2)), NOW, E3), { kind: 'adopt', marker: marker('confirmed', E2) });
  // The marker it knew, whatever its kind, and the first one it reads are taken as they are.
  assert.deepEqual(markerStep(known, formatMarker(known), NOW, E3), { kind: 'adopt', marker: known });
  assert.deepEqual(markerStep(undefined, fresh, NOW, E3), { kind: 'adopt', marker: marker('new', E2) });
  assert.deepEqual(markerStep(undefined, formatMarker(marker('lost', E2)), NOW, E3), { kind: 'adopt', marker: marker('lost', E2) }, 'a replica started after the loss sees it too');
});

test('state marker: a value in cp:state that is not a marker a gateway writes counts as a loss, known marker or not (markerStep, parseMarker)', () => {
  for (const text of ['', 'garbage', `new ${E1}`, `lost ${'A'.repeat(32)} 5`, `new ${E1} 5 extra`, `kind ${E1} 5`, `new ${E1} 1234567890123`]) {
    assert.equal(parseMarker(text), undefined, text);
    for (const known of [undefined, marker('new', E1)]) assert.deepEqual(markerStep(known, text, NOW, E3), { kind: 'replace', found: text, marker: marker('lost', E3, NOW) });
  }
  assert.deepEqual(parseMarker(formatMarker(marker('confirmed', E2, 7))), marker('confirmed', E2, 7));
});

test('state marker: a lost store is distrusted until every token issued before the loss has expired (the longest token lifetime and a minute); new and confirmed stores are trusted (distrustedUntil)', () => {
  assert.equal(distrustedUntil(marker('lost', E1, NOW), DAY), NOW + DAY + 60);
  assert.equal(distrustedUntil(marker('new', E1, NOW), DAY), 0);
  assert.equal(distrustedUntil(marker('confirmed', E1, NOW), DAY), 0);
  assert.equal(distrustedUntil(undefined, DAY), 0, 'no marker read yet: nothing to distrust (no command goes before the first is read)');
});

test('state marker: a loss is told once per lost marker, and its end once: confirmed by an operator, or every token issued before it expired (stateChange)', () => {
  const lost = marker('lost', E1, NOW);
  const first = stateChange(undefined, lost, NOW, DAY);
  assert.deepEqual(first, { change: { state: 'lost', lostAtSec: NOW, untilSec: NOW + DAY + 60 }, toldLost: E1 });
  assert.deepEqual(stateChange(E1, lost, NOW + 10, DAY), { change: undefined, toldLost: E1 }, 'read again: not told again');
  assert.deepEqual(stateChange(E1, marker('lost', E2, NOW + 20), NOW + 20, DAY).change, { state: 'lost', lostAtSec: NOW + 20, untilSec: NOW + 20 + DAY + 60 }, 'a second loss is told');
  assert.deepEqual(stateChange(E1, marker('confirmed', E2), NOW + 30, DAY), { change: { state: 'trusted', reason: 'confirmed' }, toldLost: undefined });
  assert.deepEqual(stateChange(E1, lost, NOW + DAY + 60, DAY), { change: { state: 'trusted', reason: 'expired' }, toldLost: undefined });
  assert.deepEqual(stateChange(undefined, lost, NOW + DAY + 60, DAY), { change: undefined, toldLost: undefined }, 'a loss long over is not news');
  assert.deepEqual(stateChange(undefined, marker('new', E2), NOW, DAY), { change: undefined, toldLost: undefined });
});

test('store settings: AOF off or an eviction policy is warned, naming the setting to change; a store that will not answer CONFIG GET is said to be unchecked (settingsWarnings, configValue)', () => {
  assert.deepEqual(settingsWarnings('yes', 'noeviction'), []);
  const [aof, evicting] = settingsWarnings('no', 'allkeys-lru');
  assert.match(aof!, /appendonly no\).*set appendonly yes/);
  assert.match(evicting!, /maxmemory-policy allkeys-lru\).*set maxmemory-policy noeviction/);
  const [unchecked, ...rest] = settingsWarnings(undefined, 'noeviction');
  assert.match(unchecked!, /did not answer CONFIG GET.*could not be checked/);
  assert.deepEqual(rest, []);
  assert.equal(configValue(['appendonly', 'yes'], 'appendonly'), 'yes');
  assert.equal(configValue(new RespError("ERR unknown command 'CONFIG'"), 'appendonly'), undefined);
  assert.equal(configValue([], 'appendonly'), undefined, 'a setting the server does not have');
  assert.equal(configValue(['maxmemory-policy', 'noeviction'], 'appendonly'), undefined);
});

/** An in-memory store that answers what StoreStateWatch sends: GET, SET (NX), EVAL of the compare-and-set, CONFIG GET. */
function memoryStore(config: Record<string, string> | 'refused' = { appendonly: 'yes', 'maxmemory-policy': 'noeviction' }) {
  const keys = new Map<string, string>();
  const command = async (args: readonly (string | number)[]): Promise<RespValue> => {
    const [name, ...rest] = args.map(String);
    switch (name) {
      case 'GET':
        return keys.get(rest[0]!) ?? null;
      case 'SET':
        if (rest[2] === 'NX' && keys.has(rest[0]!)) return null;
        keys.set(rest[0]!, rest[1]!);
        return 'OK';
      case 'EVAL': {
        const [, , key, expected, next] = rest;
        if (keys.get(key!) !== expected) return keys.get(key!) ?? null;
        keys.set(key!, next!);
        return next!;
      }
      case 'CONFIG':
        return config === 'refused' ? new RespError('NOPERM this user has no permissions to run the \'config|get\' command') : [rest[1]!, config[rest[1]!]!];
      default:
        throw new Error(`unexpected ${name}`);
    }
  };
  return { keys, command, restart: () => keys.clear() };
}

function gateway(nowMs: () => number) {
  const changes: StateChange[] = [];
  const warnings: string[] = [];
  const watch = new StoreStateWatch({ maxTokenLifetimeSec: DAY, nowMs, onChange: (c) => changes.push(c), onWarning: (w) => warnings.push(w) });
  return { watch, changes, warnings };
}

test('state marker: replicas sharing a store agree: a restart found by one, by a replica that knew nothing, and by one started after the loss; a confirmation ends it for all (StoreStateWatch)', async () => {
  let now = NOW * 1000;
  const clock = () => now;
  const store = memoryStore();
  const a = gateway(clock);
  const b = gateway(clock);
  await Promise.all([a.watch.onConnect(store.command), b.watch.onConnect(store.command)]);
  assert.equal(parseMarker(store.keys.get(STATE_KEY)!)?.kind, 'new', 'one marker, written by whichever came first');
  assert.deepEqual([a.watch.lost, b.watch.lost, a.changes, b.changes], [false, false, [], []]);

  // Redis restarts empty; b is replaced by a replica that knew nothing and connects first.
  store.restart();
  now += 5000;
  const fresh = gateway(clock);
  await fresh.watch.onConnect(store.command);
  assert.equal(fresh.watch.lost, false, 'it cannot tell a new store from an emptied one');
  await a.watch.onConnect(store.command);
  assert.equal(a.watch.lost, true, 'a knew the old marker: the new one is a loss');
  assert.deepEqual(a.changes, [{ state: 'lost', lostAtSec: NOW + 5, untilSec: NOW + 5 + DAY + 60 }]);
  assert.equal(parseMarker(store.keys.get(STATE_KEY)!)?.kind, 'lost', 'the loss is written into the store');
  await fresh.watch.check(store.command);
  assert.equal(fresh.watch.lost, true, 'and the replica that knew nothing reads it at its next check');
  const later = gateway(clock);
  await later.watch.onConnect(store.command);
  assert.equal(later.watch.lost, true, 'so does one started after the loss');

  // An operator confirms: every replica trusts the store from its next check.
  store.keys.set(STATE_KEY, formatMarker({ kind: 'confirmed', epoch: E3, sinceSec: NOW + 60 }));
  for (const g of [a, fresh, later]) {
    await g.watch.check(store.command);
    assert.equal(g.watch.lost, false);
    assert.deepEqual(g.changes.at(-1), { state: 'trusted', reason: 'confirmed' });
  }
});

test('state marker: without a confirmation, a lost store is trusted again once every token issued before the loss has expired, and that is told once (StoreStateWatch)', async () => {
  let now = NOW * 1000;
  const store = memoryStore();
  const g = gateway(() => now);
  await g.watch.onConnect(store.command);
  store.restart();
  await g.watch.onConnect(store.command);
  assert.equal(g.watch.lost, true);
  now += (DAY + 59) * 1000;
  assert.equal(g.watch.lost, true, 'a token issued just before the loss may still live');
  now += 1000;
  assert.equal(g.watch.lost, false, 'read on every call: trusted from this second on');
  await g.watch.check(store.command);
  await g.watch.check(store.command);
  assert.deepEqual(g.changes.map((c) => c.state), ['lost', 'trusted']);
  assert.deepEqual(g.changes[1], { state: 'trusted', reason: 'expired' });
});

test('store settings are read once, at the first connection: warned when AOF is off or keys may be evicted; a store that refuses CONFIG is said once to be unchecked (StoreStateWatch)', async () => {
  const loose = gateway(() => NOW * 1000);
  const store = memoryStore({ appendonly: 'no', 'maxmemory-policy': 'volatile-lru' });
  await loose.watch.onConnect(store.command);
  await loose.watch.onConnect(store.command);
  assert.equal(loose.warnings.length, 2, loose.warnings.join('\n'));
  const managed = gateway(() => NOW * 1000);
  const refusing = memoryStore('refused');
  await managed.watch.onConnect(refusing.command);
  await managed.watch.onConnect(refusing.command);
  assert.equal(managed.warnings.length, 1);
  assert.match(managed.warnings[0]!, /could not be checked/);
  assert.equal(managed.watch.lost, false, 'the marker works without CONFIG');
});

test('state marker: a store that answers GET cp:state with something else fails the check, so the connection is dropped and not used (StoreStateWatch)', async () => {
  const g = gateway(() => NOW * 1000);
  await assert.rejects(g.watch.check(async () => ['not', 'a', 'string']), /answered GET cp:state with something else/);
  await assert.rejects(g.watch.check(async () => new RespError('NOPERM')), /NOPERM/);
});
