// What a TypeScript program was built from, as the answers the file system gave it, so that a
// check whose every input reads the same as last time can stand on last time's result
// (scripts/check-exports.mjs). TypeScript reads nothing but through its `System` (ts.sys): the
// tsconfig, the directory listing its `include` globs expand to, every source and declaration
// file, every probe of module resolution (fileExists, directoryExists, realpath, package.json).
// recordReads wraps that System and keeps each question with a digest of its answer;
// sameReads asks the questions again. A method it does not know spoils the record (fail closed:
// the check then runs in full, and no record is kept).
import { createHash } from 'node:crypto';

/** Questions about the file system: recorded with their answers' digests. */
const QUESTIONS = new Set(['readFile', 'fileExists', 'directoryExists', 'getDirectories', 'readDirectory', 'realpath', 'getExecutingFilePath', 'getCurrentDirectory', 'getFileSize', 'getModifiedTime']);
/** Methods whose answer depends on their arguments only, or that write: nothing to record. */
const UNRECORDED = new Set(['createHash', 'write', 'writeFile', 'createDirectory', 'writeOutputIsTTY', 'clearScreen', 'now']);

const digest = (answer) => createHash('sha256').update(answer === undefined ? '\0undefined' : typeof answer === 'string' ? answer : JSON.stringify(answer)).digest('hex');

/**
 * `system` with its questions recorded. `skip(path)`: files whose reads are not inputs (the
 * checker's own cache). Returns { system, reads() -> [[method, args, digest]] in order, or null
 * when a call could not be recorded }.
 */
export function recordReads(system, skip) {
  const reads = new Map();
  let spoiled = false;
  const wrapped = new Proxy(system, {
    get(target, name) {
      const value = target[name];
      if (typeof value !== 'function') return value;
      if (UNRECORDED.has(name)) return value.bind(target);
      if (!QUESTIONS.has(name)) {
        return (...args) => {
          spoiled = true;
          return value.apply(target, args);
        };
      }
      return (...args) => {
        const answer = value.apply(target, args);
        if (!(typeof args[0] === 'string' && skip(args[0]))) reads.set(JSON.stringify([name, args]), [name, args, digest(answer)]);
        return answer;
      };
    },
  });
  return { system: wrapped, reads: () => (spoiled ? null : [...reads.values()]) };
}

/** Whether every recorded question gets the same answer from `system` now. */
export function sameReads(system, reads) {
  // A record kept as JSON has null where an argument was left out.
  return reads.every(([name, args, answer]) => typeof system[name] === 'function' && digest(system[name](...args.map((a) => a ?? undefined))) === answer);
}
