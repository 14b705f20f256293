// Start-up: TLS and mutual TLS for the git and model listeners (--tls-cert, --tls-key,
// --tls-client-ca, --spiffe-trust-domain, --workload-policy). Without --tls-cert both listeners
// serve plain HTTP, as before. With --tls-client-ca every client must present a certificate from
// that CA bundle, and the listener's verifier asks the certificate first (auth/spiffe-source.ts).
import { readFileSync, statSync } from 'node:fs';
import type { ServeOptions } from '../config/cli.ts';
import { spiffeSource } from '../auth/spiffe-source.ts';
import { parseSpiffeId } from '../auth/spiffe.ts';
import { composeVerifier, type TokenVerifier } from '../auth/verifier.ts';
import { parseWorkloadPolicy, type WorkloadPolicy } from '../auth/workload-policy.ts';
import type { LogSink } from '../http/log.ts';
import type { LogEvent } from './log-events.ts';
import { tlsFileSource } from '../http/tls-listener.ts';

export interface ListenerTls {
  /** For startListener's `tls`; undefined: plain HTTP. */
  readonly tls: ReturnType<typeof tlsFileSource> | undefined;
  /** The listener's verifier with the client certificate asked first (mutual TLS), or `tokens` unchanged. */
  verifier(tokens: TokenVerifier | undefined): TokenVerifier | undefined;
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

/**
 * The workload policy file as it is now: parsed at start-up (a mistake stops it), then read
 * again when its size, time or inode changed (Kubernetes' `..data` swap). A file that no longer
 * reads or parses keeps the last good policy; a file that is gone is an empty policy, so that
 * removing it takes every grant away from the next request (fail closed, as a removed key file
 * does) until a file is back. Each problem is logged once (`config_error`).
 */
export function workloadPolicyFile(path: string, log: LogSink<LogEvent>): () => WorkloadPolicy {
  const stamp = (): string => {
    const s = statSync(path);
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  };
  let seen = stamp();
  let policy = parseWorkloadPolicy(readFileSync(path, 'utf8'), path);
  let lastProblem = '';
  return () => {
    let problem: string;
    try {
      const now = stamp();
      if (now === seen) return policy;
      const text = readFileSync(path, 'utf8');
      // Remembered before parsing: a broken file is parsed once, not at every request, until it changes.
      seen = now;
      policy = parseWorkloadPolicy(text, path);
      lastProblem = '';
      log({ event: 'workload_policy_reloaded', file: path, entries: policy.entries.size });
      return policy;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        policy = { source: path, entries: new Map() };
        seen = '';
        problem = 'the workload policy file is gone: every service account (token or certificate) is refused until it is back';
      } else {
        problem = `${(err as Error).message}; the last good policy stays in force`;
      }
    }
    if (problem !== lastProblem) log({ event: 'config_error', file: path, message: problem });
    lastProblem = problem;
    return policy;
  };
}

/** The listener's TLS, from the flags (checked by tlsFlagsProblem first). */
export function listenerTls(options: ServeOptions, listener: 'git' | 'model', log: LogSink<LogEvent>): ListenerTls {
  const problem = tlsFlagsProblem(options);
  if (problem !== undefined) throw new Error(problem);
  if (options.tlsCertFile === undefined || options.tlsKeyFile === undefined) return { tls: undefined, verifier: (tokens) => tokens, mode: 'plain' };
  const tls = tlsFileSource({ certFile: options.tlsCertFile, keyFile: options.tlsKeyFile, clientCaFile: options.tlsClientCaFile }, listener, log);
  if (options.tlsClientCaFile === undefined) return { tls, verifier: (tokens) => tokens, mode: 'tls' };
  const certificates = spiffeSource({ trustDomain: options.spiffeTrustDomain!, policy: workloadPolicyFile(options.workloadPolicyFile!, log) });
  return {
    tls,
    mode: 'mutual-tls',
    // Every client has a verified certificate, so the certificate source always answers; the
    // token verifier stays behind it for a connection without one (none reaches the listener).
    verifier: (tokens) => composeVerifier([certificates, ...(tokens === undefined ? [] : [{ name: 'tokens', verify: tokens.verify }])]),
  };
}
