// The strict parser's slow path, for the rare document with an escaped or non-ASCII key: every
// key decoded (escapes resolved) by the tokenizer, folded with foldKey, and compared as strings.
// It runs only on text JSON.parse has accepted.
import { foldKey, MAP_KEYS, type KeyProblem, type PolicyKeys } from './keys.ts';
import { decodeKey, JsonTokenizer } from './tokenizer.ts';

/** The general case: keys decoded (escapes resolved), folded and compared as strings. */
export function decodedKeyProblem(bytes: Buffer, policy: PolicyKeys | undefined): KeyProblem | undefined {
  /** Per open container: its keys (fold → as written), undefined for an array; and whether it is a map. */
  const frames: { keys: Map<string, string> | undefined; map: boolean }[] = [];
  let pendingKey: string | undefined;
  let problem: KeyProblem | undefined;
  const tokenizer = new JsonTokenizer(
    {
      open: (opensObject) => {
        frames.push({ keys: opensObject ? new Map() : undefined, map: opensObject && pendingKey !== undefined && MAP_KEYS.has(pendingKey) });
        pendingKey = undefined;
      },
      close: () => void frames.pop(),
      key: (raw) => {
        const written = decodeKey(raw);
        pendingKey = written;
        if (problem !== undefined) return;
        const frame = frames[frames.length - 1]!;
        const folded = frame.map ? written : foldKey(written);
        const policyKey = frame.map ? undefined : policy?.byFold.get(folded);
        if (policyKey !== undefined && policyKey !== written) {
          problem = { ok: false, reason: 'policy_key_variant', key: written, policyKey };
          return;
        }
        const other = frame.keys!.get(folded);
        if (other === undefined) frame.keys!.set(folded, written);
        else problem = other === written ? { ok: false, reason: 'duplicate_key', key: written } : { ok: false, reason: 'case_variant_key', key: written, other };
      },
      scalarStart: () => void (pendingKey = undefined),
      scalarEnd: () => {},
    },
    bytes.length,
  );
  tokenizer.push(bytes);
  return problem;
}
