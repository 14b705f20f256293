// AWS Signature Version 4 against the published test suite: each case's canonical request,
// string to sign and Authorization header, from its inputs (test/fixtures/sigv4/suite.json).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { amzDate, authorization, canonicalRequest, sha256Hex, stringToSign } from '../../src/gateway/credentials/sigv4.ts';

interface Case {
  name: string;
  method: string;
  path: string;
  query: string;
  headers: [string, string][];
  body: string;
  creq?: string;
  sts?: string;
  authz: string;
}
const suite = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'sigv4', 'suite.json'), 'utf8')) as {
  credentials: { accessKeyId: string; secretAccessKey: string };
  region: string;
  service: string;
  amzDate: string;
  cases: Case[];
};
const scope = { region: suite.region, service: suite.service, amzDate: suite.amzDate };

for (const c of suite.cases) {
  test(`sigv4, AWS test suite ${c.name}: canonical request, string to sign and Authorization as published`, () => {
    const req = { method: c.method, path: c.path, query: c.query, headers: c.headers, payloadHash: sha256Hex(c.body) };
    const creq = canonicalRequest(req);
    if (c.creq !== undefined) assert.equal(creq, c.creq);
    if (c.sts !== undefined) assert.equal(stringToSign(creq, scope), c.sts);
    assert.equal(authorization(req, scope, suite.credentials), c.authz);
  });
}

test('sigv4: the suite covers query sorting, header trimming, UTF-8 in path and query, and a session token', () => {
  const names = suite.cases.map((c) => c.name);
  for (const n of ['get-vanilla-query-order-key', 'get-header-value-trim', 'get-utf8', 'get-vanilla-utf8-query', 'post-sts-header-before']) assert.ok(names.includes(n), n);
});

test('sigv4: a Bedrock model id path, already encoded on the wire, is encoded again in the canonical request (non-S3 rule)', () => {
  const creq = canonicalRequest({ method: 'POST', path: '/model/us.anthropic.claude-haiku-4-5-20251001-v1%3A0/invoke', query: '', headers: [['host', 'bedrock-runtime.us-east-1.amazonaws.com']], payloadHash: sha256Hex('') });
  assert.equal(creq.split('\n')[1], '/model/us.anthropic.claude-haiku-4-5-20251001-v1%253A0/invoke');
});

test('sigv4: X-Amz-Date is the UTC time to the second (amzDate)', () => {
  assert.equal(amzDate(Date.UTC(2015, 7, 30, 12, 36, 0, 123)), '20150830T123600Z');
});
