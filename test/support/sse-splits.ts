// A stream split in two at every byte offset, checked at the layer a split can change: the
// framer. A protocol's stream reader sees nothing of the bytes but the data of each event the
// framer hands it, in order (and a clock, constant in these tests), so its summary is a function
// of that sequence. Two pushes give the same summary as one whole push when the framer hands
// over the same events, byte for byte, wherever the split falls; the tests check exactly that at
// every offset, and read the summary once from the whole transcript. Each split then costs the
// framer's pass over the bytes and a memcmp per event, not a JSON parse per event: the same
// property, without the work that cannot depend on the split.
import { SseFramer, type EventReader } from '../../src/gateway/sse.ts';

/**
 * The data of each event the framer dispatches for these chunks, as copies. No fixture event is
 * over the framer's cap; one that were would need its own check (its pieces follow the chunks).
 */
export function framedEvents(chunks: readonly Buffer[]): Buffer[] {
  const events: Buffer[] = [];
  const framer = new SseFramer({
    event: (data) => void events.push(Buffer.from(data)),
    largeEvent: () => {
      throw new Error('an event over the framer cap: framedEvents only records events under it');
    },
  });
  for (const chunk of chunks) framer.push(chunk);
  return events;
}

/**
 * The offsets `at` (0 to bytes.length, both included) at which pushing bytes[0, at) and then
 * bytes[at, end) makes the framer dispatch anything but `expected`, byte for byte and in order:
 * an empty list when no split changes the events.
 */
export function splitsThatChangeTheEvents(bytes: Buffer, expected: readonly Buffer[]): number[] {
  let dispatched = 0;
  let differs = false;
  // One reader for every split: it compares each event with the one expected at its place.
  const checker: EventReader = {
    event(data) {
      if (dispatched >= expected.length || !data.equals(expected[dispatched]!)) differs = true;
      dispatched++;
    },
    largeEvent() {
      differs = true;
      return undefined;
    },
  };
  const changed: number[] = [];
  for (let at = 0; at <= bytes.length; at++) {
    dispatched = 0;
    differs = false;
    const framer = new SseFramer(checker);
    framer.push(bytes.subarray(0, at));
    framer.push(bytes.subarray(at));
    // An event over the cap sets `differs` (largeEvent), so `dispatched` counts every event.
    if (differs || dispatched !== expected.length) changed.push(at);
  }
  return changed;
}
