// What the SSE framer dispatched, seen from the reader's side: the framer keeps no counts of its
// own (nothing in the gateway reads them), so tests put this between it and a protocol's reader.
import type { EventReader, LargeEventConsumer } from '../../src/gateway/sse.ts';

export interface FramerCounts {
  /** Events dispatched with data: those under the cap and those over it, each at its end. */
  events: number;
  /** Whether any event outgrew the framer's cap. */
  oversized: boolean;
}

/** `reader` with the framer's dispatches counted in `counts`; what `reader` sees is unchanged. */
export function countingReader(reader: EventReader): { reader: EventReader; counts: FramerCounts } {
  const counts: FramerCounts = { events: 0, oversized: false };
  return {
    counts,
    reader: {
      event(data) {
        counts.events++;
        reader.event(data);
      },
      largeEvent(): LargeEventConsumer {
        counts.oversized = true;
        const inner = reader.largeEvent();
        return {
          push: (bytes) => inner?.push(bytes),
          end: () => {
            counts.events++;
            inner?.end();
          },
        };
      },
    },
  };
}
