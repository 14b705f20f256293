// Start-up: the git listener, its warnings and its listening line.
import type { ServeOptions } from '../config/cli.ts';
import { VERSION } from '../config/version.ts';
import type { LogSink } from '../http/log.ts';
import type { LogEvent } from './log-events.ts';
import { startListener, type Listener } from '../http/server.ts';
import { createGitHandler, refuseAtGit, type GitUpstream } from '../git/proxy.ts';
import { installationTokenCredential } from '../git/credentials.ts';
import { exchangeAtGitHub, installationTokens, privateKeyFileSource } from '../git/github-app.ts';
import { keepFresh } from '../gateway/credentials/table.ts';
import type { GitRequestRecord } from '../git/record.ts';
import { listenerAuthentication, listenerVerifier, openVerifier } from './keys.ts';
import { listenerTls } from './tls.ts';
import type { ServeConfig } from './load.ts';
import type { Egress } from '../http/tunnel.ts';
import { notReadyReason, unusableFiles } from './readiness.ts';
import type { Shared } from './shared.ts';
import { everyRefPushWarning, startupWarnings } from './warnings.ts';

/**
 * GitHub App hosts get their installation tokens: the first fetched at once, then each refreshed
 * ahead of its expiry; a failed refresh is logged with its reason (never a token, JWT or key).
 */
function withInstallationTokens(upstreams: ReadonlyMap<string, GitUpstream>, egress: Egress, log: LogSink<LogEvent>, atExit: Shared['atExit']): Map<string, GitUpstream> {
  return new Map(
    [...upstreams].map(([key, upstream]) => {
      const app = upstream.config.githubApp;
      if (app === undefined) return [key, upstream];
      const installation = installationTokens({
        config: app,
        privateKey: privateKeyFileSource(app.privateKeyFile),
        exchange: (request) => exchangeAtGitHub(request, egress),
        basic: installationTokenCredential,
        onRefresh: (outcome) => {
          if (!outcome.ok) log({ event: 'credential_refresh_failed', listener: 'git', host: key, credential: 'github-app', reason: outcome.reason });
        },
      });
      atExit(keepFresh(installation.minted).close);
      return [key, { ...upstream, installation }];
    }),
  );
}

export async function startGit(options: ServeOptions, config: ServeConfig, shared: Shared, log: LogSink<LogEvent>): Promise<Listener> {
  const { metrics } = shared;
  const tlsOf = listenerTls(options, 'git', shared.workloadPolicy, log);
  const keys = openVerifier(config.gitKeys, config.maxTokenLifetimeSec, { log, onProblem: (listener) => metrics?.keyFileProblem(listener) });
  if (keys !== undefined) shared.atExit(keys.close);
  let everyRefSaid = false;
  const gitDeps = {
    onEveryRefPush: (entry: string) => {
      if (everyRefSaid) return;
      everyRefSaid = true;
      log(everyRefPushWarning(entry));
    },
    hosts: withInstallationTokens(config.gitUpstreams, config.egress, log, shared.atExit),
    revoked: shared.revoked,
    maxConcurrentPerWorkload: options.gitMaxConcurrentPerWorkload,
    verifier: listenerVerifier([tlsOf.certificates, shared.serviceAccounts, keys?.source]),
    timeouts: shared.upstreamTimeouts,
    record: (rec: GitRequestRecord) => {
      log(rec);
      metrics?.git(rec);
    },
    log,
    trace: shared.telemetry?.git,
  };
  const git = await startListener({
    name: 'git',
    flag: 'git-auth-listen',
    address: options.gitListen!, // set: load.ts enables no listener whose flag is off
    timeouts: shared.listenerTimeouts,
    ...shared.capped('git'),
    log,
    handle: createGitHandler(gitDeps),
    notReady: () => notReadyReason(unusableFiles(config.credentialFiles.git)) ?? shared.store?.notReady(),
    refuse: refuseAtGit(gitDeps),
    tls: tlsOf.tls,
  });
  const auth = listenerAuthentication(tlsOf.mode, keys, shared.serviceAccounts && options.serviceAccounts.issuer);
  for (const warning of startupWarnings({ git: { hosts: config.hostStates, workloadAuth: auth.authenticated } })) log(warning);
  log({ event: 'listening', listener: 'git', address: git.address, version: VERSION, hosts: config.hostStates, workload_auth: auth.mode, ...auth.fields });
  return git;
}
