// A workload's token file as the configurations we print name it (agent-config --token-file,
// git-config --workload-token-file): the path's checks and its quoting for a POSIX shell. Pure.
import { isAbsolute } from 'node:path';

/**
 * The path as given, checked: absolute (a helper runs in whatever directory the agent or git is
 * in), and without a control character (no configuration format we write keeps a line break).
 */
export function checkTokenFilePath(flag: string, path: string): string {
  if (!isAbsolute(path)) throw new Error(`${flag}: "${path}" is not an absolute path (the agent and git run their helpers from other directories)`);
  if (/[\u0000-\u001f\u007f]/.test(path)) throw new Error(`${flag}: the path holds a control character (a line break, tab or NUL); choose a path without one`);
  return path;
}

/**
 * One POSIX shell word holding exactly `value`: single quotes keep every byte as it is ($, `,
 * \, ", spaces), and a single quote inside ends the quoting, adds \' and opens it again.
 */
export function shellWord(value: string): string {
  return `'${value.replaceAll("'", "'\\''")}'`;
}
