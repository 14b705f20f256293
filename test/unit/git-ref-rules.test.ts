// Ref rules (src/git/ref-rules.ts): the pattern grammar, git's ref name rules, and the decision on
// each command of a push under the host's protected refs and the layers of rules.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decideGitAccess, type AccessDecision } from '../../src/git/access.ts';
import { parseRefPattern, parseRefRules, refNameProblem, refPatternCovers, refText, refusalOf, type PushPolicy, type RefCommand, type RefLayer, type RefPattern, type RefRules } from '../../src/git/ref-rules.ts';
import { parseRepoRule, parseScopeEntry, type RepoRule } from '../../src/git/scope.ts';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const ZERO = '0'.repeat(40);
const update = (ref: string): RefCommand => ({ old: A, new: B, ref });
const deletion = (ref: string): RefCommand => ({ old: A, new: ZERO, ref });
const pattern = (text: string): RefPattern => (parseRefPattern(text) as { value: RefPattern }).value;
const rules = (...parts: string[]): RefRules => (parseRefRules(parts) as { value: RefRules }).value;
const layer = (source: string, ...each: RefRules[]): RefLayer => ({ source, entries: each.map((_, i) => `entry ${i}`), rules: each });
const policy = (over: Partial<PushPolicy>): PushPolicy => ({ host: 'github.com', protectedRefs: [], layers: [], ...over });

test('ref patterns: a full ref name, or whole components then /*; anything git would not take as a ref name is refused with the reason', () => {
  for (const ok of ['refs/heads/main', 'refs/heads/agent/run-42/*', 'refs/tags/*', 'refs/*', 'refs/heads/feature/é', 'refs/for/main']) assert.equal(parseRefPattern(ok).ok, true, ok);
  const bad: [string, RegExp][] = [
    ['main', /not under refs\//],
    ['refs/main', /single component/],
    ['refs/heads/agent-*', /control character, space or one of/],
    ['refs/heads/*/x', /control character, space or one of/],
    ['*', /not under refs\//],
    ['refs/heads/a..b', /"\.\."/],
    ['refs/heads/.hidden', /starting with "\."/],
    ['refs/heads/x.lock', /ending in "\.lock"/],
    ['refs/heads/x@{1}', /"@\{"/],
    ['refs/heads/a b', /space/],
    ['refs/heads/a:b', /~ \^ : \?/],
    ['refs/heads//x', /empty component/],
    ['refs/heads/x/', /empty component/],
    ['refs/heads/x.', /ends with "\."/],
    [`refs/heads/${'x'.repeat(1100)}`, /at most 1024/],
  ];
  for (const [text, reason] of bad) {
    const r = parseRefPattern(text);
    assert.equal(r.ok, false, text);
    assert.match(r.ok ? '' : r.reason, reason, text);
  }
});

test("ref names: a pushed name git's receive-pack would refuse as a funny refname is named as such", () => {
  for (const ok of ['refs/heads/main', 'refs/heads/a/b/c', 'refs/tags/v1.0', 'refs/heads/é', 'refs/heads/x-y_z+1']) assert.equal(refNameProblem(ok), undefined, ok);
  for (const bad of ['HEAD', '', 'refs/x', 'refs/heads/', 'refs/heads//x', 'refs/heads/a..b', 'refs/heads/a b', 'refs/heads/x\n', 'refs/heads/\x01', 'refs/heads/x.lock', 'refs/heads/.x', 'refs/heads/a@{b', 'refs/heads/x.', 'refs/heads/a*', 'refs/heads/a\\b', 'refs/heads/a\x7f']) {
    assert.notEqual(refNameProblem(bad), undefined, JSON.stringify(bad));
  }
});

test('ref patterns match whole components: an exact name only itself, a /* one or more components below its prefix', () => {
  const cases: [string, string, boolean][] = [
    ['refs/heads/main', 'refs/heads/main', true],
    ['refs/heads/main', 'refs/heads/main2', false],
    ['refs/heads/main', 'refs/heads/Main', false],
    ['refs/heads/agent/run-42/*', 'refs/heads/agent/run-42/x', true],
    ['refs/heads/agent/run-42/*', 'refs/heads/agent/run-42/x/y', true],
    ['refs/heads/agent/run-42/*', 'refs/heads/agent/run-42', false],
    ['refs/heads/agent/run-42/*', 'refs/heads/agent/run-421/x', false],
    ['refs/*', 'refs/tags/v1', true],
  ];
  for (const [p, ref, expected] of cases) assert.equal(refPatternCovers(pattern(p), ref), expected, `${p} ${ref}`);
});

test('ref rules, protected refs: a ref in the host\'s protectedRefs is refused whatever the scope allows, tags included by refs/*', () => {
  const p = policy({ protectedRefs: [pattern('refs/heads/main'), pattern('refs/tags/release/*')] });
  assert.match(refusalOf(p, update('refs/heads/main'))!, /refs\/heads\/main is protected on github\.com \(the hosts file's protectedRefs: refs\/heads\/main\)/);
  assert.match(refusalOf(p, update('refs/tags/release/v1'))!, /protected/);
  assert.equal(refusalOf(p, update('refs/heads/agent/x')), undefined);
  assert.match(refusalOf(policy({ protectedRefs: [pattern('refs/*')] }), update('refs/tags/v1'))!, /protected/, 'a protecting refs/* covers tags');
});

test('ref rules, layers: a ref must be allowed by every layer with rules; the refusal names the layer and its entries', () => {
  const p = policy({ layers: [layer("the hosts file's repos for github.com", rules('refs/heads/*')), layer("this workload's scope", rules('refs/heads/agent/run-42/*'))] });
  assert.equal(refusalOf(p, update('refs/heads/agent/run-42/fix')), undefined);
  assert.match(refusalOf(p, update('refs/heads/other'))!, /refs\/heads\/other is outside this workload's scope \(entry 0\)/);
  assert.match(refusalOf(p, update('refs/notes/x'))!, /outside the hosts file's repos for github\.com/);
  // Within a layer, any entry may allow the ref.
  const two = policy({ layers: [layer("this workload's scope", rules('refs/heads/a/*'), rules('refs/heads/b/*'))] });
  assert.equal(refusalOf(two, update('refs/heads/b/x')), undefined);
});

test('ref rules, deletions: a deletion is refused unless a rule that covers the ref says delete', () => {
  const p = policy({ layers: [layer("this workload's scope", rules('refs/heads/agent/*'), rules('refs/heads/tmp/*', 'delete'))] });
  assert.match(refusalOf(p, deletion('refs/heads/agent/x'))!, /deleting refs\/heads\/agent\/x needs :delete in this workload's scope/);
  assert.equal(refusalOf(p, update('refs/heads/agent/x')), undefined);
  assert.equal(refusalOf(p, deletion('refs/heads/tmp/x')), undefined);
});

test('ref rules, tags: a tag is refused unless a rule under refs/tags/ names it; refs/* is every ref but tags', () => {
  const broad = policy({ layers: [layer("this workload's scope", rules('refs/*'))] });
  assert.equal(refusalOf(broad, update('refs/heads/anything')), undefined);
  assert.match(refusalOf(broad, update('refs/tags/v1'))!, /a tag: only a pattern under refs\/tags\/ names tags/);
  const tags = policy({ layers: [layer("this workload's scope", rules('refs/tags/run-42/*', 'refs/tags/v2'))] });
  assert.equal(refusalOf(tags, update('refs/tags/run-42/v1')), undefined);
  assert.equal(refusalOf(tags, update('refs/tags/v2')), undefined);
  assert.match(refusalOf(tags, update('refs/tags/v3'))!, /outside/);
});

test('ref rules, names: a name git would refuse is refused before any rule, shown with its odd bytes escaped', () => {
  const p = policy({ layers: [layer("this workload's scope", rules('refs/heads/agent/*'))] });
  assert.match(refusalOf(p, update('refs/heads/agent/../main'))!, /"refs\/heads\/agent\/\.\.\/main" is not a ref name git accepts/);
  assert.match(refusalOf(p, update('refs/heads/agent/x\n'))!, /"refs\/heads\/agent\/x%0A" is not a ref name/);
  assert.equal(refText('refs/heads/\xc3\xa9'), 'refs/heads/é', 'UTF-8 bytes read as UTF-8');
  assert.equal(refText('refs/heads/\xff%'), 'refs/heads/%FF%25');
});

test('scope entries with ref rules: host/path:write then ref patterns and delete, kept in canonical form; read scopes and bad patterns refused', () => {
  const e = parseScopeEntry('GitHub.com/acme/widgets.git:write:refs/heads/agent/run-42/*:refs/tags/run-42/*:delete');
  assert.equal(e.ok, true);
  const value = e.ok ? e.value : undefined;
  assert.deepEqual(value?.refs?.patterns.map((p) => p.text), ['refs/heads/agent/run-42/*', 'refs/tags/run-42/*']);
  assert.equal(value?.refs?.delete, true);
  const bad: [string, RegExp][] = [
    ['github.com/acme/widgets:read:refs/heads/x', /follow :write/],
    ['github.com/acme/widgets:write:main', /not under refs\//],
    ['github.com/acme/widgets:write:delete', /"delete" needs the ref patterns/],
    ['github.com/acme/widgets:write:refs/heads/a*', /not a ref name or a ref prefix/],
    ['github.com/acme/widgets:refs/heads/x:write', /must end in :read or :write/],
  ];
  for (const [text, reason] of bad) {
    const r = parseScopeEntry(text);
    assert.equal(r.ok, false, text);
    assert.match(r.ok ? '' : r.reason, reason, text);
  }
  const rule = parseRepoRule('acme/widgets:refs/heads/bots/*');
  assert.deepEqual(rule.ok && rule.value.refs?.patterns.map((p) => p.text), ['refs/heads/bots/*']);
});

/** decideGitAccess for a push without a token (network-policy mode), the hosts file's settings given. */
function push(repo: string, repos?: string[], protectedRefs: string[] = []): AccessDecision {
  const parsed = repos?.map((r) => (parseRepoRule(r) as { value: RepoRule }).value);
  return decideGitAccess({ hostKey: 'github.com', repo: repo.split('/'), access: 'write' }, { repos: parsed, readOnly: false, protectedRefs: protectedRefs.map(pattern), workload: undefined });
}

test('ref rules, access: a push gets the host\'s protected refs and the hosts file\'s repos rules as its policy; none when neither has any', () => {
  assert.deepEqual(push('acme/widgets'), { ok: true, identity: undefined });
  const d = push('acme/gadgets', ['acme/widgets', 'acme/gadgets:refs/heads/bots/*'], ['refs/heads/main']);
  assert.equal(d.ok, true);
  const p = d.ok ? d.push : undefined;
  assert.deepEqual(p?.protectedRefs.map((x) => x.text), ['refs/heads/main']);
  assert.deepEqual(p?.layers.map((l) => [l.source, l.entries]), [["the hosts file's repos for github.com", ['acme/gadgets:refs/heads/bots/*']]]);
  // A matching entry without ref rules opens every ref of that layer.
  const open = push('acme/gadgets', ['acme/*', 'acme/gadgets:refs/heads/bots/*']);
  assert.deepEqual(open, { ok: true, identity: undefined });
  // A read never carries a push policy.
  const read = decideGitAccess({ hostKey: 'github.com', repo: ['acme', 'gadgets'], access: 'read' }, { repos: undefined, readOnly: false, protectedRefs: [pattern('refs/heads/main')], workload: undefined });
  assert.deepEqual(read, { ok: true, identity: undefined });
});
