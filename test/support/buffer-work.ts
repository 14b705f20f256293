// Work counted, not timed: a test that a parser's cost stays linear in its input counts the bytes
// it searches and copies, as a test timed on a shared machine fails under load.
/**
 * The bytes searched (Buffer's indexOf), copied (copy, concat) and decoded into strings (toString, as
 * a scan of the text reads them) while `feed` runs, counted by wrapping Buffer's indexOf, copy,
 * concat and toString for its duration (synchronous: nothing else runs meanwhile).
 */
export function bufferWork(feed: () => void): { searched: number; copied: number; decoded: number } {
  const counts = { searched: 0, copied: 0, decoded: 0 };
  const { indexOf, copy, toString } = Buffer.prototype;
  const { concat } = Buffer;
  Buffer.prototype.indexOf = function (this: Buffer, value: string | number | Uint8Array, from?: number | BufferEncoding, encoding?: BufferEncoding) {
    const found = indexOf.call(this, value, from as number, encoding);
    const begin = typeof from === 'number' ? from : 0;
    // Up to the end of the match (its length in bytes), or the whole buffer when there is none.
    const length = typeof value === 'number' ? 1 : typeof value === 'string' ? Buffer.byteLength(value, encoding) : value.length;
    counts.searched += (found < 0 ? this.length : found + length) - begin;
    return found;
  } as typeof indexOf;
  Buffer.prototype.copy = function (this: Buffer, target: Uint8Array, targetStart?: number, sourceStart?: number, sourceEnd?: number) {
    const n = copy.call(this, target, targetStart, sourceStart, sourceEnd);
    counts.copied += n;
    return n;
  };
  Buffer.prototype.toString = function (this: Buffer, encoding?: BufferEncoding, start?: number, end?: number) {
    const text = toString.call(this, encoding, start, end);
    counts.decoded += text.length;
    return text;
  };
  Buffer.concat = (list: readonly Uint8Array[], total?: number) => {
    const joined = concat(list, total);
    counts.copied += joined.length;
    return joined;
  };
  try {
    feed();
  } finally {
    Object.assign(Buffer.prototype, { indexOf, copy, toString });
    Buffer.concat = concat;
  }
  return counts;
}

