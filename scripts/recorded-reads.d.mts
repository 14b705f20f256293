/** One question put to the file system: the method, its arguments, the SHA-256 of its answer. */
export type RecordedRead = [method: string, args: unknown[], answerSha256: string];

export interface Recording<S> {
  /** The system to hand to TypeScript: the same methods, the questions recorded. */
  readonly system: S;
  /** The questions asked so far, each once; null when a call could not be recorded. */
  reads(): RecordedRead[] | null;
}

export function recordReads<S extends object>(system: S, skip: (path: string) => boolean): Recording<S>;
export function sameReads(system: object, reads: readonly RecordedRead[]): boolean;
