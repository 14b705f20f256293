// Connection caps and per-key counts: the pure verdict, the counts it reads, and the descriptor
// warning. A real listener refusing one client's connections beyond its cap while another
// client's go on: test/integration/connection-caps-listener.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectionVerdict, descriptorWarning, KeyedCounts, METRICS_LISTENER_CAPS, softOpenFilesLimit } from '../../src/http/connection-caps.ts';

test('connection caps: the per-client cap is checked first, then the total; 0 means no cap (connectionVerdict)', () => {
  const caps = { total: 10, perClient: 3 };
  assert.equal(connectionVerdict(0, 0, caps), 'accept');
  assert.equal(connectionVerdict(9, 2, caps), 'accept');
  assert.equal(connectionVerdict(9, 3, caps), 'per_client');
  assert.equal(connectionVerdict(10, 3, caps), 'per_client', 'the client over its own cap is the one named');
  assert.equal(connectionVerdict(10, 0, caps), 'total');
  assert.equal(connectionVerdict(1_000_000, 1_000_000, { total: 0, perClient: 0 }), 'accept');
  assert.equal(connectionVerdict(5, 5, { total: 0, perClient: 5 }), 'per_client');
  assert.equal(connectionVerdict(5, 5, { total: 5, perClient: 0 }), 'total');
});

test('connection caps: counts per key are taken up to the limit, given back, and a key holding nothing is forgotten (KeyedCounts)', () => {
  const counts = new KeyedCounts();
  assert.equal(counts.tryAcquire('a', 2), true);
  assert.equal(counts.tryAcquire('a', 2), true);
  assert.equal(counts.tryAcquire('a', 2), false, 'a third is refused');
  assert.equal(counts.tryAcquire('b', 2), true, 'another key has its own count');
  assert.equal(counts.total, 3);
  counts.release('a');
  assert.equal(counts.of('a'), 1);
  assert.equal(counts.tryAcquire('a', 2), true);
  counts.release('a');
  counts.release('a');
  counts.release('a'); // one too many: ignored, never negative
  assert.equal(counts.of('a'), 0);
  assert.equal(counts.total, 1);
  assert.equal(counts.tryAcquire('c', 0), true, 'limit 0: no limit');
});

test('connection caps: start-up warns when the caps let clients take more descriptors than the process may open, naming the flag and a value that fits (descriptorWarning)', () => {
  const caps = { total: 1024, perClient: 0 };
  assert.equal(descriptorWarning(1_048_576, 2, caps, METRICS_LISTENER_CAPS), undefined);
  assert.equal(descriptorWarning(undefined, 2, caps, METRICS_LISTENER_CAPS), undefined, 'limit unknown: no guess');
  assert.equal(descriptorWarning(200, 0, caps, METRICS_LISTENER_CAPS), undefined, 'no proxy listener: nothing to warn about');
  const low = descriptorWarning(1024, 2, caps, METRICS_LISTENER_CAPS);
  // 2 listeners x 1024 x 2 descriptors + the metrics listener's 64 + 64 reserved.
  assert.match(low ?? '', /--max-connections 1024 on 2 proxy listener\(s\) and the metrics listener's 64 may need 4224 file descriptors, above the process limit of 1024: raise the limit \(ulimit -n\) or lower --max-connections to 224$/);
  assert.equal(descriptorWarning(64 + 64 + 4 * 224, 2, { total: 224, perClient: 0 }, METRICS_LISTENER_CAPS), undefined, 'the suggested value fits');
  assert.match(descriptorWarning(4096, 1, { total: 0, perClient: 0 }, METRICS_LISTENER_CAPS) ?? '', /--max-connections is 0 \(no cap\)/);
});

test('connection caps: the descriptor warning counts the metrics listener at its own total, not --max-connections, and never the per-client cap (descriptorWarning)', () => {
  // 1 listener x 1000 x 2 + 64 reserved = 2064: fits 2100 without the metrics listener, and with
  // its 64 (2128) does not. Counted at --max-connections it would need 3064, and 2128 would not fit.
  assert.equal(descriptorWarning(2100, 1, { total: 1000, perClient: 0 }, undefined), undefined, 'metrics listener off');
  assert.match(descriptorWarning(2100, 1, { total: 1000, perClient: 0 }, METRICS_LISTENER_CAPS) ?? '', /may need 2128 file descriptors.* to 986$/);
  assert.equal(descriptorWarning(2128, 1, { total: 1000, perClient: 0 }, METRICS_LISTENER_CAPS), undefined);
  assert.equal(descriptorWarning(2128, 1, { total: 1000, perClient: 1000 }, METRICS_LISTENER_CAPS), undefined, 'a per-client cap bounds one address, never the sum');
});

test('connection caps: the soft open-files limit is read from /proc/self/limits (softOpenFilesLimit)', () => {
  const text = 'Limit                     Soft Limit           Hard Limit           Units     \nMax processes             unlimited            unlimited            processes \nMax open files            1024                 524288               files     \n';
  assert.equal(softOpenFilesLimit(text), 1024);
  assert.equal(softOpenFilesLimit(text.replace('1024 ', 'unlimited ')), undefined);
  assert.equal(softOpenFilesLimit(''), undefined);
});
