// Which refs a push may change: ref patterns, the ref rules of a scope entry, and the decision on
// a push's commands (push-commands.ts reads them). Pure.
//
// A ref pattern is a full ref name (`refs/heads/main`) or a prefix of whole components ended by
// `*`, which stands for one or more components below it (`refs/heads/agent/run-42/*`). Names are
// compared byte for byte, as git stores them. A rule's pattern lets a push change a tag only when
// it is under `refs/tags/` (`refs/*` allows every ref but tags), while a protecting pattern covers
// whatever it names (`refs/*` protects tags too). An entry's rules are its patterns and whether
// they may be deleted (`delete`); a deletion (new id all zeros) is refused otherwise. A name git
// itself refuses (receive-pack's "funny refname") is refused before any rule.
//
// What a push may change is decided by layers, each of which must allow every command: the
// host's `protectedRefs` (no workload may change those), the hosts file's `repos` entries with
// ref rules, the workload's scope entries with ref rules. A layer whose matching entries include
// one without ref rules allows every ref, as before ref rules existed. One command outside the
// rules refuses the whole push.

export interface RefPattern {
  /** As written, for the messages and the canonical form. */
  readonly text: string;
  /** The fixed part (the whole name without `*`; with `*`, up to and including its `/`), as bytes in a latin1 string. */
  readonly fixed: string;
  readonly wildcard: boolean;
}

export interface RefRules {
  readonly patterns: readonly RefPattern[];
  /** The patterns' refs may also be deleted. */
  readonly delete: boolean;
}

/** One layer of rules for a push: where they come from (for the messages) and the rules of its matching entries. */
export interface RefLayer {
  /** `the workload's scope`, `the hosts file's repos`. */
  readonly source: string;
  /** The matching entries as written (`github.com/acme/widgets:write:refs/heads/agent/*`). */
  readonly entries: readonly string[];
  readonly rules: readonly RefRules[];
}

/** Everything that decides a push to one repository; `layers` holds only layers with ref rules. */
export interface PushPolicy {
  readonly host: string;
  readonly protectedRefs: readonly RefPattern[];
  readonly layers: readonly RefLayer[];
  /** The workload's scope entry that lets it change every ref (it has no ref rules), if that is how it may push. */
  readonly everyRef?: string;
}

/** A ref update as the push asks for it: ids in lower-case hex, the name as bytes in a latin1 string. */
export interface RefCommand {
  readonly old: string;
  readonly new: string;
  readonly ref: string;
}

type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly reason: string };

const MAX_PATTERN_LENGTH = 1024;
const DELETE_WORD = 'delete';
const TAGS = 'refs/tags/';

// git's refname_disposition (refs.c): 4 is a byte no ref name may hold (controls, space, DEL and
// " ~ ^ : ? [ \"); '*' too unless in a pattern's last place. Bytes from 0x80 up are allowed.
function forbiddenRefByte(c: number): boolean {
  return c < 0x20 || c === 0x7f || c === 0x20 || c === 0x7e || c === 0x5e || c === 0x3a || c === 0x3f || c === 0x5b || c === 0x5c || c === 0x2a;
}

/** Why one component of a ref name is not one git accepts (check_refname_component), or undefined. */
function componentProblem(component: string): string | undefined {
  if (component === '') return 'an empty component';
  if (component.startsWith('.')) return 'a component starting with "."';
  if (component.endsWith('.lock')) return 'a component ending in ".lock"';
  if (component.includes('..')) return '".."';
  if (component.includes('@{')) return '"@{"';
  for (let i = 0; i < component.length; i++) if (forbiddenRefByte(component.charCodeAt(i))) return 'a control character, space or one of ~ ^ : ? * [ \\';
  return undefined;
}

/**
 * Why a pushed ref name is one git's receive-pack would refuse as a "funny refname" (it must be
 * `refs/` and at least two valid components), or undefined. The name is bytes in a latin1 string.
 */
export function refNameProblem(ref: string): string | undefined {
  if (!ref.startsWith('refs/')) return 'it is not under refs/';
  const components = ref.slice(5).split('/');
  if (components.length < 2) return 'it has a single component under refs/';
  for (const c of components) {
    const problem = componentProblem(c);
    if (problem) return `it holds ${problem}`;
  }
  return ref.endsWith('.') ? 'it ends with "."' : undefined;
}

/** `refs/heads/main`, `refs/heads/agent/run-42/*`, `refs/tags/v1.*` is not one (a `*` is a whole last component). */
export function parseRefPattern(text: string): Parsed<RefPattern> {
  if (text.length > MAX_PATTERN_LENGTH) return { ok: false, reason: `a ref pattern is at most ${MAX_PATTERN_LENGTH} characters` };
  const wildcard = text.endsWith('/*');
  const fixed = Buffer.from(wildcard ? text.slice(0, -1) : text, 'utf8').toString('latin1');
  const problem = wildcard ? refNameProblem(`${fixed}x`) : refNameProblem(fixed);
  if (problem && !(wildcard && fixed === 'refs/')) return { ok: false, reason: `"${text}" is not a ref name or a ref prefix ending in /* (${problem})` };
  return { ok: true, value: { text, fixed, wildcard } };
}

/**
 * The ref rules after `host/path:write`: one or more patterns, and `delete` to allow deleting
 * them. Empty: no rules (every ref).
 */
export function parseRefRules(parts: readonly string[]): Parsed<RefRules | undefined> {
  if (parts.length === 0) return { ok: true, value: undefined };
  const patterns: RefPattern[] = [];
  let allowDelete = false;
  for (const part of parts) {
    if (part === DELETE_WORD) {
      allowDelete = true;
      continue;
    }
    const pattern = parseRefPattern(part);
    if (!pattern.ok) return pattern;
    patterns.push(pattern.value);
  }
  if (patterns.length === 0) return { ok: false, reason: '"delete" needs the ref patterns it applies to (:refs/heads/agent/*:delete)' };
  return { ok: true, value: { patterns, delete: allowDelete } };
}

/** `:refs/heads/a/*:refs/tags/a/*:delete`, or '' for none: what follows `:write` in canonical form. */
export function formatRefRules(rules: RefRules | undefined): string {
  if (rules === undefined) return '';
  return rules.patterns.map((p) => `:${p.text}`).join('') + (rules.delete ? `:${DELETE_WORD}` : '');
}

/** Whether a pattern covers a ref (bytes in a latin1 string): the whole name, or one or more components below a `*`. */
export function refPatternCovers(pattern: RefPattern, ref: string): boolean {
  return pattern.wildcard ? ref.length > pattern.fixed.length && ref.startsWith(pattern.fixed) : ref === pattern.fixed;
}

/** Whether a rule's pattern lets a push change a ref: it covers it, and a tag only from under refs/tags/. */
function refPatternGrants(pattern: RefPattern, ref: string): boolean {
  return refPatternCovers(pattern, ref) && (!ref.startsWith(TAGS) || pattern.fixed.startsWith(TAGS));
}

/**
 * A ref name as text for a message or the log: as UTF-8 when that is what its bytes are, else
 * with every byte outside printable ASCII (and `%`) percent-escaped, so that the text says
 * exactly which bytes were pushed.
 */
export function refText(ref: string): string {
  const bytes = Buffer.from(ref, 'latin1');
  const utf8 = bytes.toString('utf8');
  const plain = Buffer.from(utf8, 'utf8').equals(bytes) && !bytes.some((b) => b < 0x20 || b === 0x7f || b === 0x25);
  if (plain) return utf8;
  return [...bytes].map((b) => (b > 0x20 && b < 0x7f && b !== 0x25 ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0').toUpperCase()}`)).join('');
}

const isDeletion = (command: RefCommand) => /^0+$/.test(command.new);

/** Why one layer refuses a command, or undefined when it allows it. */
function layerRefusal(layer: RefLayer, command: RefCommand, name: string): string | undefined {
  const matching = layer.rules.filter((r) => r.patterns.some((p) => refPatternGrants(p, command.ref)));
  const named = layer.entries.join(', ');
  if (matching.length === 0) {
    const tag = command.ref.startsWith(TAGS) ? ' (a tag: only a pattern under refs/tags/ names tags)' : '';
    return `${name} is outside ${layer.source} (${named})${tag}`;
  }
  if (isDeletion(command) && !matching.some((r) => r.delete)) return `deleting ${name} needs :delete in ${layer.source} (${named})`;
  return undefined;
}

/** Pure: why the policy refuses one command, or undefined: protected refs first, then each layer in turn. */
export function refusalOf(policy: PushPolicy, command: RefCommand): string | undefined {
  const name = refText(command.ref);
  const problem = refNameProblem(command.ref);
  if (problem) return `"${name}" is not a ref name git accepts: ${problem}`;
  const guarded = policy.protectedRefs.find((p) => refPatternCovers(p, command.ref));
  if (guarded) return `${name} is protected on ${policy.host} (the hosts file's protectedRefs: ${guarded.text})`;
  for (const layer of policy.layers) {
    const refusal = layerRefusal(layer, command, name);
    if (refusal) return refusal;
  }
  return undefined;
}

/** Whether the policy has any rule at all: without one, a push is forwarded as it always was. */
export function hasRefRules(policy: PushPolicy): boolean {
  return policy.protectedRefs.length > 0 || policy.layers.length > 0;
}
