// Missing credentials found at start-up, on both listeners alike: a git host's token file and a
// provider's key file that cannot be read are named in start-up warnings; /healthz answers 503
// naming them (the git and model listeners each for their own, the metrics listener, which
// Kubernetes probes, for both) until they are mounted; the calls that need them are refused with a
// 503 naming the file. The listeners start anyway: a secret mounted late makes the pod ready
// without a restart.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServe } from '../support/serve-in-process.ts';

async function get(port: number, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text() };
}

test('missing credentials found at start-up: both listeners start, warn naming the file, fail readiness until it can be read, and refuse calls with a 503 naming it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'credential-readiness-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const tokenFile = join(dir, 'github-token');
  const keyFile = join(dir, 'openai-key');
  const hostsFile = join(dir, 'hosts.json');
  writeFileSync(hostsFile, JSON.stringify({ hosts: [{ host: 'git.example', auth: 'bearer', tokenFile }] }));
  const proxy = await startServe({
    env: { UPSTREAM_BASE_URL: 'https://127.0.0.1:9/v1', UPSTREAM_API_KEY_FILE: keyFile, UPSTREAM_ALLOWED_MODELS: 'gpt-5' },
    args: ['--git-auth-listen', '127.0.0.1:0', '--model-gateway-listen', '127.0.0.1:0', '--git-hosts', hostsFile],
    listeners: ['git', 'model'],
  });
  t.after(() => proxy.stop());

  const warnings = proxy.records().filter((r) => r.event === 'warning').map((r) => String(r.message));
  assert.ok(warnings.some((m) => m.startsWith(`git host git.example: its token file ${tokenFile} cannot be read`)), warnings.join('\n'));
  assert.ok(warnings.some((m) => m.startsWith(`provider openai: its key file ${keyFile} cannot be read`)), warnings.join('\n'));

  const git = await get(proxy.ports.git!, '/healthz');
  assert.equal(git.status, 503);
  assert.match(git.body, new RegExp(`^not ready: git host git.example: its token file ${tokenFile} `));
  assert.doesNotMatch(git.body, /openai/);
  const model = await get(proxy.ports.model!, '/healthz');
  assert.equal(model.status, 503);
  assert.match(model.body, new RegExp(`^not ready: provider openai: its key file ${keyFile} `));
  const metrics = await get(proxy.ports.metrics!, '/healthz');
  assert.equal(metrics.status, 503);
  assert.ok(metrics.body.includes(tokenFile) && metrics.body.includes(keyFile), metrics.body);

  const clone = await get(proxy.ports.git!, '/git.example/acme/widgets/info/refs?service=git-upload-pack');
  assert.equal(clone.status, 503);
  assert.ok(clone.body.includes(`the proxy cannot read the token of that git host from the file ${tokenFile}`), clone.body);
  const call = await fetch(`http://127.0.0.1:${proxy.ports.model}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-5', messages: [{ role: 'user', content: 'hi' }] }) });
  assert.equal(call.status, 503);
  const message = ((await call.json()) as { error: { message: string } }).error.message;
  assert.equal(message, `the gateway cannot read its upstream API key from the file ${keyFile} (missing, unreadable or empty): the operator must mount it`);

  // Mounted late: ready without a restart.
  writeFileSync(tokenFile, 'ghp_late\n');
  writeFileSync(keyFile, 'sk-late\n');
  for (const port of [proxy.ports.git!, proxy.ports.model!, proxy.ports.metrics!]) assert.deepEqual(await get(port, '/healthz'), { status: 200, body: 'ok\n' });
});
