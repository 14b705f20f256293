// Start-up: the git listener, its warnings and its listening line.
import type { ServeOptions } from '../config/cli.ts';
import { VERSION } from '../config/version.ts';
import type { LogSink } from '../http/log.ts';
import { startListener, type Listener } from '../http/server.ts';
import { createGitHandler, refuseAtGit } from '../git/proxy.ts';
import type { GitRequestRecord } from '../git/record.ts';
import type { ServeConfig } from './load.ts';
import type { Shared } from './shared.ts';
import { startupWarnings } from './warnings.ts';

export async function startGit(options: ServeOptions, config: ServeConfig, shared: Shared, log: LogSink): Promise<Listener> {
  const { metrics } = shared;
  const gitDeps = {
    hosts: config.gitUpstreams,
    revoked: shared.revoked,
    maxConcurrentPerWorkload: options.gitMaxConcurrentPerWorkload,
    workloadAuth: config.gitSigningKey && { key: config.gitSigningKey, maxLifetimeSec: config.maxTokenLifetimeSec },
    timeouts: shared.upstreamTimeouts,
    record: (rec: GitRequestRecord) => {
      log(rec);
      metrics?.git(rec);
    },
    log,
  };
  const git = await startListener({
    name: 'git',
    flag: 'git-auth-listen',
    address: options.gitListen,
    timeouts: shared.listenerTimeouts,
    ...shared.capped('git'),
    log,
    handle: createGitHandler(gitDeps),
    refuse: refuseAtGit(gitDeps),
  });
  for (const warning of startupWarnings({ git: { hosts: config.hostStates, workloadAuth: !!config.gitSigningKey } })) log(warning);
  log({ event: 'listening', listener: 'git', address: git.address, version: VERSION, hosts: config.hostStates, workload_auth: config.gitSigningKey ? 'jwt' : 'network-policy' });
  return git;
}
