// W3C Trace Context (src/http/trace-context.ts, src/http/headers.ts): one test per rule, named
// after it. An invalid header is dropped, never an error.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { allowedRequestHeaders, requestTraceContext } from '../../src/http/headers.ts';
import { parseTraceparent, parseTracestate, readTraceContext, TRACESTATE_MAX_CHARS, TRACESTATE_MAX_MEMBERS } from '../../src/http/trace-context.ts';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const VALID = `00-${TRACE_ID}-${PARENT_ID}-01`;

test('traceparent: the spec\'s own examples parse, sampled or not, into the trace-id and parent-id', () => {
  assert.deepEqual(parseTraceparent(VALID), { traceId: TRACE_ID, parentId: PARENT_ID, sampled: true });
  assert.deepEqual(parseTraceparent(`00-${TRACE_ID}-${PARENT_ID}-00`), { traceId: TRACE_ID, parentId: PARENT_ID, sampled: false });
});

test('traceparent version 00 only: another version, the forbidden ff, or a 00 value with more after it is dropped', () => {
  for (const bad of [`01-${TRACE_ID}-${PARENT_ID}-01`, `ff-${TRACE_ID}-${PARENT_ID}-01`, `01-${TRACE_ID}-${PARENT_ID}-01-extra`, `${VALID}-extra`, `${VALID}x`]) {
    assert.equal(parseTraceparent(bad), undefined, bad);
  }
});

test('traceparent lowercase hex ids: upper-case hex, a non-hex character, or a wrong length drops it', () => {
  for (const bad of [
    `00-${TRACE_ID.toUpperCase()}-${PARENT_ID}-01`,
    `00-${TRACE_ID}-${PARENT_ID.toUpperCase()}-01`,
    `00-${TRACE_ID}-${PARENT_ID}-0A`,
    `00-${TRACE_ID.slice(0, 31)}g-${PARENT_ID}-01`,
    `00-${TRACE_ID.slice(1)}-${PARENT_ID}-01`,
    `00-${TRACE_ID}-${PARENT_ID}1-01`,
    `00_${TRACE_ID}_${PARENT_ID}_01`,
    '',
  ]) {
    assert.equal(parseTraceparent(bad), undefined, bad);
  }
  assert.equal(parseTraceparent(undefined), undefined);
  assert.equal(parseTraceparent([VALID, VALID]), undefined, 'not a string');
});

test('traceparent no all-zero id: a trace-id or a parent-id of zeros drops it', () => {
  assert.equal(parseTraceparent(`00-${'0'.repeat(32)}-${PARENT_ID}-01`), undefined);
  assert.equal(parseTraceparent(`00-${TRACE_ID}-${'0'.repeat(16)}-01`), undefined);
  assert.ok(parseTraceparent(`00-${'0'.repeat(31)}1-${'0'.repeat(15)}1-00`), 'one non-zero digit is enough');
});

test('traceparent sent twice is dropped: Node joins the two fields and the joined value fails the grammar', () => {
  assert.equal(requestTraceContext({ traceparent: `${VALID}, ${VALID}` }), undefined);
});

test('tracestate list members: optional whitespace and empty members are left out, the order kept', () => {
  assert.equal(parseTracestate('rojo=00f067aa0ba902b7,congo=t61rcWkgMzE'), 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE');
  assert.equal(parseTracestate(' rojo=1 ,\t, congo=2\t,,'), 'rojo=1,congo=2');
  assert.equal(parseTracestate('a= leading space kept'), 'a= leading space kept', 'a value may begin with spaces');
  assert.equal(parseTracestate(''), undefined, 'empty: absent');
  assert.equal(parseTracestate(' , ,'), undefined, 'only empty members: absent');
});

test('tracestate key grammar: a simple key or tenant@system, lowercase; anything else drops the whole tracestate', () => {
  for (const good of ['a=1', 'a1_-*/=1', 'tenant1@system=1', '1tenant@sys=1', `${'a'.repeat(256)}=1`, `${'t'.repeat(241)}@${'s'.repeat(14)}=1`]) {
    assert.equal(parseTracestate(good), good, good.slice(0, 40));
  }
  for (const bad of ['A=1', '1abc=1', '=1', 'a b=1', 'a@1sys=1', 'a@b@c=1', `${'a'.repeat(257)}=1`, `${'t'.repeat(242)}@s=1`, `t@${'s'.repeat(15)}=1`, 'novalue', 'ok=1,Bad=2']) {
    assert.equal(parseTracestate(bad), undefined, bad.slice(0, 40));
  }
});

test('tracestate value grammar: 1 to 256 printable characters, no comma or equals sign, not ending in a space', () => {
  assert.equal(parseTracestate(`a=${'v'.repeat(256)}`), `a=${'v'.repeat(256)}`);
  for (const bad of ['a=', `a=${'v'.repeat(257)}`, 'a=b=c', 'a=\u00e9', 'a=x\u007f', 'a=x\ty', 'a=x\r\ny']) {
    assert.equal(parseTracestate(bad), undefined, JSON.stringify(bad));
  }
  assert.equal(parseTracestate('a=x '), 'a=x', 'a trailing space is optional whitespace, not the value');
});

test('tracestate keys unique: a key twice drops the whole tracestate', () => {
  assert.equal(parseTracestate('congo=1,rojo=2,congo=3'), undefined);
});

test('tracestate at most 32 members: 32 pass, 33 drop the whole tracestate', () => {
  const members = (n: number) => Array.from({ length: n }, (_, i) => `k${i}=v`).join(',');
  assert.equal(parseTracestate(members(TRACESTATE_MAX_MEMBERS)), members(32));
  assert.equal(parseTracestate(members(TRACESTATE_MAX_MEMBERS + 1)), undefined);
});

test('tracestate at most 512 characters: 512 pass, 513 (optional whitespace counted) drop the whole tracestate', () => {
  const exactly = (n: number) => `a=${'v'.repeat(254)},b=${'v'.repeat(n - 259)}`;
  assert.equal(exactly(TRACESTATE_MAX_CHARS).length, 512);
  assert.equal(parseTracestate(exactly(512)), exactly(512));
  assert.equal(parseTracestate(exactly(513)), undefined);
  assert.equal(parseTracestate(`${' '.repeat(510)}a=1`), undefined, 'whitespace counts toward the cap');
});

test('tracestate only with a valid traceparent: with an invalid traceparent neither is kept; an invalid tracestate leaves the traceparent', () => {
  assert.equal(readTraceContext('garbage', 'congo=1'), undefined);
  assert.equal(readTraceContext(undefined, 'congo=1'), undefined);
  assert.deepEqual(readTraceContext(VALID, 'BAD=1'), { traceparent: VALID, tracestate: undefined, traceId: TRACE_ID, parentId: PARENT_ID, sampled: true });
  assert.deepEqual(readTraceContext(VALID, 'congo=1'), { traceparent: VALID, tracestate: 'congo=1', traceId: TRACE_ID, parentId: PARENT_ID, sampled: true });
});

test('trace headers forwarded only as judged: valid ones go upstream normalised, invalid ones not at all, on any allowlist', () => {
  const none = () => false;
  assert.deepEqual(allowedRequestHeaders({ traceparent: VALID, tracestate: ' congo=1 , rojo=2' }, none), { traceparent: VALID, tracestate: 'congo=1,rojo=2' });
  assert.deepEqual(allowedRequestHeaders({ traceparent: VALID.toUpperCase(), tracestate: 'congo=1' }, none), {});
  // Even a caller whose allowlist takes every header gets the judged values, never the raw ones.
  assert.deepEqual(allowedRequestHeaders({ traceparent: VALID, tracestate: 'congo=1,congo=2', accept: '*/*' }, () => true), { accept: '*/*', traceparent: VALID });
});

test('trace headers named in Connection are dropped: hop-by-hop like any other, and then not recorded either', () => {
  assert.deepEqual(allowedRequestHeaders({ connection: 'traceparent', traceparent: VALID, tracestate: 'congo=1' }, () => false), {});
  assert.equal(requestTraceContext({ connection: 'traceparent', traceparent: VALID }), undefined);
  assert.deepEqual(allowedRequestHeaders({ connection: 'tracestate', traceparent: VALID, tracestate: 'congo=1' }, () => false), { traceparent: VALID });
});
