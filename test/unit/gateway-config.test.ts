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
  assert.deepEqual(parseBaseUrl(DEFAULT_BASE_URL), { hostname: 'api.openai.com', port: 443, host: 'api.openai.com', basePath: '/v1' });
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
  assert.deepEqual(c.providers[0]!.key, { env: 'UPSTREAM_API_KEY' });
});

test('UPSTREAM_API_KEY_FILE enables the gateway with a file key reference', () => {
  const c = parseGatewayEnv({ UPSTREAM_API_KEY_FILE: '/run/secrets/key' });
  assert.equal(c.enabled, true);
  assert.deepEqual(c.providers[0]!.key, { file: '/run/secrets/key' });
});

test('MODEL_GATEWAY_ENABLED=true enables the gateway without a key', () => {
  const c = parseGatewayEnv({ MODEL_GATEWAY_ENABLED: 'true' });
  assert.equal(c.enabled, true);
  assert.equal(c.providers[0]!.key, undefined);
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
