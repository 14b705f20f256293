// The matcher that finds a secret spelled out in any mix of its characters' forms
// (src/http/spelled-secrets.ts), against the regular expression it replaced
// (test/support/spelled-reference.ts): the same places, in the same order, for random secrets
// made of the characters whose forms overlap (`\`, `%`, `&`, `;`, `#`, `0`, `x`, non-ASCII
// bytes) spelled in random forms and cases, then cut, bridged and salted with near misses.
// Deterministic: the seed is in the test name.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SpelledSecrets } from '../../src/http/spelled-secrets.ts';
import { fuzzSeed, mulberry32, type Rng } from '../support/prng.ts';
import { formsOf, spelledByExpression } from '../support/spelled-reference.ts';

const SEED = fuzzSeed(0x5be1_1ed0);
const SECRET_SETS = 30;
const TEXTS_PER_SET = 80;

const find = (secrets: readonly Uint8Array[], text: string): Array<readonly [number, number]> => {
  const found: Array<readonly [number, number]> = [];
  new SpelledSecrets(secrets).find(text, found);
  return found;
};

/** Bytes a secret is made of: letters and digits, and every byte whose forms begin like another's. */
const ALPHABET = [...'abcxyzABCXYZ0123456789-_./"\\%&;#+=:'].map((c) => c.charCodeAt(0)).concat([0xc3, 0xa9, 0xe9, 0xff, 0x00]);

const randomCase = (rng: Rng, text: string): string => [...text].map((c) => (rng.chance(0.3) ? (rng.chance(0.5) ? c.toUpperCase() : c.toLowerCase()) : c)).join('');

/** The secret spelled with a random form for each byte. */
const spelling = (rng: Rng, secret: Uint8Array): string => [...secret].map((b) => randomCase(rng, rng.chance(0.5) ? String.fromCharCode(b) : rng.pick(formsOf(b)))).join('');

/** Noise that looks like the start of a form, or is not one at all. */
const NOISE = ['', ' ', ';', '&', '&#', '&#x', '%', '%25', '%2', '\\', '\\u00', '\\u', '0', '00', 'x', ';;', '&amp;', 'é', 'Ã'];

function text(rng: Rng, secrets: readonly Uint8Array[]): string {
  let out = '';
  for (let parts = rng.between(1, 6); parts > 0; parts--) {
    out += rng.pick(NOISE);
    const spelled = spelling(rng, rng.pick(secrets));
    const r = rng.next();
    // Whole, cut short, with a byte's form dropped, or two spellings overlapping.
    if (r < 0.4) out += spelled;
    else if (r < 0.6) out += spelled.slice(0, rng.int(spelled.length));
    else if (r < 0.8) {
      const at = rng.int(spelled.length);
      out += spelled.slice(0, at) + rng.pick(NOISE) + spelled.slice(at + 1);
    } else out += spelled.slice(0, rng.int(spelled.length)) + spelling(rng, rng.pick(secrets));
  }
  return out + rng.pick(NOISE);
}

test(`spelled secrets: the matcher finds what the regular expression it replaced finds, in the same places, for ${SECRET_SETS} random secret sets (seed ${SEED})`, () => {
  const rng = mulberry32(SEED);
  const failures: string[] = [];
  let matched = 0;
  for (let set = 0; set < SECRET_SETS && failures.length < 5; set++) {
    const secrets = Array.from({ length: rng.between(1, 2) }, () => Uint8Array.from({ length: rng.between(1, 8) }, () => rng.pick(ALPHABET)));
    for (let i = 0; i < TEXTS_PER_SET; i++) {
      const t = text(rng, secrets);
      const expected = spelledByExpression(secrets, t);
      const actual = find(secrets, t);
      if (expected.length > 0) matched++;
      if (JSON.stringify(actual) !== JSON.stringify(expected)) {
        failures.push(`secrets ${JSON.stringify(secrets.map((s) => Buffer.from(s).toString('latin1')))} in ${JSON.stringify(t)}: matcher ${JSON.stringify(actual)}, expression ${JSON.stringify(expected)}`);
      }
    }
  }
  assert.deepEqual(failures, [], `seed ${SEED}: reproduce with FUZZ_SEED=${SEED}`);
  assert.ok(matched > SECRET_SETS * TEXTS_PER_SET * 0.3, `only ${matched} texts held a spelling: both outcomes must be fuzzed`);
});

test('spelled secrets: every form of every byte, in any case, spells it; the first whole spelling wins and the scan goes on after it', () => {
  for (const b of ALPHABET) {
    for (const form of formsOf(b)) {
      for (const cased of [form, form.toUpperCase(), form.toLowerCase()]) {
        assert.deepEqual(find([Uint8Array.of(b, 0x6b)], `x${cased}k`), spelledByExpression([Uint8Array.of(b, 0x6b)], `x${cased}k`), JSON.stringify(cased));
      }
    }
  }
  const key = Buffer.from('sk-a');
  assert.deepEqual(find([key], 'sk-a%73%6B-\\u0061 SK-Ask-a'), [[0, 4], [4, 17], [18, 22], [22, 26]]);
});

test('spelled secrets: a text built to make a backtracking matcher try every way to read it is refused within a bounded number of steps, not read for ever: 64 semicolons and a y, against 40 references to a semicolon and an x', () => {
  // Each `&#59;` is one `;` (read with its own `;`) or two (without it, then the `;` as itself):
  // C(40, 24), about 6e10, ways to read 64 of them, none followed by the y. The regular
  // expression the matcher replaced tried them all; the matcher keeps the (byte, place) pairs
  // that led nowhere and, past 16 steps a character of the text, refuses it (fail closed: the
  // answer holding it is not relayed).
  const secret = Buffer.from(`${';'.repeat(64)}y`);
  assert.throws(() => find([secret], `${'&#59;'.repeat(40)}x`), /^UnreadableText: the text reads as the credential too many ways to be checked \(over 16 steps a character\)$/);
  assert.deepEqual(find([secret], `${'&#59;'.repeat(24)}${';'.repeat(16)}&#x79`), [[0, 141]], 'a whole spelling is found');
  // The same reading with a secret without overlapping forms is linear: a near miss is passed.
  assert.deepEqual(find([Buffer.from(`${'a'.repeat(64)}y`)], `${'&#97;'.repeat(64)}x`), []);
});
