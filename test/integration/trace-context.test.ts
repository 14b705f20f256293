// W3C trace context through the proxy, on both listeners: a valid traceparent/tracestate
// reaches the upstream (the tracestate without its optional whitespace) and its trace-id and
// parent-id are in the request record; an invalid one reaches no upstream, is recorded as null,
// and the call goes on as if none was sent. The rules one by one: test/unit/trace-context.test.ts.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { startBothListeners, type BothListeners } from '../support/both-listeners.ts';
import { startGitServer, type GitServer } from '../support/git-server.ts';
import { send } from '../support/http-client.ts';
import type { ModelUpstream } from '../support/model-upstream.ts';
import type { LogRecord, ProxyProcess } from '../support/proxy-process.ts';

const TRACE_ID = randomBytes(16).toString('hex');
const PARENT_ID = randomBytes(8).toString('hex');
const TRACEPARENT = `00-${TRACE_ID}-${PARENT_ID}-01`;
const GIT_TOKEN = `ghp_trace${randomBytes(12).toString('hex')}`;

let model: ModelUpstream;
let git: GitServer;
let proxy: ProxyProcess;
let both: BothListeners<GitServer> | undefined;

before(async () => {
  both = await startBothListeners({
    gitUpstream: async (pki) => {
      const server = await startGitServer({ pki, auth: { type: 'bearer', token: GIT_TOKEN } });
      server.createBareRepo('org/repo.git');
      return server;
    },
    env: { GIT_HOST_A_TOKEN: GIT_TOKEN, UPSTREAM_API_KEY: 'sk-trace-test' },
  });
  ({ modelUpstream: model, gitUpstream: git, proxy } = both);
});

after(() => both?.close());

const chat = (headers: Record<string, string>, requestId: string) =>
  send(proxy.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', 'x-client-request-id': requestId, ...headers }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
const refs = (headers: Record<string, string>) => send(proxy.ports.git!, 'GET', `/${git.hostKey}/org/repo.git/info/refs?service=git-upload-pack`, { headers });
const recordOf = (listener: string, match: (r: LogRecord) => boolean) => proxy.waitForRecord((r) => r.event === 'request' && r.listener === listener && match(r));

test('trace context on the model gateway: a valid traceparent and tracestate reach the provider, the tracestate normalised; the record holds the trace-id and parent-id', async () => {
  const r = await chat({ traceparent: TRACEPARENT, tracestate: 'congo=t61rcWkgMzE , rojo=00f067aa0ba902b7' }, 'trace-valid');
  assert.equal(r.status, 200);
  const seen = model.requests.at(-1)!.headers;
  assert.deepEqual([seen.traceparent, seen.tracestate], [TRACEPARENT, 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7']);
  const rec = await recordOf('model', (x) => x.request_id === 'trace-valid');
  assert.deepEqual([rec.trace_id, rec.parent_id], [TRACE_ID, PARENT_ID]);
});

test('trace context on the model gateway: an invalid traceparent is dropped with its tracestate, not an error; the record holds null', async () => {
  const r = await chat({ traceparent: TRACEPARENT.toUpperCase(), tracestate: 'congo=1' }, 'trace-invalid');
  assert.equal(r.status, 200);
  const seen = model.requests.at(-1)!.headers;
  assert.deepEqual([seen.traceparent, seen.tracestate], [undefined, undefined]);
  const rec = await recordOf('model', (x) => x.request_id === 'trace-invalid');
  assert.deepEqual([rec.trace_id, rec.parent_id], [undefined, undefined]);
});

test('trace context on the git proxy: a valid traceparent reaches the git host, an invalid tracestate does not (the traceparent still does); the record holds the ids', async () => {
  const before = git.requests.length;
  assert.equal((await refs({ traceparent: TRACEPARENT, tracestate: 'Congo=1' })).status, 200);
  const seen = git.requests.slice(before).find((q) => q.authorized)!.headers;
  assert.deepEqual([seen.traceparent, seen.tracestate], [TRACEPARENT, undefined]);
  const rec = await recordOf('git', (x) => x.trace_id === TRACE_ID);
  assert.deepEqual([rec.parent_id, rec.status], [PARENT_ID, 200]);
});

test('trace context on the git proxy: without a valid traceparent nothing is forwarded and the record holds null', async () => {
  const before = git.requests.length;
  const recordsBefore = proxy.records().filter((r) => r.event === 'request' && r.listener === 'git').length;
  assert.equal((await refs({ traceparent: `00-${'0'.repeat(32)}-${PARENT_ID}-01`, tracestate: 'congo=1' })).status, 200);
  const seen = git.requests.slice(before).find((q) => q.authorized)!.headers;
  assert.deepEqual([seen.traceparent, seen.tracestate], [undefined, undefined]);
  let n = 0;
  const rec = await recordOf('git', () => ++n > recordsBefore);
  assert.deepEqual([rec.trace_id, rec.parent_id], [undefined, undefined]);
});
