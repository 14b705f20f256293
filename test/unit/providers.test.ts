// Provider selection at run time: the model picks its provider, the provider's kind decides the
// upstream auth and account headers and which routes serve its models.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ProviderConfig } from '../../src/gateway/config.ts';
import { PROTOCOLS } from '../../src/gateway/protocols/table.ts';
import { withCredential } from '../../src/http/headers.ts';
import { Secret } from '../../src/http/secret-value.ts';
import { keyHeader, providerHeaders as headersWith, providersByModel, routesOfKind, type Provider } from '../../src/gateway/providers.ts';

/** The headers for a static key: the account headers, and the key where the kind puts it (keyHeader), as forward.ts adds it. */
const providerHeaders = (cfg: Parameters<typeof headersWith>[0], key: string) => {
  const [name, prefix] = keyHeader(cfg.kind);
  return withCredential(headersWith(cfg), { [name]: new Secret(`${prefix}${key}`) });
};

const config = (name: string, kind: 'openai' | 'anthropic', models: string[]): ProviderConfig => ({
  name,
  kind,
  models,
  upstream: { hostname: `${name}.example`, port: 443, host: `${name}.example`, basePath: '', plainHttp: false },
  credential: { type: 'key', key: { env: 'K' } },
  organization: undefined,
  project: undefined,
  caFile: undefined,
  region: undefined,
  origin: 'test',
  websocket: false,
});
const provider = (c: ProviderConfig): Provider => ({ config: c, agent: undefined as never, credential: undefined as never });

test('the model picks its provider', () => {
  const openai = provider(config('openai', 'openai', ['gpt-5', 'gpt-5-mini']));
  const anthropic = provider(config('anthropic', 'anthropic', ['claude-sonnet-4-5']));
  const byModel = providersByModel([openai, anthropic]);
  assert.equal(byModel.get('gpt-5-mini'), openai);
  assert.equal(byModel.get('claude-sonnet-4-5'), anthropic);
  assert.equal(byModel.get('gpt-4o'), undefined);
});

test('an OpenAI-kind provider gets the key as a bearer token and its organization and project in OpenAI-Organization and OpenAI-Project', () => {
  assert.deepEqual(providerHeaders({ kind: 'openai', organization: 'org-1', project: 'proj_1' }, 'sk-1'), { authorization: 'Bearer sk-1', 'openai-organization': 'org-1', 'openai-project': 'proj_1' });
  assert.deepEqual(providerHeaders({ kind: 'openai', organization: undefined, project: undefined }, 'sk-1'), { authorization: 'Bearer sk-1' });
});

test('an Anthropic-kind provider gets the key in x-api-key, and no account headers', () => {
  assert.deepEqual(providerHeaders({ kind: 'anthropic', organization: 'ignored', project: 'ignored' }, 'sk-ant-1'), { 'x-api-key': 'sk-ant-1' });
});

test('provider headers refuse a key with CR or LF', () => {
  for (const kind of ['openai', 'anthropic'] as const) assert.throws(() => providerHeaders({ kind, organization: undefined, project: undefined }, 'sk\r\nX: 1'), /refusing to set header/);
});

test('the routes that serve a kind are named for a model sent to the wrong route', () => {
  assert.equal(routesOfKind('openai', PROTOCOLS), 'POST /v1/chat/completions or POST /v1/responses');
  assert.equal(routesOfKind('anthropic', PROTOCOLS), 'POST /v1/messages');
});
