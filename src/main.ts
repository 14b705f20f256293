// Entry point, and the only file with side effects: reads the environment and files, starts
// listeners, handles signals, writes to stdout/stderr, exits.
import { readFileSync } from 'node:fs';
import { parseCommandLine, usage, UsageError, type ServeOptions } from './cli.ts';
import { createUpstreamAgent } from './forward.ts';
import { gitWorkloadConfig } from './git-config.ts';
import { createGitHandler, sendGitError, type GitUpstream } from './git-proxy.ts';
import { hostsFromEnv, mergeHosts, parseHostsFile, type HostConfig } from './hosts.ts';
import { jsonLineSink, type LogSink } from './log.ts';
import { literalSecret, secretSource } from './secret.ts';
import { startListener, type Listener } from './server.ts';
import { VERSION } from './version.ts';

const env = process.env;
const log: LogSink = jsonLineSink((line) => process.stdout.write(line));

function loadHosts(options: ServeOptions): HostConfig[] {
  const fromFile = options.gitHostsFile ? parseHostsFile(readFileSync(options.gitHostsFile, 'utf8'), options.gitHostsFile) : [];
  return mergeHosts(hostsFromEnv(env), fromFile);
}

function openUpstreams(hosts: readonly HostConfig[]): Map<string, GitUpstream> {
  const upstreams = new Map<string, GitUpstream>();
  for (const config of hosts) {
    let ca: string | undefined;
    if (config.caFile) {
      try {
        ca = readFileSync(config.caFile, 'utf8');
      } catch (err) {
        throw new Error(`git host ${config.key}: caFile ${config.caFile} cannot be read (${(err as NodeJS.ErrnoException).code})`);
      }
    }
    const username = config.username === undefined ? undefined : 'literal' in config.username ? literalSecret(config.username.literal) : secretSource(env, config.username);
    upstreams.set(config.key, {
      config,
      agent: createUpstreamAgent({ ca, tlsInsecureSkipVerify: config.tlsInsecureSkipVerify }),
      token: secretSource(env, config.token),
      username,
    });
  }
  return upstreams;
}

async function serve(options: ServeOptions): Promise<void> {
  const upstreams = openUpstreams(loadHosts(options));
  const hostStates = [...upstreams.values()].map((u) => ({
    host: u.config.key,
    auth: u.config.authType,
    // Presence only; a credential's value is never logged.
    credential: u.token.read().ok ? 'present' : 'missing',
    tls_verify: !u.config.tlsInsecureSkipVerify,
  }));
  const gitEnabled = env.GIT_AUTH_ENABLED === 'true' || hostStates.some((h) => h.credential === 'present');
  if (!gitEnabled) {
    process.stderr.write(
      'proxy: no listener is enabled.\n' +
        '  git proxy: set GIT_HOST_A_TOKEN (host GIT_HOST_A, default github.com), GIT_HOST_B_TOKEN with GIT_HOST_B,\n' +
        '             a token of a --git-hosts file, or GIT_AUTH_ENABLED=true.\n',
    );
    process.exit(1);
  }

  // Signal handlers go in before anything is announced: a supervisor may send SIGTERM as soon
  // as it reads the listening line.
  const listeners: Listener[] = [];
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      log({ event: 'shutdown', signal, phase: 'forced' });
      process.exit(0);
    }
    stopping = true;
    log({ event: 'shutdown', signal, phase: 'draining', grace_ms: options.shutdownGraceMs });
    Promise.all(listeners.map((l) => l.close(options.shutdownGraceMs))).then(() => {
      log({ event: 'shutdown', signal, phase: 'done' });
      process.exit(0);
    });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  const git = await startListener({
    name: 'git',
    address: options.gitListen,
    timeouts: { headerMs: options.headerTimeoutMs, keepAliveMs: options.idleTimeoutMs },
    log,
    handle: createGitHandler({
      hosts: upstreams,
      timeouts: { connectMs: options.upstreamConnectTimeoutMs, idleMs: options.upstreamIdleTimeoutMs },
      log,
    }),
    sendError: (req, res, error) => sendGitError(req, res, error),
  });
  listeners.push(git);
  log({ event: 'listening', listener: 'git', address: git.address, version: VERSION, hosts: hostStates });
  for (const h of hostStates) {
    if (!h.tls_verify) log({ event: 'warning', listener: 'git', host: h.host, message: 'TLS verification is switched off for this host (tlsInsecureSkipVerify)' });
  }
}

async function main(argv: readonly string[]): Promise<void> {
  const { command, options } = parseCommandLine(argv);
  switch (command) {
    case 'help':
      process.stdout.write(`${usage()}\n`);
      return;
    case 'version':
      process.stdout.write(`${VERSION}\n`);
      return;
    case 'git-config':
      process.stdout.write(gitWorkloadConfig(loadHosts(options).map((h) => h.key), env.GIT_AUTH_PROXY_HOST, env.GIT_CREDENTIAL_HELPER));
      return;
    case 'serve':
      return serve(options);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof UsageError) {
    process.stderr.write(`proxy: ${err.message}\n\n${usage()}\n`);
    process.exit(2);
  }
  process.stderr.write(`proxy: ${(err as Error)?.message ?? String(err)}\n`);
  process.exit(1);
});
