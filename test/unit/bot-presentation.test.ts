// Two different bot tokens on one request (Authorization and x-api-key) are refused before any
// verification, with the message that says so: never verified as the literal word "conflict".
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { botPresentation } from '../../src/gateway/authenticate.ts';

const refusalMessage = (p: ReturnType<typeof botPresentation>) => ('ok' in p && !p.ok ? p.refusal.message : undefined);

test('two bot tokens refused: Authorization and x-api-key that differ are a conflict, refused naming it, not a token to verify', () => {
  const p = botPresentation({ headers: { authorization: 'Bearer a.b.c', 'x-api-key': 'd.e.f' }, rawHeaders: ['Authorization', 'Bearer a.b.c', 'x-api-key', 'd.e.f'] }, true);
  assert.match(refusalMessage(p) ?? '', /two different bot tokens/);
});

test('two bot tokens refused: one header twice is a conflict too; the same token in both headers is one token', () => {
  const twice = botPresentation({ headers: { 'x-api-key': 'a.b.c' }, rawHeaders: ['x-api-key', 'a.b.c', 'X-Api-Key', 'd.e.f'] }, true);
  assert.match(refusalMessage(twice) ?? '', /two different bot tokens/);
  assert.deepEqual(botPresentation({ headers: { authorization: 'Bearer a.b.c', 'x-api-key': 'a.b.c' }, rawHeaders: ['Authorization', 'Bearer a.b.c', 'x-api-key', 'a.b.c'] }, true), { token: 'a.b.c' });
});

test('two bot tokens refused: a token that is the word "conflict" is one token, passed on to be verified', () => {
  assert.deepEqual(botPresentation({ headers: { authorization: 'Bearer conflict' }, rawHeaders: ['Authorization', 'Bearer conflict'] }, true), { token: 'conflict' });
  assert.deepEqual(botPresentation({ headers: { 'x-api-key': 'conflict' }, rawHeaders: ['x-api-key', 'conflict'] }, true), { token: 'conflict' });
});
