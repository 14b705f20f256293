import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DEFAULT_BASE_URL,
  DEFAULT_PROVIDER,
  parseAllowedModels,
  parseBaseUrl,
  parseGatewayEnv,
} from '../../src/gateway/config.ts';
import { MIN_SIGNING_KEY_BYTES } from '../../src/auth/jwt.ts';

// ---- parseBaseUrl ----

test('the default base URL is api.openai.com on 443 under /v1', () => {
  assert.equal(DEFAULT_BASE_URL, 'https://api.openai.com/v1');
  assert.deepEqual(parseBaseUrl(DEFAULT_BASE_URL), { hostname: 'api.openai.com', port: 443, host: 'api.openai.com', basePath: '/v1', plainHttp: false });
});

test('trailing slashes are stripped from the base path', () => {
  assert.equal(parseBaseUrl('https://api.openai.com/v1/').basePath, '/v1');
  assert.equal(parseBaseUrl('https://api.openai.com/v1//').basePath, '/v1');
  assert.equal(parseBaseUrl('https://api.openai.com/').basePath, '');
  assert.equal(parseBaseUrl('https://api.openai.com').basePath, '');
});

test('a deeper base path is kept', () => {
  assert.equal(parseBaseUrl('https://llm.example.com/openai/v1').basePath, '/openai/v1');
});

test('a custom port is kept in port and in the Host value', () => {
  assert.deepEqual(parseBaseUrl('https://llm.example.com:8443/v1'), {
    hostname: 'llm.example.com',
    port: 8443,
    host: 'llm.example.com:8443',
    basePath: '/v1',
    plainHttp: false,
  });
});

test('an explicit :443 is the default port, not part of the Host value', () => {
  const base = parseBaseUrl('https://api.openai.com:443/v1');
  assert.equal(base.port, 443);
  assert.equal(base.host, 'api.openai.com');
});

test('an IPv6 base URL has a bare hostname and a bracketed Host value', () => {
  const base = parseBaseUrl('https://[::1]:8443/v1');
  assert.equal(base.hostname, '::1');
  assert.equal(base.host, '[::1]:8443');
});

function assertBaseUrlRejected(text: string, why: RegExp): void {
  assert.throws(
    () => parseBaseUrl(text),
    (err: Error) => {
      assert.match(err.message, /^UPSTREAM_BASE_URL: /);
      assert.match(err.message, why);
      return true;
    },
    text,
  );
}

test('a plain http base URL is rejected', () => {
  assertBaseUrlRejected('http://api.openai.com/v1', /https/);
});

test('a base URL with user info is rejected', () => {
  assertBaseUrlRejected('https://user:pass@api.openai.com/v1', /credentials/);
  assertBaseUrlRejected('https://user@api.openai.com/v1', /credentials/);
});

test('a base URL with a query or fragment is rejected, even an empty one', () => {
  for (const text of ['https://api.openai.com/v1?api-version=1', 'https://api.openai.com/v1#x', 'https://api.openai.com/v1?', 'https://api.openai.com/v1#']) {
    assertBaseUrlRejected(text, /query or fragment/);
  }
});

test('text that is not a URL is rejected', () => {
  for (const text of ['api.openai.com/v1', '', 'https://', '/v1']) assertBaseUrlRejected(text, /not a URL/);
});

// ---- parseAllowedModels ----

test('the allowlist is split on commas and trimmed', () => {
  assert.deepEqual(parseAllowedModels(' gpt-4.1 ,gpt-4.1-mini,  o3 '), ['gpt-4.1', 'gpt-4.1-mini', 'o3']);
});

test('duplicate and empty allowlist entries are dropped, order kept', () => {
  assert.deepEqual(parseAllowedModels('b,a,,b, ,a'), ['b', 'a']);
});

test('an unset or empty allowlist is empty', () => {
  assert.deepEqual(parseAllowedModels(undefined), []);
  assert.deepEqual(parseAllowedModels(''), []);
  assert.deepEqual(parseAllowedModels(' , '), []);
});

test('model IDs with provider-style characters are accepted', () => {
  assert.deepEqual(parseAllowedModels('meta-llama/Llama-3.1-8B,ft:gpt-4o:org@x'), ['meta-llama/Llama-3.1-8B', 'ft:gpt-4o:org@x']);
});

test('a malformed model ID is rejected, naming the variable and the ID', () => {
  for (const bad of ['gpt 4', '-gpt', 'gpt?x', 'gpt\nx', 'a'.repeat(129)]) {
    assert.throws(
      () => parseAllowedModels(`gpt-4.1,${bad}`),
      (err: Error) => {
        assert.match(err.message, /^UPSTREAM_ALLOWED_MODELS: /);
        assert.ok(err.message.includes(`"${bad}"`), err.message);
        return true;
      },
      JSON.stringify(bad),
    );
  }
});

// ---- parseGatewayEnv ----

/** The one provider of the UPSTREAM_* shorthand. */
const one = (env: NodeJS.ProcessEnv) => parseGatewayEnv({ MODEL_GATEWAY_ENABLED: 'true', ...env }).providers[0]!;

test('UPSTREAM_API_KEY enables the gateway with an env key reference', () => {
  const c = parseGatewayEnv({ UPSTREAM_API_KEY: 'sk-x' });
  assert.equal(c.enabled, true);
  assert.deepEqual(c.providers[0]!.credential, { type: 'key', key: { env: 'UPSTREAM_API_KEY' } });
});

test('UPSTREAM_API_KEY_FILE enables the gateway with a file key reference', () => {
  const c = parseGatewayEnv({ UPSTREAM_API_KEY_FILE: '/run/secrets/key' });
  assert.equal(c.enabled, true);
  assert.deepEqual(c.providers[0]!.credential, { type: 'key', key: { file: '/run/secrets/key' } });
});

test('MODEL_GATEWAY_ENABLED=true enables the gateway without a key', () => {
  const c = parseGatewayEnv({ MODEL_GATEWAY_ENABLED: 'true' });
  assert.equal(c.enabled, true);
  assert.deepEqual(c.providers[0]!.credential, { type: 'key', key: undefined });
});

test('without a key or MODEL_GATEWAY_ENABLED=true the gateway is disabled', () => {
  for (const env of [{}, { MODEL_GATEWAY_ENABLED: 'false' }, { MODEL_GATEWAY_ENABLED: '1' }, { UPSTREAM_API_KEY: '' }, { UPSTREAM_ALLOWED_MODELS: 'gpt-4.1' }]) {
    assert.equal(parseGatewayEnv(env).enabled, false, JSON.stringify(env));
  }
});

test('setting both UPSTREAM_API_KEY and UPSTREAM_API_KEY_FILE is an error naming both', () => {
  assert.throws(
    () => parseGatewayEnv({ UPSTREAM_API_KEY: 'sk-x', UPSTREAM_API_KEY_FILE: '/k' }),
    (err: Error) => err.message.includes('UPSTREAM_API_KEY and UPSTREAM_API_KEY_FILE') && !err.message.includes('sk-x'),
  );
});

test('the provider defaults to openai', () => {
  assert.equal(DEFAULT_PROVIDER, 'openai');
  assert.equal(one({}).name, 'openai');
  assert.equal(one({}).kind, 'openai');
});

test('a valid UPSTREAM_PROVIDER is used', () => {
  assert.equal(one({ UPSTREAM_PROVIDER: 'azure_eu-1' }).name, 'azure_eu-1');
});

test('a malformed UPSTREAM_PROVIDER is rejected naming the variable', () => {
  for (const bad of ['OpenAI', '-x', 'a b', 'a/b', 'a'.repeat(65)]) {
    assert.throws(() => parseGatewayEnv({ UPSTREAM_PROVIDER: bad }), /^Error: UPSTREAM_PROVIDER: /, bad);
  }
});

test('the base URL and allowlist come from the environment, with defaults', () => {
  const dflt = one({});
  assert.deepEqual(dflt.upstream, parseBaseUrl(DEFAULT_BASE_URL));
  assert.deepEqual(dflt.models, []);
  const custom = one({ UPSTREAM_BASE_URL: 'https://llm.example.com/openai/v1', UPSTREAM_ALLOWED_MODELS: 'a,b' });
  assert.equal(custom.upstream.basePath, '/openai/v1');
  assert.deepEqual(custom.models, ['a', 'b']);
});

test('organization and project are read, and absent when unset', () => {
  const c = one({ UPSTREAM_ORGANIZATION: 'org-1', UPSTREAM_PROJECT: 'proj-1' });
  assert.equal(c.organization, 'org-1');
  assert.equal(c.project, 'proj-1');
  const none = one({});
  assert.equal(none.organization, undefined);
  assert.equal(none.project, undefined);
});

test('organization or project with CR, LF or other control characters is rejected naming the variable', () => {
  for (const name of ['UPSTREAM_ORGANIZATION', 'UPSTREAM_PROJECT']) {
    for (const bad of ['org\r\nX-Evil: 1', 'org\n', 'org\0', 'org\tx']) {
      assert.throws(() => parseGatewayEnv({ [name]: bad }), new RegExp(`^Error: ${name}: `), `${name}: ${JSON.stringify(bad)}`);
    }
  }
});

test('a signing key shorter than 32 bytes is rejected', () => {
  assert.equal(MIN_SIGNING_KEY_BYTES, 32);
  assert.throws(() => parseGatewayEnv({ MODEL_PROXY_SIGNING_KEY: 'x'.repeat(31) }), /^Error: MODEL_PROXY_SIGNING_KEY: .*32 bytes/);
});

test('a signing key of at least 32 bytes becomes a Buffer of its UTF-8 bytes', () => {
  const text = 'k'.repeat(32);
  const c = parseGatewayEnv({ MODEL_PROXY_SIGNING_KEY: text });
  assert.ok(Buffer.isBuffer(c.signingKey));
  assert.deepEqual(c.signingKey, Buffer.from(text, 'utf8'));
});

test('without a signing key the gateway is in network-policy mode (signingKey undefined)', () => {
  assert.equal(parseGatewayEnv({}).signingKey, undefined);
});

test('UPSTREAM_CA_FILE is passed through, empty meaning none', () => {
  assert.equal(one({ UPSTREAM_CA_FILE: '/etc/ca.pem' }).caFile, '/etc/ca.pem');
  assert.equal(one({ UPSTREAM_CA_FILE: '' }).caFile, undefined);
});

test('a base URL error never echoes a password given in the URL', () => {
  assert.throws(() => parseBaseUrl('https://user:hunter2@api.example/v1'), (err: Error) => {
    assert.match(err.message, /UPSTREAM_BASE_URL: "https:\/\/\*\*\*@api\.example\/v1" must not carry credentials/);
    assert.doesNotMatch(err.message, /hunter2/);
    return true;
  });
});

// ---- the providers file ----

const FILE = 'providers.json';
const providersOf = (doc: unknown, env: NodeJS.ProcessEnv = {}) => parseGatewayEnv(env, { text: typeof doc === 'string' ? doc : JSON.stringify(doc), name: FILE });
const OPENAI = { name: 'openai', kind: 'openai', baseUrl: 'https://api.openai.com/v1', keyFile: '/run/openai/key', models: ['gpt-5', 'gpt-5-mini'], organization: 'org-1', project: 'proj_1' };
const ANTHROPIC = { name: 'anthropic', kind: 'anthropic', keyEnv: 'ANTHROPIC_UPSTREAM_KEY', models: ['claude-sonnet-4-5'], caFile: '/etc/ca.pem' };

test('a providers file with every field is read: kind, base URL (default per kind), key, models, organization, project, CA', () => {
  const c = providersOf({ providers: [OPENAI, ANTHROPIC] });
  assert.equal(c.enabled, true);
  assert.deepEqual(
    c.providers.map((p) => ({ name: p.name, kind: p.kind, host: p.upstream.host, basePath: p.upstream.basePath, key: p.credential.type === 'key' ? p.credential.key : p.credential, models: p.models, organization: p.organization, project: p.project, caFile: p.caFile })),
    [
      { name: 'openai', kind: 'openai', host: 'api.openai.com', basePath: '/v1', key: { file: '/run/openai/key' }, models: ['gpt-5', 'gpt-5-mini'], organization: 'org-1', project: 'proj_1', caFile: undefined },
      { name: 'anthropic', kind: 'anthropic', host: 'api.anthropic.com', basePath: '', key: { env: 'ANTHROPIC_UPSTREAM_KEY' }, models: ['claude-sonnet-4-5'], organization: undefined, project: undefined, caFile: '/etc/ca.pem' },
    ],
  );
});

test('every mistake in a providers file stops start-up naming the file and the field', () => {
  const cases: [unknown, RegExp][] = [
    ['{', /^providers\.json: \(file\): not valid JSON/],
    [[], /^providers\.json: \(file\): must be a JSON object with a "providers" array/],
    [{ providers: [], extra: 1 }, /^providers\.json: extra: unknown field/],
    [{ providers: [] }, /^providers\.json: providers: must be a non-empty array/],
    [{ providers: ['x'] }, /^providers\.json: providers\[0\]: must be an object/],
    [{ providers: [{ ...ANTHROPIC, keyfile: 'x' }] }, /^providers\.json: providers\[0\]\.keyfile: unknown field/],
    [{ providers: [{ ...ANTHROPIC, name: undefined }] }, /^providers\.json: providers\[0\]\.name: is required/],
    [{ providers: [{ ...ANTHROPIC, name: 'Anthropic' }] }, /^providers\.json: providers\[0\]\.name: "Anthropic" must be lower-case/],
    [{ providers: [{ ...ANTHROPIC, kind: 'google' }] }, /^providers\.json: providers\[0\]\.kind: "google" must be one of "openai", "anthropic", "anthropic-vertex", "anthropic-bedrock"/],
    [{ providers: [{ ...ANTHROPIC, kind: 'anthropic-vertex', project: 'proj-1' }] }, /^providers\.json: providers\[0\]\.region: is required for the anthropic-vertex kind/],
    [{ providers: [{ ...ANTHROPIC, kind: 'anthropic-vertex', region: 'us-east5' }] }, /^providers\.json: providers\[0\]\.project: is required for the anthropic-vertex kind/],
    [{ providers: [{ ...ANTHROPIC, region: 'us-east-1' }] }, /^providers\.json: providers\[0\]\.region: the anthropic kind has no region/],
    [{ providers: [{ ...ANTHROPIC, keyEnv: undefined, credential: { type: 'aws-sigv4', accessKeyIdEnv: 'A', secretAccessKeyEnv: 'S' } }] }, /^providers\.json: providers\[0\]\.credential\.region: is required/],
    [{ providers: [{ ...ANTHROPIC, credential: { type: 'google-service-account', keyFile: '/k.json' } }] }, /^providers\.json: providers\[0\]\.credential: give either keyEnv\/keyFile \(a static key\) or credential, not both/],
    [{ providers: [{ ...ANTHROPIC, baseUrl: 'http://llm.svc/v1' }] }, /^providers\.json: providers\[0\]\.baseUrl: "http:\/\/llm\.svc\/v1" must use https \(a provider in the cluster that speaks only http needs "allowPlainHttp": true\)/],
    [{ providers: [{ ...ANTHROPIC, baseUrl: 'http://llm.svc/v1', allowPlainHttp: true }] }, /^providers\.json: providers\[0\]\.credential: would travel in clear over plain http/],
    [{ providers: [{ ...ANTHROPIC, allowCredentialOverPlainHttp: true }] }, /^providers\.json: providers\[0\]\.allowCredentialOverPlainHttp: has no meaning for an https provider/],
    [{ providers: [{ ...ANTHROPIC, allowPlainHttp: 'yes' }] }, /^providers\.json: providers\[0\]\.allowPlainHttp: must be true or false/],
    [{ providers: [{ ...ANTHROPIC, keyHeader: 'Host' }] }, /^providers\.json: providers\[0\]\.keyHeader: must be a lower-case header name/],
    [{ providers: [{ ...ANTHROPIC, keyHeader: 'content-length' }] }, /^providers\.json: providers\[0\]\.keyHeader: must be a lower-case header name/],
    [{ providers: [{ ...ANTHROPIC, keyEnv: undefined, credential: { type: 'vault' } }] }, /^providers\.json: providers\[0\]\.credential\.type: must be one of "google-service-account", "aws-sigv4", "google-metadata", "none", "aws-web-identity"/],
    [{ providers: [{ ...ANTHROPIC, kind: undefined }] }, /^providers\.json: providers\[0\]\.kind: is required/],
    [{ providers: [{ ...ANTHROPIC, keyEnv: undefined }] }, /^providers\.json: providers\[0\]\.keyEnv: exactly one of keyEnv and keyFile is required/],
    [{ providers: [{ ...ANTHROPIC, keyFile: '/k' }] }, /^providers\.json: providers\[0\]\.keyEnv: exactly one of keyEnv and keyFile is required/],
    [{ providers: [{ ...ANTHROPIC, keyEnv: 'NOT-A-NAME' }] }, /^providers\.json: providers\[0\]\.keyEnv: must be an environment variable name/],
    [{ providers: [{ ...ANTHROPIC, models: [] }] }, /^providers\.json: providers\[0\]\.models: must be a non-empty array/],
    [{ providers: [{ ...ANTHROPIC, models: ['ok', 'bad model'] }] }, /^providers\.json: providers\[0\]\.models\[1\]: "bad model" is not a model ID/],
    [{ providers: [{ ...ANTHROPIC, models: ['a', 'a'] }] }, /^providers\.json: providers\[0\]\.models: lists a model twice/],
    [{ providers: [{ ...ANTHROPIC, baseUrl: 'http://api.anthropic.com' }] }, /^providers\.json: providers\[0\]\.baseUrl: "http:\/\/api\.anthropic\.com" must use https/],
    [{ providers: [{ ...OPENAI, organization: 'org\r\nX: 1' }] }, /^providers\.json: providers\[0\]\.organization: must be printable ASCII/],
    [{ providers: [{ ...ANTHROPIC, organization: 'org-1' }] }, /^providers\.json: providers\[0\]\.organization: the anthropic kind has no organization/],
    [{ providers: [{ ...ANTHROPIC, caFile: '' }] }, /^providers\.json: providers\[0\]\.caFile: must be a non-empty string/],
  ];
  for (const [doc, message] of cases) assert.throws(() => providersOf(doc), (err: Error) => message.test(err.message), JSON.stringify(doc));
});

test('a provider name or a model ID configured twice stops start-up naming both places', () => {
  assert.throws(() => providersOf({ providers: [OPENAI, { ...ANTHROPIC, name: 'openai' }] }), /provider "openai" is defined twice \(providers\.json: providers\[0\] and providers\.json: providers\[1\]\)/);
  assert.throws(() => providersOf({ providers: [OPENAI, { ...ANTHROPIC, models: ['claude-sonnet-4-5', 'gpt-5'] }] }), /model "gpt-5" belongs to two providers \(openai and anthropic\)/);
  assert.throws(() => providersOf({ providers: [OPENAI] }, { UPSTREAM_API_KEY: 'k', UPSTREAM_ALLOWED_MODELS: 'gpt-5', UPSTREAM_PROVIDER: 'legacy' }), /model "gpt-5" belongs to two providers \(legacy and openai\)/);
  assert.throws(() => providersOf({ providers: [OPENAI] }, { UPSTREAM_API_KEY: 'k' }), /provider "openai" is defined twice \(UPSTREAM_\* and providers\.json: providers\[0\]\)/);
});

test('the UPSTREAM_* shorthand stands beside a providers file (a legacy route beside the new one), and alone without one', () => {
  const both = providersOf({ providers: [ANTHROPIC] }, { UPSTREAM_API_KEY: 'k', UPSTREAM_ALLOWED_MODELS: 'gpt-4o' });
  assert.deepEqual(both.providers.map((p) => [p.name, p.kind, p.models]), [['openai', 'openai', ['gpt-4o']], ['anthropic', 'anthropic', ['claude-sonnet-4-5']]]);
  assert.deepEqual(providersOf({ providers: [ANTHROPIC] }).providers.map((p) => p.name), ['anthropic'], 'no UPSTREAM_* variable: the file alone');
  assert.equal(providersOf({ providers: [ANTHROPIC] }, { MODEL_GATEWAY_ENABLED: 'true' }).providers.length, 1, 'MODEL_GATEWAY_ENABLED adds no empty provider beside a file');
});

test('a key given twice in one object of a configuration file stops start-up naming it', () => {
  const twice = `{"providers":[{"name":"a","kind":"anthropic","keyEnv":"K","models":["m"],"kind":"openai"}]}`;
  assert.throws(() => providersOf(twice), /^Error: providers\.json: \(file\): the key "kind" appears twice in one object; keep one$/);
});

test('plain http: a provider in the cluster is reached over http only with allowPlainHttp, and carries a credential there only with the second opt-in', () => {
  const none = providersOf({ providers: [{ name: 'vllm', kind: 'openai', baseUrl: 'http://vllm.models.svc:8000/v1', allowPlainHttp: true, credential: { type: 'none' }, models: ['qwen3-coder'] }] }).providers[0]!;
  assert.deepEqual([none.upstream.plainHttp, none.upstream.port, none.upstream.host, none.credential], [true, 8000, 'vllm.models.svc:8000', { type: 'none' }]);
  const keyed = providersOf({ providers: [{ name: 'tgi', kind: 'openai', baseUrl: 'http://tgi.svc/v1', allowPlainHttp: true, allowCredentialOverPlainHttp: true, keyEnv: 'K', models: ['m'] }] }).providers[0]!;
  assert.deepEqual([keyed.upstream.plainHttp, keyed.upstream.port], [true, 80]);
  const https = providersOf({ providers: [{ name: 'o', kind: 'openai', baseUrl: 'https://api.example/v1', allowPlainHttp: true, keyEnv: 'K', models: ['m2'] }] }).providers[0]!;
  assert.equal(https.upstream.plainHttp, false, 'the opt-in allows http, it does not make https plain');
});

// ---- websocket: which provider speaks the Responses API's WebSocket mode ----

const file = (providers: unknown[]) => ({ text: JSON.stringify({ providers }), name: 'providers.json' });
const openai = (extra: Record<string, unknown> = {}) => ({ name: 'openai', kind: 'openai', keyEnv: 'K', models: ['gpt-5.5'], ...extra });

test('websocket: on by default for an openai provider at OpenAI\'s own API, off for any other host or kind; UPSTREAM_WEBSOCKET sets it for the shorthand', () => {
  assert.equal(parseGatewayEnv({ UPSTREAM_API_KEY: 'k' }).providers[0]!.websocket, true);
  assert.equal(parseGatewayEnv({ UPSTREAM_API_KEY: 'k', UPSTREAM_BASE_URL: 'https://llm.internal.example/v1' }).providers[0]!.websocket, false);
  assert.equal(parseGatewayEnv({ UPSTREAM_API_KEY: 'k', UPSTREAM_BASE_URL: 'https://llm.internal.example/v1', UPSTREAM_WEBSOCKET: 'true' }).providers[0]!.websocket, true);
  assert.equal(parseGatewayEnv({ UPSTREAM_API_KEY: 'k', UPSTREAM_WEBSOCKET: 'false' }).providers[0]!.websocket, false);
  assert.throws(() => parseGatewayEnv({ UPSTREAM_API_KEY: 'k', UPSTREAM_WEBSOCKET: 'yes' }), /UPSTREAM_WEBSOCKET: "yes" must be true or false/);
  assert.equal(parseGatewayEnv({}, file([openai()])).providers[0]!.websocket, true);
  assert.equal(parseGatewayEnv({}, file([openai({ baseUrl: 'https://api.openai.com:8443/v1' })])).providers[0]!.websocket, false);
  assert.equal(parseGatewayEnv({}, file([openai({ baseUrl: 'https://proxy.example/v1', websocket: true })])).providers[0]!.websocket, true);
  assert.equal(parseGatewayEnv({}, file([{ name: 'a', kind: 'anthropic', keyEnv: 'K', models: ['claude'] }])).providers[0]!.websocket, false);
});

test('websocket: only the openai kind may say true, a boolean, and one provider at most (the upgrade names no model); two at OpenAI\'s API that say nothing: neither', () => {
  assert.throws(() => parseGatewayEnv({}, file([{ name: 'a', kind: 'anthropic', keyEnv: 'K', models: ['claude'], websocket: true }])), /providers\[0\]\.websocket.*anthropic kind has no WebSocket mode/);
  assert.throws(() => parseGatewayEnv({}, file([openai({ websocket: 'yes' })])), /providers\[0\]\.websocket.*must be true or false/);
  assert.throws(() => parseGatewayEnv({}, file([openai({ websocket: true }), openai({ name: 'other', models: ['o3'], websocket: true })])), /"openai".*and "other".*both set "websocket": true.*keep it on one/);
  const pair = (a: Record<string, unknown>, b: Record<string, unknown>) => parseGatewayEnv({}, file([openai(a), openai({ name: 'other', models: ['o3'], ...b })])).providers.map((p) => p.websocket);
  assert.deepEqual(pair({}, {}), [false, false], 'nothing decides between two');
  assert.deepEqual(pair({}, { websocket: false }), [true, false]);
  assert.deepEqual(pair({}, { websocket: true }), [false, true], 'the one that says so');
  assert.deepEqual(parseGatewayEnv({ UPSTREAM_API_KEY: 'k', UPSTREAM_PROVIDER: 'legacy' }, file([openai()])).providers.map((p) => p.websocket), [false, false]);
});
