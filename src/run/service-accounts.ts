// Start-up: Kubernetes service-account tokens (--sa-issuer and the flags beside it), one source
// that both listeners' verifiers ask before their own keys: one key set, fetched or followed once
// for the process, and one cache of verified tokens.
import type { ServeOptions } from '../config/cli.ts';
import { parseJwks } from '../auth/jwks.ts';
import { fileKeySet, httpsGetter, remoteKeySet, type KeySetEvent, type KeySetSource } from '../auth/jwks-source.ts';
import { serviceAccountSource } from '../auth/service-account-source.ts';
import type { TokenSource } from '../auth/verifier.ts';
import type { WorkloadPolicy } from '../auth/workload-policy.ts';
import type { LogSink } from '../http/log.ts';
import type { LogEvent } from './log-events.ts';
import type { Egress } from '../http/tunnel.ts';
import { readTextFile } from './load.ts';

type SaFlags = ServeOptions['serviceAccounts'];

/** Pure: why the --sa-* flags do not fit together, or undefined. */
function serviceAccountFlagsProblem(sa: SaFlags, workloadPolicy: string | undefined): string | undefined {
  const given = [sa.audience && '--sa-audience', sa.jwksFile && '--sa-jwks-file', sa.jwksUrl && '--sa-jwks-url', sa.jwksDiscovery && '--sa-jwks-discovery', sa.caFile && '--sa-ca-file'].filter(Boolean);
  if (sa.issuer === undefined) return given.length === 0 ? undefined : `${given[0]} is read only with --sa-issuer (the issuer whose service-account tokens the listeners accept)`;
  let issuer: URL;
  try {
    issuer = new URL(sa.issuer);
  } catch {
    return `--sa-issuer "${sa.issuer}" is not a URL: give the cluster's issuer exactly as its tokens' iss (kubectl get --raw /.well-known/openid-configuration shows it)`;
  }
  if (sa.audience === undefined) return '--sa-issuer needs --sa-audience: the audience the pods\' projected token volume requests for the proxy (e.g. credential-proxy)';
  if (workloadPolicy === undefined) return '--sa-issuer needs --workload-policy: the file that maps a token\'s namespace and service account to what it may do';
  const sources = [sa.jwksFile && '--sa-jwks-file', sa.jwksUrl && '--sa-jwks-url', sa.jwksDiscovery && '--sa-jwks-discovery'].filter(Boolean);
  if (sources.length !== 1) return `--sa-issuer needs exactly one of --sa-jwks-file, --sa-jwks-url and --sa-jwks-discovery (where the issuer's public keys are)${sources.length > 1 ? `, not ${sources.join(' and ')}` : ''}`;
  if (sa.jwksUrl !== undefined && !sa.jwksUrl.startsWith('https://')) return `--sa-jwks-url "${sa.jwksUrl}" must be an https URL: the keys decide who is who`;
  if (sa.jwksDiscovery && issuer.protocol !== 'https:') return `--sa-jwks-discovery needs an https --sa-issuer (its discovery document is fetched from there), not "${sa.issuer}"`;
  if (sa.caFile !== undefined && sa.jwksFile !== undefined) return '--sa-ca-file is read only when the keys are fetched (--sa-jwks-url, --sa-jwks-discovery), not with --sa-jwks-file';
  return undefined;
}

/**
 * The service-account source, or undefined without --sa-issuer. A remote key set (fetched
 * through `egress`, the egress proxy start-up read, as every HTTPS connection) starts its first
 * fetch now (tokens wait for it; until a set loads every token is refused); each set loaded and
 * each failure (the last good set kept) is logged.
 */
export function openServiceAccounts(options: ServeOptions, maxLifetimeSec: number, egress: Egress, workloadPolicy: () => () => WorkloadPolicy, log: LogSink<LogEvent>, atExit: (stop: () => void) => void): TokenSource | undefined {
  const sa = options.serviceAccounts;
  const problem = serviceAccountFlagsProblem(sa, options.workloadPolicyFile);
  if (problem !== undefined) throw new Error(problem);
  if (sa.issuer === undefined) return undefined;
  const policy = workloadPolicy();
  const report = (event: KeySetEvent): void => {
    if (event.kind === 'loaded') log({ event: 'sa_keys_loaded', from: event.from, kids: event.kids, skipped: event.skipped.length > 0 ? event.skipped : undefined });
    else log({ event: 'sa_keys_failed', from: event.from, message: event.reason });
  };
  let keys: KeySetSource;
  if (sa.jwksFile !== undefined) {
    // Read now, so that a missing or broken file stops start-up instead of refusing every token.
    const parsed = parseJwks(readTextFile(sa.jwksFile, '--sa-jwks-file'));
    if (!parsed.ok) throw new Error(`--sa-jwks-file ${sa.jwksFile}: ${parsed.reason}`);
    if (parsed.set.keys.size === 0) throw new Error(`--sa-jwks-file ${sa.jwksFile} holds no RS256 or ES256 key the proxy can verify with${parsed.set.skipped.length > 0 ? ` (left out: ${parsed.set.skipped.join('; ')})` : ''}`);
    keys = fileKeySet(sa.jwksFile, report);
    keys.current(); // read now: the key set's kids are logged at start-up (sa_keys_loaded), not at the first token
  } else {
    const ca = sa.caFile === undefined ? undefined : readTextFile(sa.caFile, '--sa-ca-file');
    keys = remoteKeySet({ issuer: sa.issuer, jwks: sa.jwksUrl ?? 'discovery', get: httpsGetter(ca, egress), nowMs: () => performance.now(), report });
  }
  atExit(() => keys.close());
  return serviceAccountSource({ issuer: sa.issuer, audience: sa.audience!, maxLifetimeSec, keys, policy });
}
