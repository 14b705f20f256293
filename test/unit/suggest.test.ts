import assert from 'node:assert/strict';
import { test } from 'node:test';
import { didYouMean } from '../../src/config/suggest.ts';

test('did you mean: the same name in another case first, else the one closest within a third of its length, never a tie (didYouMean)', () => {
  assert.equal(didYouMean('baseURL', ['baseUrl', 'keyEnv']), 'baseUrl');
  assert.equal(didYouMean('instnce-id', ['instance-id', 'run-id']), 'instance-id');
  assert.equal(didYouMean('wrokflow', ['workflow']), 'workflow', 'a swap is one edit');
  assert.equal(didYouMean('zzz', ['model', 'stream']), undefined);
  assert.equal(didYouMean('ab', ['ac', 'ad']), undefined, 'a tie suggests nothing');
});
