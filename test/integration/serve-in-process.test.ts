// startServe serves the proxy in the test's own process, or refuses, saying why: it never starts
// the bundle instead, so a test knows which it tested (test/support/serve-in-process.ts). The
// test files that start the bundle are listed (test/support/process-tests.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { differenceFromTheBundle, startServe } from '../support/serve-in-process.ts';
import { makeTestPki } from '../support/tls.ts';

test('startServe refuses an environment with a variable node reads at start (NODE_TLS_REJECT_UNAUTHORIZED, NODE_OPTIONS), naming it and the way to the bundle, and starts nothing', async () => {
  for (const name of ['NODE_TLS_REJECT_UNAUTHORIZED', 'NODE_OPTIONS']) {
    await assert.rejects(
      startServe({ env: { [name]: '0', GIT_HOST_A: 'git.example.test', GIT_HOST_A_TOKEN: 'tok' } }),
      new RegExp(`^Error: startServe: ${name} is read by node only when a process starts, .*start the bundle \\(startProxy\\) and list the test file in test/support/process-tests\\.ts$`),
    );
  }
});

test('startServe refuses a NODE_EXTRA_CA_CERTS this process does not trust, and serves one it does; with no CA trusted it says to run the file through scripts/test.mjs', async (t) => {
  const other = makeTestPki('other');
  const same = makeTestPki();
  t.after(() => {
    other.cleanup();
    same.cleanup();
  });
  await assert.rejects(startServe({ env: { NODE_EXTRA_CA_CERTS: other.caFile, GIT_HOST_A: 'git.example.test', GIT_HOST_A_TOKEN: 'tok' } }), /^Error: startServe: NODE_EXTRA_CA_CERTS names .*, a CA this test process does not trust /);
  const proxy = await startServe({ env: { NODE_EXTRA_CA_CERTS: same.caFile, GIT_HOST_A: 'git.example.test', GIT_HOST_A_TOKEN: 'tok' } });
  assert.equal((await proxy.stop()).code, 0);
  assert.match(differenceFromTheBundle({ NODE_EXTRA_CA_CERTS: same.caFile }, undefined) ?? '', /this test process trusts no extra CA: run the file through node scripts\/test\.mjs/);
  assert.equal(differenceFromTheBundle({ GIT_HOST_A: 'git.example.test' }, undefined), undefined, 'no CA asked for: nothing to trust');
});
