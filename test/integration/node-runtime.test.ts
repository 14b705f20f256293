// The process tests run the bundle on the node PROXY_NODE names (npm run test:node-lines sets it to
// each supported line's binary): the child that serves is that binary, not the node running the
// tests, so a pass on a line is a pass of the bundle on that line.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { PROXY_NODE, ROOT, runProxyCommand, startProxy } from '../support/proxy-process.ts';

test('process tests: the bundle runs on the node PROXY_NODE names (this node when unset)', async (t) => {
  const proxy = await startProxy({ env: { GIT_HOST_A: 'git.example.test', GIT_HOST_A_TOKEN: 'tok_node_runtime' }, args: ['--git-auth-listen', '127.0.0.1:0'] });
  t.after(() => proxy.stop('SIGKILL'));
  // The process is alive (it listens): /proc names the binary it runs.
  assert.equal(readlinkSync(`/proc/${proxy.pid}/exe`), realpathSync(PROXY_NODE));
  t.diagnostic(`the bundle ran on ${PROXY_NODE}, ${execFileSync(PROXY_NODE, ['--version'], { encoding: 'utf8' }).trim()}`);
  const r = await runProxyCommand(['--version']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
});
