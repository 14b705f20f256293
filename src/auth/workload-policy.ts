// The workload policy (--workload-policy): what a Kubernetes service account may do through the
// proxy, when it proves who it is without a token the orchestrator minted (a projected
// service-account token; a client certificate's SPIFFE ID). A minted token carries its own git
// scope and limits; these identities carry only a name, so the grant comes from this file.
//
//   { "serviceAccounts": {
//       "agents/triage-bot": { "git": ["github.com/acme/widgets:write"], "models": true,
//                              "limits": { "budget_usd": 5, "max_concurrent": 2 }, "workflow": "triage" },
//       "agents/*":          { "models": true, "limits": { "budget_usd": 1 } } } }
//
// Keys are `namespace/serviceaccount`; either half may be `*` (any one name). Precedence does not
// depend on the file's order: the exact name, then `namespace/*`, then `*/serviceaccount`, then
// `*/*`. The namespace is the boundary Kubernetes grants by (who may create a pod or a service
// account there), so a namespace's own entry beats a name shared across namespaces. The entry
// found is the whole grant: entries are not merged. Pure: parsing and lookup.
import { entryReader, parseConfigJson, type FieldFailure } from '../config/config-file.ts';
import { suggestion } from '../config/suggest.ts';
import { isObject } from '../json/keys.ts';
import { IDENTITY_VALUE, type RunLimits } from './jwt.ts';

/** A Kubernetes namespace name: an RFC 1123 label. */
export const K8S_NAMESPACE = /^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$/;
/** A service account's (or a pod's) name: an RFC 1123 subdomain, at most 253 characters. */
export const K8S_OBJECT_NAME = /^(?=.{1,253}$)[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?$/;

/** Which listener asks: the git proxy needs a git scope, the model gateway `models: true`. */
export type PolicyListener = 'git' | 'model';

export interface WorkloadGrant {
  /** The key of the entry that matched (`agents/*`), for the log and the messages. */
  readonly entry: string;
  /** Git scope entries in canonical form (as a minted token's `git` claim); undefined: no git. */
  readonly git: readonly string[] | undefined;
  /** Whether the model gateway serves the account. */
  readonly models: boolean;
  /** What the entry lowers of the --limits file: a token's `limits` claim, as if minted with it. */
  readonly limits: RunLimits | undefined;
  /** The workflow the account's calls count under; undefined: `namespace/serviceaccount`. */
  readonly workflow: string | undefined;
}

export interface WorkloadPolicy {
  /** The file's name, for the messages. */
  readonly source: string;
  readonly entries: ReadonlyMap<string, WorkloadGrant>;
}

export type PolicyLookup = { readonly ok: true; readonly grant: WorkloadGrant } | { readonly ok: false; readonly reason: string };

const TOP_FIELDS = new Set(['serviceAccounts']);
const ENTRY_FIELDS = new Set(['git', 'models', 'limits', 'workflow']);
/** The `limits` fields, the token claim's: whether each is a whole number (the budget is dollars). */
const LIMIT_FIELDS: ReadonlyMap<string, boolean> = new Map([
  ['budget_usd', false],
  ['max_concurrent', true],
  ['requests_per_minute', true],
  ['tokens_per_minute', true],
]);
const MAX_GIT_ENTRIES = 64;

/** Pure: the policy file's entries; any mistake stops start-up naming the file, the entry and the field. */
/**
 * The git scope grammar (src/git/scope.ts) as the policy needs it: an entry's canonical form, or
 * why it is not one. Start-up passes it in: identity sits below the git proxy, which owns the grammar.
 */
export type CanonicalScope = (text: string) => { readonly ok: true; readonly value: string } | { readonly ok: false; readonly reason: string };

export function parseWorkloadPolicy(text: string, fileName: string, scopeGrammar: CanonicalScope): WorkloadPolicy {
  const { doc, fail } = parseConfigJson(text, fileName);
  if (!isObject(doc)) return fail('(file)', 'must be an object: {"serviceAccounts": {"namespace/serviceaccount": {...}}}');
  for (const k of Object.keys(doc)) if (!TOP_FIELDS.has(k)) fail(k, `unknown field${suggestion(k, TOP_FIELDS)}`);
  const accounts = doc.serviceAccounts;
  if (!isObject(accounts)) return fail('serviceAccounts', 'must be an object keyed by "namespace/serviceaccount"');
  const entries = new Map<string, WorkloadGrant>();
  for (const [key, raw] of Object.entries(accounts)) {
    const where = `serviceAccounts["${key}"]`;
    const keyProblem = policyKeyProblem(key);
    if (keyProblem) fail(where, keyProblem);
    entries.set(key, parseGrant(key, raw, where, fail, scopeGrammar));
  }
  return { source: fileName, entries };
}

/** Pure: why a key is not `namespace/serviceaccount` (each half a Kubernetes name or `*`). */
function policyKeyProblem(key: string): string | undefined {
  const parts = key.split('/');
  if (parts.length !== 2) return 'the key must be "namespace/serviceaccount" (either half may be "*")';
  const [ns, sa] = parts as [string, string];
  if (ns !== '*' && !K8S_NAMESPACE.test(ns)) return `"${ns}" is not a namespace name (lower-case letters, digits and '-', at most 63) nor "*"`;
  if (sa !== '*' && !K8S_OBJECT_NAME.test(sa)) return `"${sa}" is not a service account name (lower-case letters, digits, '-' and '.', at most 253) nor "*"`;
  return undefined;
}

function parseGrant(key: string, raw: unknown, where: string, fail: FieldFailure, scopeGrammar: CanonicalScope): WorkloadGrant {
  const r = entryReader(raw, where, ENTRY_FIELDS, fail);
  const git = r.entry.git === undefined ? undefined : parseGit(r.entry.git, r.at('git'), fail, scopeGrammar);
  const models = r.entry.models;
  if (models !== undefined && typeof models !== 'boolean') fail(r.at('models'), 'must be true or false');
  const limits = r.entry.limits === undefined ? undefined : parseLimits(r.entry.limits, r.at('limits'), fail);
  if (limits !== undefined && models !== true) fail(r.at('limits'), 'limits apply to model calls: add "models": true, or remove them');
  if (git === undefined && models !== true) fail(where, 'grants nothing: give it "git" scopes, "models": true, or both');
  const workflow = r.str('workflow');
  if (workflow !== undefined && !IDENTITY_VALUE.test(workflow)) fail(r.at('workflow'), "must be 1 to 128 of letters, digits and . _ : @ / -");
  return { entry: key, git, models: models === true, limits, workflow };
}

/** The git scopes, each as mint-token's --git-repo takes it, kept in canonical form. */
function parseGit(value: unknown, where: string, fail: FieldFailure, scopeGrammar: CanonicalScope): string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_GIT_ENTRIES) return fail(where, `must be a list of 1 to ${MAX_GIT_ENTRIES} scopes such as "github.com/acme/widgets:write"`);
  return value.map((text: unknown, i) => {
    if (typeof text !== 'string') return fail(`${where}[${i}]`, 'must be a string such as "github.com/acme/*:read"');
    const entry = scopeGrammar(text);
    if (!entry.ok) return fail(`${where}[${i}]`, `"${text}": ${entry.reason}`);
    return entry.value;
  });
}

/** The token claim's shape: `budget_usd` > 0, the others whole numbers ≥ 1, nothing else. */
function parseLimits(value: unknown, where: string, fail: FieldFailure): RunLimits {
  if (!isObject(value)) return fail(where, 'must be an object such as {"budget_usd": 5, "max_concurrent": 2}');
  for (const [k, v] of Object.entries(value)) {
    const whole = LIMIT_FIELDS.get(k);
    if (whole === undefined) return fail(`${where}.${k}`, `unknown field${suggestion(k, LIMIT_FIELDS.keys())}`);
    const valid = whole ? Number.isSafeInteger(v) && (v as number) >= 1 : typeof v === 'number' && Number.isFinite(v) && v > 0;
    if (!valid) return fail(`${where}.${k}`, whole ? 'must be a whole number of at least 1' : 'must be a number above 0 (US dollars)');
  }
  return { ...value } as RunLimits;
}

/**
 * Pure: the entries whose namespace is `*` that grant git write scopes or model calls (which spend
 * the budget), with what they grant. Such an entry follows a service account's name into every
 * namespace without an entry of its own, so whoever may create a service account of that name in
 * any namespace (a namespace's admin usually may) gets it: start-up warns about each.
 */
export function crossNamespaceGrants(policy: WorkloadPolicy): { readonly entry: string; readonly grants: readonly string[] }[] {
  return [...policy.entries.values()].flatMap((g) => {
    if (!g.entry.startsWith('*/')) return [];
    const grants = [...(g.git ?? []).filter((scope) => /:write(?::|$)/.test(scope)).map((scope) => `git ${scope}`), ...(g.models ? ['model calls'] : [])];
    return grants.length === 0 ? [] : [{ entry: g.entry, grants }];
  });
}

/**
 * Pure: the grant for a service account on a listener, or why not (a message naming the account
 * and what to add to the policy file). The lookup order is the file comment's precedence.
 */
export function lookupWorkload(policy: WorkloadPolicy, namespace: string, serviceAccount: string, listener: PolicyListener): PolicyLookup {
  const account = `${namespace}/${serviceAccount}`;
  const grant = [account, `${namespace}/*`, `*/${serviceAccount}`, '*/*'].map((k) => policy.entries.get(k)).find((g) => g !== undefined);
  if (grant === undefined) {
    return { ok: false, reason: `the service account ${account} is not in the workload policy ${policy.source}: add "${account}" (or "${namespace}/*") under serviceAccounts with the git scopes, models and limits it should have` };
  }
  if (listener === 'git' && grant.git === undefined) {
    return { ok: false, reason: `the service account ${account} may not use git: its entry "${grant.entry}" in ${policy.source} has no "git" scopes; add the repositories it should reach` };
  }
  if (listener === 'model' && !grant.models) {
    return { ok: false, reason: `the service account ${account} may not call models: its entry "${grant.entry}" in ${policy.source} lacks "models": true` };
  }
  return { ok: true, grant };
}
