// The request-body bytes the process holds at once, under one cap (--max-held-request-bytes):
// one count for everything that keeps a request body in memory while it checks it (today the
// model gateway; the git listener streams pushes and holds none). Each call holds its bytes
// through one BodyHold: a declared Content-Length taken before a byte is read, a chunked body
// counted as it arrives, and everything given back once, when the body is let go or the call
// finishes, whichever comes first. Pure counting: no I/O, no timers.

/** The process's count of request-body bytes held, and its cap. */
export class HeldBodies {
  #held = 0;

  constructor(readonly cap: number) {}

  /** Bytes held right now, by every call together. */
  get held(): number {
    return this.#held;
  }

  /** A call's hold, holding nothing yet: it takes bytes with holdUpTo and gives them back with release. */
  open(): BodyHold {
    return new BodyHold((n) => this.#take(n), (n) => (this.#held -= n));
  }

  /** Takes `n` more bytes if the cap leaves room for them; false (nothing taken) otherwise. */
  #take(n: number): boolean {
    if (this.#held + n > this.cap) return false;
    this.#held += n;
    return true;
  }
}

/** One call's share of the count: what it holds, given back exactly once. */
export class BodyHold {
  #bytes = 0;
  #released = false;

  constructor(
    private readonly take: (n: number) => boolean,
    private readonly giveBack: (n: number) => void,
  ) {}

  /** The bytes this call holds (0 once released). */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Holds `total` bytes in all: a declared length before the body is read, or the size read so
   * far of a body that declared none. Never less than already held. False, holding nothing
   * more, when the process's cap leaves no room for them, or the hold was already released.
   */
  holdUpTo(total: number): boolean {
    if (this.#released) return false;
    if (total <= this.#bytes) return true;
    if (!this.take(total - this.#bytes)) return false;
    this.#bytes = total;
    return true;
  }

  /** Gives everything back; later calls do nothing. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.giveBack(this.#bytes);
    this.#bytes = 0;
  }
}
