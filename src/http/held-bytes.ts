// Bytes a relay holds back until they can be looked at whole (a partial event, a partial frame,
// the tail a secret could still end in), shared by the stream redactor and the event-stream
// framer and guard.
//
// They are copied into one buffer that doubles as it fills, so an upstream that writes a byte at
// a time costs a byte (and the doubling's copies) per byte: not a Buffer object per chunk (12.6 MB
// of heap for 64 KiB held in one-byte chunks), nor a join of all that is held at every chunk (its
// square in copying). A lone chunk is held as it is, not copied.
const NOTHING_HELD = Buffer.alloc(0);

/**
 * What is held is the first #length bytes of #buffer; a lone chunk is #buffer itself. (The
 * members' comments are inside their bodies: esbuild keeps a comment before a class member in
 * the bundle, one inside a function it drops.)
 */
export class HeldBytes {
  #buffer: Buffer = NOTHING_HELD;
  #length = 0;

  get length(): number {
    return this.#length;
  }

  byteFromEnd(back: number): number {
    // The byte `back` places from the end of what is held (1: the last), or -1.
    return back <= this.#length ? this.#buffer[this.#length - back]! : -1;
  }

  add(chunk: Buffer): void {
    if (chunk.length === 0) return;
    if (this.#length === 0) {
      this.#buffer = chunk;
      this.#length = chunk.length;
      return;
    }
    const needed = this.#length + chunk.length;
    // A lone chunk's buffer is full (it is the chunk): the first add after it copies into one of our own.
    if (needed > this.#buffer.length) {
      const grown = Buffer.alloc(Math.max(needed, 2 * this.#length, 256));
      this.#buffer.copy(grown, 0, 0, this.#length);
      this.#buffer = grown;
    }
    chunk.copy(this.#buffer, this.#length);
    this.#length = needed;
  }

  bytes(): Buffer {
    // All that is held, as one Buffer: valid until the next `add`; `keep` or `take` leave it as it is, to be handed on.
    return this.#buffer.subarray(0, this.#length);
  }

  keep(rest: Buffer, room = 0): void {
    // Holds `rest` alone (the tail of what `bytes` returned), copied: what was handed on is never
    // written again. `room`: the bytes expected in all, when the caller knows (a frame's length),
    // so that they are copied once, not again at each doubling.
    if (rest.length === 0) this.#buffer = NOTHING_HELD;
    else {
      this.#buffer = Buffer.alloc(Math.max(rest.length, room));
      rest.copy(this.#buffer);
    }
    this.#length = rest.length;
  }

  take(): Buffer {
    // All that is held, and nothing held after.
    const all = this.bytes();
    this.#buffer = NOTHING_HELD;
    this.#length = 0;
    return all;
  }
}
