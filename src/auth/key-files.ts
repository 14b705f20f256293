// A listener's keys as files on disk (src/auth/keys.ts says what a key file holds): one key file,
// a directory of them (a mounted Kubernetes secret, say), or the one HS256 secret of
// MODEL_PROXY_SIGNING_KEY_FILE / GIT_PROXY_SIGNING_KEY_FILE. Read at start-up, where any problem
// stops the proxy naming the file; then read again whenever the directory changes (fs.watch) and
// every few seconds besides (a watch can miss what a network file system does).
//
// A re-read goes file by file, so that a mistake in one file costs only that file:
//   - a file removed: its key is gone from the next request on (fail closed; a directory gone
//     removes every key, and a listener with no key left refuses every token);
//   - a file unreadable or malformed: its last good key stays, and the problem is reported;
//   - a new file that is fine: its key is in from the next request on;
//   - two files with one kid: the key that held it stays (none, if neither did), reported.
// Unchanged files keep their key object, so the verified-token cache (src/auth/verifier.ts) keeps
// their entries; a changed file is a new key, and the tokens of the old one are verified afresh.
import { readdirSync, readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { VerificationKey } from './jwt.ts';
import { isIgnoredKeyEntry, secretFromFile, verificationKeyFile } from './keys.ts';

export interface KeyFilesOptions {
  readonly path: string;
  /** 'keys': a KID.pem / KID.hs256 file or a directory of them; 'secret': one HS256 secret, without kid. */
  readonly kind: 'keys' | 'secret';
  /** What messages call the path: `--bot-keys`, `MODEL_PROXY_SIGNING_KEY_FILE`. */
  readonly name: string;
}

interface Entry {
  readonly bytes: Buffer;
  readonly key: VerificationKey;
}

/** How often the files are read again besides what fs.watch reports. */
const KEY_FILES_POLL_MS = 5000;

export class KeyFiles {
  readonly #opts: KeyFilesOptions;
  readonly #isDirectory: boolean;
  #entries = new Map<string, Entry>();
  /** The problems of the last re-read, so that each is reported once, not every few seconds. */
  #reported = new Set<string>();

  /** Reads the keys now; any problem is an Error naming the path and saying what to fix. */
  constructor(opts: KeyFilesOptions) {
    this.#opts = opts;
    let isDirectory: boolean;
    try {
      isDirectory = statSync(opts.path).isDirectory();
    } catch (err) {
      throw new Error(`${opts.name} ${opts.path} cannot be read (${(err as NodeJS.ErrnoException).code})`);
    }
    if (isDirectory && opts.kind === 'secret') throw new Error(`${opts.name} ${opts.path}: a directory; it names one file holding the HS256 secret`);
    this.#isDirectory = isDirectory;
    const problems = this.reread().problems;
    if (problems.length > 0) throw new Error(`${opts.name} ${opts.path}: ${problems.join('; ')}`);
    if (this.#entries.size === 0) throw new Error(`${opts.name} ${opts.path}: no key file in it (KID.pem or KID.hs256)`);
  }

  get keys(): VerificationKey[] {
    return [...this.#entries.values()].map((e) => e.key);
  }

  /** Reads the files again, file by file (see the top of this file); whether the keys changed, and what went wrong. */
  reread(): { changed: boolean; problems: string[] } {
    const problems: string[] = [];
    const dir = this.#isDirectory ? this.#opts.path : dirname(this.#opts.path);
    let names: string[];
    if (this.#isDirectory) {
      try {
        names = readdirSync(dir).filter((n) => !isIgnoredKeyEntry(n)).sort();
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // Gone: every key with it. Unreadable for another reason: the keys as they were.
        if (code !== 'ENOENT') return { changed: false, problems: [`the directory cannot be read (${code}); the keys read before stay`] };
        problems.push('the directory is gone: every token is refused until it is back');
        names = [];
      }
    } else {
      names = [basename(this.#opts.path)];
    }
    const next = new Map<string, Entry>();
    for (const name of names) {
      const entry = this.#readEntry(join(dir, name), name, problems);
      if (entry !== undefined) next.set(name, entry);
    }
    this.#dropDuplicateKids(next, problems);
    const changed = next.size !== this.#entries.size || [...next].some(([name, e]) => this.#entries.get(name) !== e);
    this.#entries = next;
    return { changed, problems };
  }

  /** One file's entry: the one held when its bytes did not change or cannot be read now; undefined when it is gone or never was good. */
  #readEntry(path: string, name: string, problems: string[]): Entry | undefined {
    const held = this.#entries.get(name);
    let bytes: Buffer;
    try {
      bytes = readFileSync(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') {
        if (!this.#isDirectory) problems.push('the file is gone: its tokens are refused until it is back');
        return undefined;
      }
      problems.push(`${name} cannot be read (${code})${held ? '; its key read before stays' : ''}`);
      return held;
    }
    if (held !== undefined && held.bytes.equals(bytes)) return held;
    try {
      const key: VerificationKey = this.#opts.kind === 'secret' ? { kid: undefined, alg: 'HS256', key: secretFromFile(name, bytes) } : verificationKeyFile(name, bytes);
      return { bytes, key };
    } catch (err) {
      problems.push(`${(err as Error).message}${held ? '; its key read before stays' : ''}`);
      return held;
    }
  }

  /** Two files with one kid: the one that held it before stays; a kid new in both is nobody's. */
  #dropDuplicateKids(next: Map<string, Entry>, problems: string[]): void {
    const byKid = new Map<string, string[]>();
    for (const [name, e] of next) if (e.key.kid !== undefined) byKid.set(e.key.kid, [...(byKid.get(e.key.kid) ?? []), name]);
    for (const [kid, files] of byKid) {
      if (files.length < 2) continue;
      problems.push(`${files.join(' and ')} have the same key id "${kid}": remove or rename one`);
      for (const name of files) if (this.#entries.get(name) !== next.get(name)) next.delete(name);
    }
  }

  /**
   * Re-reads on every change fs.watch reports in the directory, and every few seconds besides.
   * `onChange` hears of a new set of keys; `onProblem` of each problem once, until it is fixed.
   */
  watch(onChange: (keys: VerificationKey[]) => void, onProblem: (message: string) => void, pollMs = KEY_FILES_POLL_MS): () => void {
    let pending = false;
    const reread = () => {
      pending = false;
      const { changed, problems } = this.reread();
      const messages = problems.map((p) => `${this.#opts.name} ${this.#opts.path}: ${p}`);
      for (const m of messages) if (!this.#reported.has(m)) onProblem(m);
      this.#reported = new Set(messages);
      if (changed) onChange(this.keys);
    };
    // One re-read for a burst of events (an editor's write, a secret mount's swap of ..data).
    const soon = () => {
      if (pending) return;
      pending = true;
      setImmediate(reread);
    };
    let watcher: FSWatcher | undefined;
    try {
      watcher = watch(this.#isDirectory ? this.#opts.path : dirname(this.#opts.path), { persistent: false }, soon);
      // A watch that fails (the directory removed) leaves the poll to notice what follows.
      watcher.on('error', () => watcher?.close());
    } catch {
      watcher = undefined;
    }
    const poll = setInterval(soon, pollMs).unref();
    return () => {
      clearInterval(poll);
      watcher?.close();
    };
  }
}
