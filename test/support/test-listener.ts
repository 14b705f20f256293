// A listener for tests of the listener itself (caps, timeouts, TLS): startListener with
// loopback port 0, no caps, generous timeouts, a handler answering "ok" and a silent log, each
// replaceable by what the test is about.
import { startListener, type Listener, type ListenerSpec } from '../../src/http/server.ts';

export function startTestListener(spec: Partial<ListenerSpec> = {}): Promise<Listener> {
  return startListener({
    name: 'test',
    flag: 'test-listen',
    address: { host: '127.0.0.1', port: 0 },
    timeouts: { headerMs: 5000, keepAliveMs: 30_000 },
    caps: { total: 0, perClient: 0 },
    log: () => {},
    handle: (_req, res) => void res.end('ok'),
    refuse: (_req, res) => void res.end(),
    ...spec,
  });
}
