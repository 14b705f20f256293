// Credential files found unusable at start-up and by /healthz (src/run/readiness.ts), and the 503
// messages that name the file or the variable the operator configured; a shared store unreachable
// for longer than its grace.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeSecretRef, envSecret, fileSecret } from '../../src/config/secret.ts';
import { parseGatewayEnv } from '../../src/gateway/config.ts';
import { unusableKeyError } from '../../src/gateway/credentials/static-key.ts';
import { namedCredentialError } from '../../src/git/credentials.ts';
import { parseHostsFile } from '../../src/git/hosts.ts';
import { ERRORS } from '../../src/http/errors.ts';
import { credentialFileWarnings, gitCredentialFiles, modelCredentialFiles, notReadyReason, storeNotReadyReason, unusableFiles } from '../../src/run/readiness.ts';

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'readiness-'));
  test.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('missing credentials found at start-up: a git token file and a model key file that cannot be read are named, with their host and provider', () => {
  const dir = tempDir();
  const token = join(dir, 'git-token');
  const key = join(dir, 'openai-key');
  const hosts = parseHostsFile(JSON.stringify({ hosts: [{ host: 'github.com', auth: 'bearer', tokenFile: token }, { host: 'git.corp.example', auth: 'bearer', tokenEnv: 'CORP_TOKEN' }] }), 'hosts.json');
  const gateway = parseGatewayEnv({ UPSTREAM_BASE_URL: 'https://api.openai.com/v1', UPSTREAM_API_KEY_FILE: key, UPSTREAM_ALLOWED_MODELS: 'gpt-5' });
  const files = [...gitCredentialFiles(hosts), ...modelCredentialFiles(gateway)];
  assert.deepEqual(files.map((f) => [f.listener, f.owner, f.what, f.file]), [['git', 'git host github.com', 'token file', token], ['model', 'provider openai', 'key file', key]]);
  const unusable = unusableFiles(files);
  assert.equal(unusable.length, 2);
  const warnings = credentialFileWarnings(unusable);
  assert.deepEqual(warnings.map((w) => [w.listener, w.host ?? w.provider]), [['git', 'github.com'], ['model', 'openai']]);
  assert.match(warnings[0]!.message, new RegExp(`^git host github.com: its token file ${token} cannot be read, is empty or holds no valid value: the calls that need it are refused \\(503\\), and /healthz answers 503 until it can be read$`));
  assert.match(notReadyReason(unusable) ?? '', new RegExp(`^not ready: git host github.com: its token file ${token} .*; provider openai: its key file ${key} cannot be read`));
});

test('missing credentials found at start-up: once the file is there (or mended), it is usable and readiness has nothing to say', () => {
  const dir = tempDir();
  const key = join(dir, 'key');
  const files = modelCredentialFiles(parseGatewayEnv({ UPSTREAM_BASE_URL: 'https://api.openai.com/v1', UPSTREAM_API_KEY_FILE: key, UPSTREAM_ALLOWED_MODELS: 'gpt-5' }));
  assert.equal(unusableFiles(files).length, 1);
  writeFileSync(key, '\n');
  assert.equal(unusableFiles(files).length, 1, 'an empty file is not a key');
  writeFileSync(key, 'sk-live-1\n');
  assert.deepEqual(unusableFiles(files), []);
  assert.equal(notReadyReason([]), undefined);
});

test('missing credentials found at start-up: a key in an environment variable is no file to check', () => {
  assert.deepEqual(modelCredentialFiles(parseGatewayEnv({ UPSTREAM_BASE_URL: 'https://api.openai.com/v1', UPSTREAM_API_KEY: 'sk-1', UPSTREAM_ALLOWED_MODELS: 'gpt-5' })), []);
});

test('the 503 for an unusable upstream key names the file, not the variable that was set', () => {
  const error = unusableKeyError({ ok: false, reason: 'missing' }, fileSecret('/var/run/secrets/openai/key'));
  assert.equal(error.status, 503);
  assert.equal(error.code, ERRORS.upstreamKeyMissing.code);
  assert.equal(error.message, 'the gateway cannot read its upstream API key from the file /var/run/secrets/openai/key (missing, unreadable or empty): the operator must mount it');
  assert.doesNotMatch(error.message, /UPSTREAM_API_KEY/);
  assert.match(unusableKeyError({ ok: false, reason: 'missing' }, envSecret({}, 'OPENAI_KEY')).message, /the variable OPENAI_KEY is empty or unset/);
  assert.match(unusableKeyError({ ok: false, reason: 'invalid' }, fileSecret('/k')).message, /the upstream API key in the file \/k is not a valid header value/);
});

test('the 503 for an unusable git token names the file, not the variable that was set', () => {
  const error = namedCredentialError(ERRORS.credentialMissing, 'token', { file: '/var/run/secrets/github/token' });
  assert.equal(error.status, 503);
  assert.equal(error.code, ERRORS.credentialMissing.code);
  assert.equal(error.message, 'the proxy cannot read the token of that git host from the file /var/run/secrets/github/token (missing, unreadable or empty): the operator must mount it');
  assert.match(namedCredentialError(ERRORS.credentialMissing, 'username', { env: 'GIT_HOST_A_USERNAME' }).message, /no username is configured for that git host: the variable GIT_HOST_A_USERNAME is empty or unset/);
  assert.match(namedCredentialError(ERRORS.credentialInvalid, 'token', { file: '/t' }).message, /the token configured for that git host in the file \/t cannot be used/);
  assert.equal(namedCredentialError(ERRORS.credentialMissing, 'token', undefined), ERRORS.credentialMissing);
  assert.equal(describeSecretRef({ env: 'X' }), 'the variable X');
});

test('unreachable store leaves the load balancer: the shared store counts once it has been unreachable for the grace (--limits-store-unready-after), not before, never while up, never with a grace of 0 (storeNotReadyReason)', () => {
  const grace = 30_000;
  assert.equal(storeNotReadyReason(undefined, 1_000_000, grace), undefined, 'up');
  assert.equal(storeNotReadyReason(1_000_000, 1_000_000 + grace - 1, grace), undefined, 'down, within the grace');
  const reason = storeNotReadyReason(1_000_000, 1_000_000 + grace + 12_400, grace);
  assert.equal(reason, 'not ready: the limits store has been unreachable for 42 s (--limits-store-unready-after 30 s): model calls and the tokens it checks are refused (503) until it is back');
  assert.equal(storeNotReadyReason(0, 10 ** 12, 0), undefined, '0: never');
});
