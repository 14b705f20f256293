// Start-up: the --workload-policy file, which the certificate source (mutual TLS) and the
// service-account source both read: opened once for the process, so that an edit is read, and
// logged, once, and both listeners see the same policy.
import { readFileSync } from 'node:fs';
import { fileStamp } from '../config/file-stamp.ts';
import { parseWorkloadPolicy, type WorkloadPolicy } from '../auth/workload-policy.ts';
import { canonicalScope } from '../git/scope.ts';
import type { LogSink } from '../http/log.ts';
import type { LogEvent } from './log-events.ts';
import { readTextFile } from './load.ts';

/**
 * The workload policy file as it is now: parsed at start-up (a mistake stops it), then read
 * again when its stamp changed (file-stamp.ts: a Kubernetes `..data` swap, any write). A file that no longer
 * reads or parses keeps the last good policy; a file that is gone is an empty policy, so that
 * removing it takes every grant away from the next request (fail closed, as a removed key file
 * does) until a file is back. Each problem is logged once (`config_error`).
 */
function workloadPolicyFile(path: string, log: LogSink<LogEvent>): () => WorkloadPolicy {
  let seen = fileStamp(path);
  let policy = parseWorkloadPolicy(readTextFile(path, '--workload-policy'), path, canonicalScope);
  let lastProblem = '';
  return () => {
    let problem: string;
    try {
      const now = fileStamp(path);
      if (now === seen) return policy;
      const text = readFileSync(path, 'utf8');
      // Remembered before parsing: a broken file is parsed once, not at every request, until it changes.
      seen = now;
      policy = parseWorkloadPolicy(text, path, canonicalScope);
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

/**
 * The --workload-policy file, opened at its first use (after that user's own flag checks, so
 * that a flag mistake is named before a file problem) and shared by every later one.
 */
export function sharedWorkloadPolicy(path: string | undefined, log: LogSink<LogEvent>): () => () => WorkloadPolicy {
  let policy: (() => WorkloadPolicy) | undefined;
  return () => {
    if (path === undefined) throw new Error('--workload-policy is needed here'); // the flag checks ask for it first
    return (policy ??= workloadPolicyFile(path, log));
  };
}
