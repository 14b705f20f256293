// What the WebSocket test files (responses-socket, socket-frames, socket-endings) set up alike: a
// test PKI, the Responses upstream speaking the WebSocket mode as the recording of Codex 0.169
// shows OpenAI does (responses-socket-upstream.ts), the bot tokens' signing key, and a client
// connected through a gateway once its upstream leg is open.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before } from 'node:test';
import { signBotToken } from '../../src/auth/jwt.ts';
import { eventually } from './eventually.ts';
import { serveResponsesSocket, type FakeSocketConnection, type ResponsesSocketFake } from './responses-socket-upstream.ts';
import { defaultResponses, startResponsesUpstream, type ResponsesUpstream } from './responses-upstream.ts';
import { makeTestPki, type TestPki } from './tls.ts';
import { openSocket, type SocketClient } from './ws-client.ts';

export interface SocketSuite {
  readonly signingKey: Buffer;
  /** The three below are set by the suite's `before`: there from the file's first test on. */
  readonly pki: TestPki;
  readonly upstream: ResponsesUpstream;
  readonly fake: ResponsesSocketFake;
  /** A bot token for `instance`, its run `run-<instance>` unless said, valid for `ttlSec` (600). */
  token(instance: string, o?: { run?: string; ttlSec?: number; extra?: Record<string, unknown> }): string;
  /** A client through the gateway on `port` with `headers` (the bot token among them), once its upstream leg is open: the client, and that leg at the fake. */
  connect(port: number, headers: Record<string, string>): Promise<{ client: SocketClient; conn: FakeSocketConnection }>;
}

/** The suite's fixtures, its before and after hooks registered in the calling file. */
export function socketSuite(): SocketSuite {
  const signingKey = randomBytes(32);
  const fixtures = {} as { pki: TestPki; upstream: ResponsesUpstream; fake: ResponsesSocketFake };
  before(async () => {
    fixtures.pki = makeTestPki();
    fixtures.upstream = await startResponsesUpstream(fixtures.pki, defaultResponses);
    fixtures.fake = serveResponsesSocket(fixtures.upstream.server, fixtures.upstream.requests);
  });
  after(async () => {
    await fixtures.upstream.close();
    fixtures.pki.cleanup();
  });
  return {
    signingKey,
    get pki() {
      return fixtures.pki;
    },
    get upstream() {
      return fixtures.upstream;
    },
    get fake() {
      return fixtures.fake;
    },
    token(instance, o = {}) {
      const now = Math.floor(Date.now() / 1000);
      return signBotToken({ sub: instance, workflow: 'w', run_id: o.run ?? `run-${instance}`, iat: now, exp: now + (o.ttlSec ?? 600), ...o.extra }, signingKey);
    },
    async connect(port, headers) {
      const before = fixtures.fake.connections.length;
      const opened = await openSocket(port, '/v1/responses', headers);
      assert.equal(opened.status, 101, opened.body);
      await eventually('the upstream connection', () => fixtures.fake.connections.length > before, AbortSignal.timeout(60_000));
      return { client: opened.client!, conn: fixtures.fake.connections[before]! };
    },
  };
}
