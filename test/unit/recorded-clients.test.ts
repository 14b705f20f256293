// The gateway's rules against what real clients send: the requests recorded from Codex, opencode
// and Claude Code (test/fixtures/recorded/, `npm run e2e:agents -- --direct --record`). Every
// recorded request must pass its protocol's checks, and every header the client sent must go
// upstream except the ones the gateway replaces or never forwards on purpose.
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { PROTOCOLS } from '../../src/gateway/protocols/table.ts';
import { checkRequestBody } from '../../src/gateway/check-call.ts';
import { gatewayUpstreamHeaders } from '../../src/gateway/prepare-upstream.ts';
import { routeGatewayRequest } from '../../src/gateway/route.ts';
import { withCredential } from '../../src/http/headers.ts';
import { Secret } from '../../src/http/secret-value.ts';
import { keyHeader } from '../../src/gateway/providers.ts';

const DIR = join(__dirname, '..', 'fixtures', 'recorded');
interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}
const INDEX = JSON.parse(readFileSync(join(DIR, 'index.json'), 'utf8')) as { file: string; agent: string; protocol: string }[];

// The tests below are made from the index: a recording it left out would go untested.
test('the index lists every recording in the directory once, and each agent has recordings', () => {
  const files = readdirSync(DIR).filter((f) => f !== 'index.json').sort();
  assert.deepEqual(INDEX.map((e) => e.file).sort(), files);
  assert.equal(new Set(INDEX.map((e) => e.file)).size, INDEX.length, 'no file listed twice');
  for (const agent of ['codex', 'opencode', 'claude-code']) {
    assert.ok(INDEX.some((e) => e.agent === agent && e.file.startsWith(`${agent}-`)), `a ${agent} recording`);
  }
});

/**
 * Headers the gateway sets itself or, by design, never forwards: the bot's credential, framing,
 * and Claude Code's anthropic-dangerous-direct-browser-access (a CORS opt-in for browser apps,
 * meaningless for a server-side call, so it stays out of the allowlist).
 */
const REPLACED = new Set(['authorization', 'x-api-key', 'host', 'content-length', 'connection', 'accept-encoding', 'x-client-request-id', 'anthropic-dangerous-direct-browser-access']);

for (const entry of INDEX) {
  const rec = JSON.parse(readFileSync(join(DIR, entry.file), 'utf8')) as Recorded;
  const route = routeGatewayRequest(rec.method, rec.url, PROTOCOLS);
  if (!route.ok || route.kind !== 'protocol') {
    test(`recorded ${entry.file}: ${rec.method} ${rec.url} is served`, () => assert.fail(`the ${entry.agent} request's route is not served`));
    continue;
  }

  test(`recorded ${entry.file}: the ${entry.agent} request passes the ${route.protocol.api} checks`, () => {
    const model = rec.body.model as string;
    const checked = checkRequestBody(Buffer.from(JSON.stringify(rec.body)), route.protocol, { allowedModels: new Set([model]), hostedTools: new Set() });
    const maxOutput = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'].map((k) => rec.body[k]).filter((v): v is number => typeof v === 'number');
    assert.deepEqual(checked, { ok: true, model, stream: rec.body.stream === true, ...(maxOutput.length > 0 ? { maxOutputTokens: Math.max(...maxOutput) } : {}) });
  });

  test(`recorded ${entry.file}: every ${entry.agent} header but the replaced ones goes upstream`, () => {
    const [name, prefix] = keyHeader(route.protocol.kind);
    const out = withCredential(gatewayUpstreamHeaders(rec.headers, route.protocol, { host: 'api.example', clientRequestId: 'id-1', provider: { kind: route.protocol.kind, organization: undefined, project: undefined } }), { [name]: new Secret(`${prefix}sk-ours`) });
    const lost = Object.keys(rec.headers).filter((name) => !REPLACED.has(name) && out[name] !== rec.headers[name]);
    assert.deepEqual(lost, []);
    assert.equal(route.protocol.kind === 'openai' ? out.authorization : out['x-api-key'], route.protocol.kind === 'openai' ? 'Bearer sk-ours' : 'sk-ours');
  });
}
