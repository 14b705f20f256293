// Start-up: TLS and mutual TLS for the git and model listeners (--tls-cert, --tls-key,
// --tls-client-ca, --spiffe-trust-domain, --workload-policy). Without --tls-cert both listeners
// serve plain HTTP, as before. With --tls-client-ca every client must present a certificate from
// that CA bundle, and the listener's verifier asks the certificate first (auth/spiffe-source.ts).
import type { ServeOptions } from '../config/cli.ts';
import { spiffeSource } from '../auth/spiffe-source.ts';
import { parseSpiffeId } from '../auth/spiffe.ts';
import type { TokenSource } from '../auth/verifier.ts';
import type { WorkloadPolicy } from '../auth/workload-policy.ts';
import type { LogSink } from '../http/log.ts';
import type { LogEvent } from './log-events.ts';
import { tlsFileSource } from '../http/tls-listener.ts';

export interface ListenerTls {
  /** For startListener's `tls`; undefined: plain HTTP. */
  readonly tls: ReturnType<typeof tlsFileSource> | undefined;
  /** With mutual TLS, the source the listener's verifier asks first: the client certificate (its SPIFFE ID through the policy). */
  readonly certificates: TokenSource | undefined;
  /** For the listening line. */
  readonly mode: 'plain' | 'tls' | 'mutual-tls';
}

/** Pure: why the TLS flags do not fit together, or undefined. */
export function tlsFlagsProblem(o: Pick<ServeOptions, 'tlsCertFile' | 'tlsKeyFile' | 'tlsClientCaFile' | 'spiffeTrustDomain' | 'workloadPolicyFile'>): string | undefined {
  if ((o.tlsCertFile === undefined) !== (o.tlsKeyFile === undefined)) return '--tls-cert and --tls-key go together: give the certificate and its private key';
  if (o.tlsClientCaFile !== undefined && o.tlsCertFile === undefined) return '--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS first)';
  if (o.tlsClientCaFile !== undefined && o.spiffeTrustDomain === undefined) return '--tls-client-ca needs --spiffe-trust-domain: the trust domain whose SPIFFE IDs the listeners accept';
  if (o.tlsClientCaFile !== undefined && o.workloadPolicyFile === undefined) return '--tls-client-ca needs --workload-policy: the file that maps a certificate\'s namespace and service account to what it may do';
  if (o.spiffeTrustDomain !== undefined && o.tlsClientCaFile === undefined) return '--spiffe-trust-domain is read only with --tls-client-ca (client certificates)';
  if (o.spiffeTrustDomain !== undefined) {
    const parsed = parseSpiffeId(`spiffe://${o.spiffeTrustDomain}`);
    if ('error' in parsed || parsed.path !== '') return `--spiffe-trust-domain "${o.spiffeTrustDomain}": a trust domain is a-z 0-9 . - _ only (no scheme, port or path), e.g. cluster.local`;
  }
  return undefined;
}

/** The listener's TLS, from the flags (checked by tlsFlagsProblem first); `policy` opens the --workload-policy file the process shares. */
export function listenerTls(options: ServeOptions, listener: 'git' | 'model', policy: () => () => WorkloadPolicy, log: LogSink<LogEvent>): ListenerTls {
  const problem = tlsFlagsProblem(options);
  if (problem !== undefined) throw new Error(problem);
  if (options.tlsCertFile === undefined || options.tlsKeyFile === undefined) return { tls: undefined, certificates: undefined, mode: 'plain' };
  const tls = tlsFileSource({ certFile: options.tlsCertFile, keyFile: options.tlsKeyFile, clientCaFile: options.tlsClientCaFile }, listener, log);
  if (options.tlsClientCaFile === undefined) return { tls, certificates: undefined, mode: 'tls' };
  return { tls, mode: 'mutual-tls', certificates: spiffeSource({ trustDomain: options.spiffeTrustDomain!, policy: policy() }) };
}
