// The start-up warnings: pure, from what start-up learned (no file, no environment, no clock).
// Each is one log line `{"event":"warning", ...}`; serve logs a listener's before its listening line.
import { crossNamespaceGrants, type WorkloadPolicy } from '../auth/workload-policy.ts';
import { descriptorWarning, type ConnectionCaps } from '../http/connection-caps.ts';
import { hostedToolFeesWarning, limitsAboveCeiling, loweredByClaim, unpricedWarning, type LimitsPolicy } from '../limits/policy.ts';

export type StartupWarning = { readonly event: 'warning'; readonly listener?: 'git' | 'model'; readonly host?: string; readonly provider?: string; readonly message: string };

/** What the git listener's warnings depend on. */
export interface GitFacts {
  readonly hosts: readonly { readonly host: string; readonly tls_verify: boolean }[];
  /** GIT_PROXY_SIGNING_KEY is set: workloads are authenticated. */
  readonly workloadAuth: boolean;
}

/** What the model gateway's warnings depend on. */
export interface ModelFacts {
  /** The --limits policy, when there is one. */
  readonly limits: LimitsPolicy | undefined;
  readonly providers: readonly { readonly name: string; readonly models: readonly string[]; readonly plainHttp: boolean; readonly credential: string }[];
  readonly priced: (provider: string, model: string) => boolean;
  readonly hostedTools: ReadonlySet<string>;
  /** MODEL_PROXY_SIGNING_KEY is set: bots are authenticated. */
  readonly botAuth: boolean;
}

/** What the workload policy's warnings depend on: the policy, and the --limits file its entries' limits are capped by (with the gateway on). */
export interface PolicyFacts {
  readonly policy: WorkloadPolicy;
  readonly limits: { readonly policy: LimitsPolicy; readonly file: string } | undefined;
}

/** What the process-wide warning depends on: the open-files limit against the connection caps. */
export interface DescriptorFacts {
  readonly openFilesLimit: number | undefined;
  readonly proxyListeners: number;
  readonly caps: ConnectionCaps;
  readonly metricsCaps: ConnectionCaps | undefined;
}

/** The warnings for whichever of git, model, the workload policy and descriptors are given, in the order they are logged. */
export function startupWarnings(facts: { git?: GitFacts; model?: ModelFacts; policy?: PolicyFacts; descriptors?: DescriptorFacts }): StartupWarning[] {
  const out: StartupWarning[] = [];
  const { git, model, policy, descriptors } = facts;
  if (git) {
    for (const h of git.hosts) {
      if (!h.tls_verify) out.push({ event: 'warning', listener: 'git', host: h.host, message: 'TLS verification is switched off for this host (tlsInsecureSkipVerify)' });
    }
    if (!git.workloadAuth) {
      out.push({ event: 'warning', listener: 'git', message: 'GIT_PROXY_SIGNING_KEY is not set: workloads are not authenticated (network-policy mode); whoever reaches this port may use every registered host credential, within the hosts file limits' });
    }
  }
  if (model) {
    const unpriced = model.limits && unpricedWarning(model.limits, model.providers.flatMap((p) => p.models.map((m) => ({ provider: p.name, model: m }))), model.priced);
    if (unpriced) out.push({ event: 'warning', listener: 'model', message: unpriced });
    const toolFees = model.limits && hostedToolFeesWarning(model.limits, model.hostedTools);
    if (toolFees) out.push({ event: 'warning', listener: 'model', message: toolFees });
    if (!model.botAuth) {
      out.push({ event: 'warning', listener: 'model', message: 'MODEL_PROXY_SIGNING_KEY is not set: bots are not authenticated (network-policy mode); identity headers are informational only' });
    }
    for (const p of model.providers) {
      if (!p.plainHttp) continue;
      const clear = p.credential !== 'none';
      out.push({ event: 'warning', listener: 'model', provider: p.name, message: `provider ${p.name} is reached over plain http (allowPlainHttp)${clear ? ', and its credential travels in clear (allowCredentialOverPlainHttp)' : ''}: only for a server inside the cluster` });
    }
    if (model.providers.every((p) => p.models.length === 0)) {
      out.push({ event: 'warning', listener: 'model', message: 'no model is allowed (UPSTREAM_ALLOWED_MODELS is empty): every model request will be refused until it lists the model IDs bots may use' });
    }
    if (model.hostedTools.size > 0) {
      out.push({ event: 'warning', listener: 'model', message: `hosted tools allowed (--allow-hosted-tools): ${[...model.hostedTools].join(', ')}; the provider runs them outside the sandbox` });
    }
  }
  if (policy) out.push(...policyWarnings(policy));
  if (descriptors) {
    const fd = descriptorWarning(descriptors.openFilesLimit, descriptors.proxyListeners, descriptors.caps, descriptors.metricsCaps);
    if (fd) out.push({ event: 'warning', message: fd });
  }
  return out;
}

/** What a write scope without ref rules means: said at start-up for the policy's, at the first push for a token's. */
const EVERY_REF = "lets a push change every branch and tag the host's credential may change, as before ref rules existed; to narrow it, add the refs after :write (:refs/heads/agent/<run>/*)";

/** Pure: the one line said the first time a push goes through under a workload scope entry without ref rules. */
export function everyRefPushWarning(entry: string): StartupWarning {
  return { event: 'warning', listener: 'git', message: `a push went through under a write scope without ref rules (${entry}), which ${EVERY_REF}; said once` };
}

/**
 * Pure: the workload policy's warnings: an entry whose namespace is `*` granting git write or
 * model calls (any namespace with that account name gets it), and an entry whose limits are above
 * the --limits ceilings (the gateway applies the ceiling; mint-token would refuse them).
 */
function policyWarnings({ policy, limits }: PolicyFacts): StartupWarning[] {
  const out: StartupWarning[] = [];
  for (const { entry, grants } of crossNamespaceGrants(policy)) {
    const account = entry.slice(2);
    const who = account === '*' ? 'every service account in every namespace' : `a service account named ${account} in any namespace`;
    const instead = account === '*' ? '"<namespace>/*"' : `"<namespace>/${account}"`;
    out.push({ event: 'warning', message: `workload policy ${policy.source}: the entry "${entry}" grants ${grants.join(' and ')} to ${who} that has no entry of its own: whoever may create a service account of that name in any namespace gets it; name the namespace (${instead}) unless every namespace is trusted` });
  }
  const everyRef = [...policy.entries.values()].flatMap((g) => (g.git ?? []).filter((scope) => scope.endsWith(':write')).map((scope) => `"${g.entry}": ${scope}`));
  if (everyRef.length > 0) out.push({ event: 'warning', listener: 'git', message: `workload policy ${policy.source}: write scopes without ref rules (${firstThree(everyRef, '; ')}): each ${EVERY_REF}` });
  if (limits === undefined) return out;
  for (const grant of policy.entries.values()) {
    const l = grant.limits;
    if (l === undefined) continue;
    const over = limitsAboveCeiling(limits.policy, loweredByClaim(l));
    if (over.length === 0) continue;
    const what = over.map((a) => `${a.tokenClaim} ${a.asked} is above the ceiling ${a.ceiling} of ${limits.file} (${a.field})`).join('; ');
    out.push({ event: 'warning', listener: 'model', message: `workload policy ${policy.source}: the entry "${grant.entry}": ${what}; the gateway applies the ceiling, so lower the entry to at most that (mint-token refuses the same)` });
  }
  return out;
}

/**
 * Pure: why the gateway may not start as configured when workload policy entries set limits and
 * there is no --limits (undefined: none does). Without --limits nothing enforces them: a limit
 * that is written is enforced, or start-up stops naming the entries (a call that carries limits
 * anyway, the policy re-read with new ones, is refused: admitCall).
 */
export function unenforcedPolicyLimits(policy: WorkloadPolicy): string | undefined {
  const entries = [...policy.entries.values()].filter((g) => g.limits !== undefined).map((g) => `"${g.entry}"`);
  if (entries.length === 0) return undefined;
  const named = firstThree(entries, ', ');
  return `--workload-policy ${policy.source}: ${entries.length === 1 ? 'the entry' : 'the entries'} ${named} set limits, which only a gateway started with --limits enforces; give --limits FILE (a file holding {} sets no ceiling of its own, so the entries' limits apply as written), or remove the entries' "limits"`;
}

/** Pure: the first three of `items` joined, then how many more. */
function firstThree(items: readonly string[], separator: string): string {
  return items.length > 3 ? `${items.slice(0, 3).join(separator)} and ${items.length - 3} more` : items.join(separator);
}
