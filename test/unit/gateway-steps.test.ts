// The pure rules a model call's steps apply, each tested alone: who is asking, what the
// answer is, what the record says, what is charged, how a limit refuses, which cloud scope passes.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { signBotToken } from '../../src/auth/jwt.ts';
import { ERRORS } from '../../src/http/errors.ts';
import { HeldBodies } from '../../src/http/held-bodies.ts';
import { isRelayableStatus, leftoverUpstream } from '../../src/http/lifecycle.ts';
import { botIdentity, botPresentation, revocationRefusal, tokenHeaderHint } from '../../src/gateway/authenticate.ts';
import type { Verification } from '../../src/auth/verifier.ts';
import { secretVerifier } from '../support/tokens.ts';
import { bodyPreflight, RequestBody } from '../../src/gateway/body.ts';
import { answerKind, errorClassForStatus, relayedHeaders } from '../../src/gateway/relay.ts';
import { callFailure, cloudOf, interruption, modelRecord, type ModelCallState } from '../../src/gateway/record.ts';
import { cloudScopeRefusal } from '../../src/gateway/prepare-upstream.ts';
import { retryableFailure } from '../../src/gateway/retry.ts';
import { costUsd } from '../../src/limits/prices.ts';
import { PROTOCOLS } from '../../src/gateway/protocols/table.ts';
import type { CallSummary } from '../../src/gateway/protocols/protocol.ts';
import { chargeFor } from '../../src/limits/charge.ts';
import { carriesLimits } from '../../src/gateway/admit-call.ts';
import { limitRefusal } from '../../src/limits/refusal.ts';
import { newExchange } from '../../src/http/forward.ts';
import { credentialHeaderProblem, secretHeaders } from '../../src/gateway/credentials/source.ts';
import { redactorOf } from '../support/secrets.ts';

const chat = PROTOCOLS.find((p) => p.api === 'chat_completions')!;
const messages = PROTOCOLS.find((p) => p.api === 'messages' && p.kind === 'anthropic')!;
const bedrock = PROTOCOLS.find((p) => p.kind === 'anthropic-bedrock')!;

test('answerKind: the gateway key refused (401, 403), an error body, a compressed body, SSE, an AWS event stream on its route only, JSON, and a status Node cannot write', () => {
  assert.equal(answerKind(401, undefined, 'application/json', chat), 'gateway_key_refused');
  assert.equal(answerKind(403, undefined, 'application/json', chat), 'gateway_key_refused');
  assert.equal(answerKind(429, 'gzip', 'application/json', chat), 'error_body', 'an error is read whole and decoded, whatever its encoding');
  assert.equal(answerKind(500, undefined, 'text/html', chat), 'error_body');
  assert.equal(answerKind(200, 'gzip', 'text/event-stream', chat), 'encoded');
  assert.equal(answerKind(200, 'identity', 'text/event-stream; charset=utf-8', chat), 'sse');
  assert.equal(answerKind(200, undefined, 'application/vnd.amazon.eventstream', bedrock), 'eventstream');
  assert.equal(answerKind(200, undefined, 'application/vnd.amazon.eventstream', chat), 'json', 'an event stream only where the protocol is framed so');
  assert.equal(answerKind(200, undefined, 'application/json', messages), 'json');
  for (const status of [0, 99, 600, 1000]) assert.equal(answerKind(status, undefined, 'application/json', chat), 'bad_status', String(status));
  assert.deepEqual([isRelayableStatus(100), isRelayableStatus(599), isRelayableStatus(0), isRelayableStatus(600)], [true, true, false, false]);
});

test('request end lets go of its upstream: a request done with is cut when its body never ended, given the grace when its body ended but is still queued, and left to Node when it is destroyed, pooled or sent whole (leftoverUpstream)', () => {
  const at = (destroyed: boolean, writableEnded: boolean, writableFinished: boolean) => leftoverUpstream({ destroyed, writableEnded, writableFinished });
  assert.equal(at(false, false, false), 'cut', 'a body still streaming (a push) or still in slices (a call) never ends now');
  assert.equal(at(false, true, false), 'flush', 'ended, its last bytes queued');
  assert.equal(at(false, true, true), 'none', 'sent whole: Node pools the connection');
  assert.equal(at(true, true, true), 'none', 'pooled: Node marks the request destroyed');
  assert.equal(at(true, false, false), 'none', 'destroyed already (a failure, the client gone)');
  assert.equal(at(true, true, false), 'none');
});

test('errorClassForStatus: 429 is rate_limited, other 4xx upstream_4xx, 5xx upstream_5xx', () => {
  assert.deepEqual([429, 400, 404, 500, 529].map(errorClassForStatus), ['rate_limited', 'upstream_4xx', 'upstream_4xx', 'upstream_5xx', 'upstream_5xx']);
});

test('relayedHeaders: a credential echoed in a header is removed by value, credential headers by name, and the correlation id is the gateway\'s', () => {
  const out = relayedHeaders(['Content-Type', 'application/json', 'X-Echo', 'key sk-secret-1', 'Set-Cookie', 'a=b', 'X-Client-Request-Id', 'theirs', 'X-Request-Id', 'req_1'], redactorOf('sk-secret-1'));
  assert.deepEqual(out.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase()), ['content-type', 'x-request-id']);
});

test('retryableFailure: only a connect refused or timed out is sent again; a reset never is (SECURITY rule 28)', () => {
  assert.deepEqual(['connect_refused', 'connect_timeout', 'reset', 'response_timeout', 'tls', 'dns', 'protocol'].map(retryableFailure), [true, true, false, false, false, false, false]);
});

const summary = (over: Partial<CallSummary> = {}): CallSummary => ({ usage: null, usageComplete: false, model: null, finishReason: null, firstTokenAt: null, terminated: false, streamError: null, ...over });

test('interruption: the client, once the call was sent (streamed or not); the upstream or its stall only once the answer began; nothing for a call never sent', () => {
  assert.equal(interruption(undefined, true, true), null);
  assert.equal(interruption('client_aborted', false, false), null, 'never sent: the provider saw nothing');
  assert.equal(interruption('client_aborted', true, false), 'client', 'a non-streamed call cut while the upstream works');
  assert.equal(interruption('client_aborted', true, true), 'client');
  assert.equal(interruption('reset', true, false), null, 'before the answer an upstream failure is an error answer (502)');
  assert.equal(interruption('reset', true, true), 'upstream');
  assert.equal(interruption('truncated', true, true), 'upstream');
  assert.equal(interruption('idle_timeout', true, true), 'idle_timeout');
});

test('callFailure: a client that hangs up after the protocol\'s end event left a complete call; before it, a cut one', () => {
  assert.equal(callFailure('client_aborted', summary({ terminated: true })), undefined);
  assert.equal(callFailure('client_aborted', summary({ terminated: false })), 'client_aborted');
  assert.equal(callFailure('reset', summary({ terminated: true })), 'reset', 'only the client\'s leaving is forgiven');
  assert.equal(callFailure('client_aborted', undefined), 'client_aborted');
});

test('cloudOf: the cloud of a credential source, for the record', () => {
  assert.deepEqual((['key', 'none', 'aws-sigv4', 'aws-web-identity', 'google-service-account', 'google-metadata'] as const).map(cloudOf), [null, null, 'aws', 'aws', 'google', 'google']);
});

function state(over: Partial<ModelCallState> = {}): ModelCallState {
  return {
    requestId: 'r-1', method: 'POST', target: '/v1/chat/completions?x=secret', startedAt: 0, trace: undefined, span: undefined, api: 'chat_completions',
    identity: { instanceId: 'bot-1', workflow: 'wf', runId: 'run-1' }, provider: undefined, model: 'gpt-test', refusedModel: null,
    usageExpected: true, stream: false, relaying: false, summary: undefined, attempts: 0, retries: 0, rateLimited: 0,
    upstreamRequestId: undefined, bytesIn: 10, limit: null, exchange: newExchange(), ...over,
  };
}

test('modelRecord: the record of a refused call has no usage, no interruption and no charge; the path loses its query', () => {
  const rec = modelRecord(state(), { status: 400, error: 'invalid_json' }, undefined, 12.5);
  assert.deepEqual([rec.status, rec.error, rec.usage_complete, rec.interrupted, rec.charged_usd, rec.charge_estimated, rec.path, rec.duration_ms], [400, 'invalid_json', null, null, null, null, '/v1/chat/completions', 12.5]);
  assert.deepEqual([rec.instance_id, rec.workflow, rec.run_id], ['bot-1', 'wf', 'run-1']);
});

test('modelRecord: usage_complete is null where no usage is expected (catalog, token counts) and false for a success that reported none', () => {
  assert.equal(modelRecord(state({ usageExpected: false, attempts: 1 }), { status: 200, error: undefined }, undefined, 1).usage_complete, null);
  assert.equal(modelRecord(state({ attempts: 1 }), { status: 200, error: undefined }, undefined, 1).usage_complete, false);
  assert.equal(modelRecord(state({ attempts: 1, summary: summary({ usageComplete: true }) }), { status: 200, error: undefined }, undefined, 1).usage_complete, true);
});

test('modelRecord: a client that left after [DONE] is recorded complete; one that left mid-answer is recorded cut, with the failure as its error', () => {
  const done = newExchange();
  done.failure = 'client_aborted';
  const complete = modelRecord(state({ attempts: 1, relaying: true, stream: true, exchange: done, summary: summary({ terminated: true }) }), { status: 200, error: undefined }, undefined, 1);
  assert.deepEqual([complete.interrupted, complete.error], [null, null]);
  const cut = modelRecord(state({ attempts: 1, relaying: true, stream: true, exchange: done, summary: summary() }), { status: 200, error: undefined }, undefined, 1);
  assert.deepEqual([cut.interrupted, cut.error], ['client', 'client_aborted']);
  const plain = modelRecord(state({ attempts: 1, exchange: done }), { status: 0, error: undefined }, { tokens: 3, costUsd: 0.1, usd: 0.1, estimated: true, basis: 'worst_case' }, 1);
  assert.deepEqual([plain.interrupted, plain.error, plain.charged_usd, plain.charge_estimated, plain.charge_basis], ['client', 'client_aborted', 0.1, true, 'worst_case']);
});

const usageOf = (inputTokens: number | null, outputTokens: number | null, cachedTokens: number | null = null) => ({ inputTokens, outputTokens, reasoningTokens: null, cachedTokens, cacheWriteTokens: null });
const price = { input: 2, output: 8, cached: undefined, reasoning: undefined, cacheWrite: undefined };
const priced = (input: number, output: number) => costUsd(price, { input, output, reasoning: null, cached: null, cache_write: null })!;
const worst = { inputTokens: 100, outputTokens: 4000, usd: priced(100, 4000) };

test('chargeFor: a call that cannot have cost anything is charged nothing; complete usage is charged as reported', () => {
  const complete = summary({ usageComplete: true, usage: usageOf(100, 50) });
  assert.deepEqual(chargeFor({ summary: complete, bytesIn: 4000, bytesOut: 4000, cut: false, reached: true, status: 429, betweenAttempts: false, streamed: true }, price, worst), { tokens: 0, costUsd: 0, usd: 0, estimated: false, basis: 'error_answer' });
  assert.deepEqual(chargeFor({ summary: complete, bytesIn: 4000, bytesOut: 4000, cut: false, reached: true, status: 200, betweenAttempts: false, streamed: true }, price, worst), { tokens: 150, costUsd: priced(100, 50), usd: priced(100, 50), estimated: false, basis: 'usage' });
});

test('chargeFor: an outage spends nothing: a call no byte of which can have reached the provider (refused connect, DNS, TLS, egress tunnel refused) is charged nothing, cut or not; one cut after its connection was up is charged its worst case', () => {
  const notSent = { summary: undefined, bytesIn: 400, bytesOut: 0, cut: true, reached: false, status: 502, betweenAttempts: false, streamed: false };
  assert.deepEqual(chargeFor(notSent, price, worst), { tokens: 0, costUsd: 0, usd: 0, estimated: false, basis: 'not_sent' });
  assert.deepEqual(chargeFor({ ...notSent, status: 0 }, price, worst).basis, 'not_sent', 'the client left while the connection was being made');
  assert.deepEqual(chargeFor({ ...notSent, betweenAttempts: true, status: 0 }, price, worst).basis, 'not_sent', 'the client left waiting to retry a refused connect');
  assert.deepEqual(chargeFor({ ...notSent, reached: true }, price, worst), { tokens: 4100, costUsd: worst.usd, usd: worst.usd, estimated: true, basis: 'worst_case' }, 'control: reset after the provider may have read it');
});

test('chargeFor: a complete error answer is not billed, nor a call that ended waiting to retry after one; a call cut after it was sent may have been', () => {
  const call = { summary: undefined, bytesIn: 400, bytesOut: 0, cut: false, reached: true, betweenAttempts: false, streamed: false };
  for (const status of [400, 429, 500, 529]) assert.equal(chargeFor({ ...call, status }, price, worst).basis, 'error_answer', String(status));
  assert.equal(chargeFor({ ...call, status: 0, cut: true, betweenAttempts: true }, price, worst).basis, 'error_answer', 'the client left during the wait after a 429');
  assert.equal(chargeFor({ ...call, status: 0, cut: true }, price, worst).basis, 'worst_case', 'the client left while the provider worked');
  assert.equal(chargeFor({ ...call, status: 502, cut: true }, price, worst).basis, 'worst_case', 'a reset after the request was sent');
  assert.equal(chargeFor({ ...call, status: 200 }, price, worst).basis, 'estimate', 'a success without usage');
});

test('chargeFor: a call cut before any of its answer arrived is charged its worst case (the provider finishes a non-streamed generation and bills it)', () => {
  assert.deepEqual(chargeFor({ summary: undefined, bytesIn: 400, bytesOut: 0, cut: true, reached: true, status: 200, betweenAttempts: false, streamed: true }, price, worst), { tokens: 4100, costUsd: worst.usd, usd: worst.usd, estimated: true, basis: 'worst_case' });
  assert.deepEqual(chargeFor({ summary: undefined, bytesIn: 400, bytesOut: 9000, cut: true, reached: true, status: 200, betweenAttempts: false, streamed: false }, price, worst), { tokens: 4100, costUsd: worst.usd, usd: worst.usd, estimated: true, basis: 'worst_case' }, 'a non-streamed answer cut before its end (its usage comes last): the worst case, whatever crossed');
  assert.deepEqual(chargeFor({ summary: undefined, bytesIn: 400, bytesOut: 0, cut: true, reached: true, status: 200, betweenAttempts: false, streamed: true }, undefined, { ...worst, usd: 0 }), { tokens: 4100, costUsd: 0, usd: null, estimated: true, basis: 'worst_case' }, 'no price: the tokens still count');
});

test('chargeFor: a cut stream is charged at least every usage figure it already reported (input from its first event), and at least the bytes / 4 estimate', () => {
  const started = summary({ usage: usageOf(150_000, null) });
  const charge = chargeFor({ summary: started, bytesIn: 400, bytesOut: 800, cut: true, reached: true, status: 200, betweenAttempts: false, streamed: true }, price, worst);
  assert.deepEqual(charge, { tokens: 150_000 + 200, costUsd: priced(150_000, 200), usd: priced(150_000, 200), estimated: true, basis: 'estimate' });
  const noUsage = chargeFor({ summary: summary(), bytesIn: 401, bytesOut: 8, cut: false, reached: true, status: 200, betweenAttempts: false, streamed: true }, price, worst);
  assert.deepEqual(noUsage, { tokens: 101 + 2, costUsd: priced(101, 2), usd: priced(101, 2), estimated: true, basis: 'estimate' }, 'a stream without usage (chat without include_usage): the bytes');
  assert.deepEqual(chargeFor({ summary: summary(), bytesIn: 400, bytesOut: 0, cut: false, reached: true, status: 200, betweenAttempts: false, streamed: true }, undefined, worst), { tokens: 100, costUsd: 0, usd: null, estimated: true, basis: 'estimate' }, 'no price: tokens counted, no money');
});

test('limitRefusal: a rate or concurrency limit is 429 with Retry-After on every protocol; a spent budget is 429 insufficient_quota on OpenAI routes and 402 billing_error on Anthropic ones; a store outage is 503 with Retry-After', () => {
  const rate = limitRefusal({ ok: false, kind: 'concurrency', retryAfterSec: 1, message: 'busy' }, 'anthropic');
  assert.deepEqual([rate.error, rate.headers, rate.message], [ERRORS.limitRateExceeded, { 'retry-after': '1' }, 'busy; retry after 1 s']);
  assert.equal(limitRefusal({ ok: false, kind: 'run_budget', message: 'spent' }, 'openai').error, ERRORS.budgetSpentOpenAi);
  assert.equal(limitRefusal({ ok: false, kind: 'run_budget', message: 'spent' }, 'anthropic').error, ERRORS.budgetSpentAnthropic);
  assert.equal(limitRefusal({ ok: false, kind: 'run_budget', message: 'spent' }, 'anthropic').headers, undefined, 'final: no Retry-After');
  const store = limitRefusal({ ok: false, kind: 'store_unavailable', retryAfterSec: 1, message: 'down' }, 'openai');
  assert.deepEqual([store.error.status, store.headers], [503, { 'retry-after': '1' }]);
  const lost = limitRefusal({ ok: false, kind: 'store_state_lost', retryAfterSec: 1, message: 'lost' }, 'anthropic');
  assert.deepEqual([store.error, lost.error, lost.headers], [ERRORS.limitsStoreUnavailable, ERRORS.limitsStoreStateLost, { 'retry-after': '1' }], 'each cause its own code');
});

test('cloudScopeRefusal: a Vertex path naming another project or region than the provider\'s is refused; the provider\'s own, or no scope in the path, passes', () => {
  const provider = { project: 'p-1', region: 'us-east5', name: 'vertex' } as Parameters<typeof cloudScopeRefusal>[1];
  assert.equal(cloudScopeRefusal(undefined, provider, 'm'), undefined);
  assert.equal(cloudScopeRefusal({ model: 'm', action: 'rawPredict', project: 'p-1', region: 'us-east5' }, provider, 'm'), undefined);
  assert.equal(cloudScopeRefusal({ model: 'm', action: 'invoke' }, provider, 'm'), undefined, 'Bedrock names neither');
  assert.equal(cloudScopeRefusal({ model: 'm', action: 'rawPredict', project: 'p-2', region: 'us-east5' }, provider, 'm')?.error, ERRORS.cloudScopeNotAllowed);
  assert.match(cloudScopeRefusal({ model: 'm', action: 'rawPredict', project: 'p-1', region: 'europe-west1' }, provider, 'm')!.message!, /served in project p-1 and region us-east5/);
});

test('credentialHeaderProblem: a credential header with CR/LF, NUL, DEL or anything outside printable ASCII is named; printable ones pass', () => {
  assert.equal(credentialHeaderProblem(secretHeaders({ authorization: 'Bearer ya29.ok-_~', 'x-amz-date': '20261126T000000Z' })), undefined);
  for (const bad of ['a\r\nb', 'a\nb', 'a\0b', 'a\x7fb', 'a\u00e9b', 'a\u0100b', 'a\tb']) assert.equal(credentialHeaderProblem(secretHeaders({ 'x-goog': 'ok', authorization: `Bearer ${bad}` })), 'authorization', JSON.stringify(bad));
});

test('bodyPreflight: a body that is not JSON, or announced larger than the gateway takes, is refused before a byte of it is read', () => {
  assert.equal(bodyPreflight({ 'content-type': 'text/plain' }, 10), ERRORS.unsupportedMediaType);
  assert.equal(bodyPreflight({ 'content-type': 'application/json', 'content-length': '11' }, 10), ERRORS.bodyTooLarge);
  assert.equal(bodyPreflight({ 'content-type': 'application/json; charset=utf-8', 'content-length': '10' }, 10), undefined);
});

test('RequestBody: release() lets the bytes go; the size stays for the record (SECURITY rule 52)', () => {
  const held = new HeldBodies(1024);
  const hold = held.open();
  hold.holdUpTo(7);
  const body = new RequestBody(Buffer.from('{"a":1}'), hold);
  assert.equal(body.bytes?.length, 7);
  body.release();
  assert.deepEqual([body.bytes, body.size, held.held], [undefined, 7, 0]);
});

test('botIdentity: without a signing key the identity headers are informational; with one, two tokens are refused, not chosen from, and a verified token gives its identity, token id and lowered limits', () => {
  assert.deepEqual(botPresentation({ headers: { 'x-instance-id': 'i-1', 'x-run-id': 'r-1' }, rawHeaders: [] }, false), { ok: true, identity: { instanceId: 'i-1', workflow: null, runId: 'r-1' } });
  const key = randomBytes(32);
  const now = Math.floor(Date.now() / 1000);
  const token = signBotToken({ sub: 'bot-1', workflow: 'wf', run_id: 'run-1', iat: now, exp: now + 60, jti: 'tok-1', limits: { budget_usd: 2 } }, key);
  const verifier = secretVerifier(key, 3600);
  const verify = (presented: ReturnType<typeof botPresentation>) => verifier.verify('bot', { token: (presented as { token?: string }).token }, now) as Verification;
  const two = botPresentation({ headers: { authorization: `Bearer ${token}` }, rawHeaders: ['Authorization', `Bearer ${token}`, 'authorization', `Bearer ${token}`] }, true);
  assert.ok('ok' in two && !two.ok && /two different bot tokens/.test(two.refusal.message!));
  const ok = botIdentity(verify(botPresentation({ headers: { 'x-api-key': token }, rawHeaders: ['x-api-key', token] }, true)), messages);
  assert.deepEqual(ok, { ok: true, identity: { instanceId: 'bot-1', workflow: 'wf', runId: 'run-1', tokenId: 'tok-1', lowered: { budgetUsd: 2, concurrent: undefined, requestsPerMinute: undefined, tokensPerMinute: undefined } } });
  const none = botIdentity(verify(botPresentation({ headers: {}, rawHeaders: [] }, true)), messages);
  assert.ok(!none.ok && none.refusal.message!.includes(tokenHeaderHint(messages)));
  assert.match(tokenHeaderHint(messages), /^as x-api-key/);
  assert.match(tokenHeaderHint(chat), /^as Authorization: Bearer/);
});

test('revocationRefusal: a revoked token is 401 naming why; a deny list that cannot be checked is 503 with Retry-After, never "revoked", naming its cause (unreachable, or lost its state); ok passes', () => {
  assert.equal(revocationRefusal({ kind: 'ok' }), undefined);
  const revoked = revocationRefusal({ kind: 'revoked', reason: 'its run was revoked' })!;
  assert.deepEqual([revoked.error, /its run was revoked/.test(revoked.message!)], [ERRORS.unauthenticated, true]);
  const unavailable = revocationRefusal({ kind: 'unavailable' })!;
  assert.deepEqual([unavailable.error, unavailable.headers], [ERRORS.revocationStoreUnavailable, { 'retry-after': '1' }]);
  const lost = revocationRefusal({ kind: 'state_lost' })!;
  assert.deepEqual([lost.error, lost.headers], [ERRORS.revocationStoreStateLost, { 'retry-after': '1' }]);
  assert.match(lost.error.message, /lost its state.*confirm-store-reset/);
});

test('carriesLimits: an identity carries limits when its token or policy entry lowers any one of them; no claim, or a claim with none set, carries none', () => {
  const who = { instanceId: 'bot', workflow: 'w', runId: 'r' };
  assert.equal(carriesLimits(who), false);
  assert.equal(carriesLimits({ ...who, lowered: {} }), false);
  assert.equal(carriesLimits({ ...who, lowered: { budgetUsd: undefined } }), false);
  assert.equal(carriesLimits({ ...who, lowered: { budgetUsd: 5 } }), true);
  assert.equal(carriesLimits({ ...who, lowered: { concurrent: 1 } }), true);
});

test('botIdentity: a refused service-account token says so and why, and never points at mint-token (its fix is the pod\'s token or the policy)', () => {
  const refused = botIdentity({ ok: false, reason: 'its issuer "https://a" is not --sa-issuer "https://b"', serviceAccount: true }, undefined);
  assert.ok(!refused.ok);
  assert.equal(refused.refusal.message, 'the service-account token was refused: its issuer "https://a" is not --sa-issuer "https://b"');
  const bot = botIdentity({ ok: false, reason: 'bad signature' }, undefined);
  assert.ok(!bot.ok);
  assert.match(bot.refusal.message ?? '', /^the bot token was refused \(bad signature\): send a valid one, from mint-token/);
});
