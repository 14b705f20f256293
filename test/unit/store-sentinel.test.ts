// What the store client reads from Redis and its sentinels to follow a failover: the master's
// address a sentinel gives (src/store/sentinel.ts), the role a node says it has, and the error
// replies that are about the node (a replica now, unable to write) rather than the command.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { masterAddress, switchedTo } from '../../src/store/sentinel.ts';
import { nodeStateError, roleOf } from '../../src/store/node.ts';
import { RespError } from '../../src/store/resp.ts';

test('sentinel: get-master-addr-by-name answers [host, port]; a null (an unknown master name), an error or anything else gives no address (masterAddress)', () => {
  assert.deepEqual(masterAddress(['10.0.0.7', '6379']), { host: '10.0.0.7', port: 6379 });
  assert.deepEqual(masterAddress(['credential-proxy-redis-1.credential-proxy-redis-headless.ns.svc', '6380']), { host: 'credential-proxy-redis-1.credential-proxy-redis-headless.ns.svc', port: 6380 });
  for (const reply of [null, new RespError('NOAUTH Authentication required.'), [], ['h'], ['h', '6379', 'x'], ['', '6379'], ['h', '65536'], ['h', '-1'], ['h', 6379], 'OK']) {
    assert.equal(masterAddress(reply as never), undefined, JSON.stringify(reply));
  }
});

test('sentinel: a node is the master only when ROLE says master (roleOf)', () => {
  assert.equal(roleOf(['master', 3129659, [['127.0.0.1', '9001', '3129242']]]), 'master');
  assert.equal(roleOf(['slave', '127.0.0.1', 9000, 'connected', 3167038]), 'slave');
  assert.equal(roleOf(['sentinel', ['mymaster']]), 'sentinel');
  assert.equal(roleOf(new RespError('NOPERM this user has no permissions to run the \'role\' command')), undefined);
  assert.equal(roleOf(null), undefined);
});

test('store errors: READONLY (a demoted master, from a script too) drops the connection for the master; NOREPLICAS, LOADING and MASTERDOWN are the node\'s state; a script\'s own error is the command\'s (nodeStateError)', () => {
  assert.equal(nodeStateError('READONLY You can\'t write against a read only replica. script: 88c9, on @user_script:1.'), 'replica');
  assert.equal(nodeStateError('NOREPLICAS Not enough good replicas to write.'), 'unavailable');
  assert.equal(nodeStateError('LOADING Redis is loading the dataset in memory'), 'unavailable');
  assert.equal(nodeStateError('MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to \'no\'.'), 'unavailable');
  for (const message of ['ERR Error running script (call to f_x): @user_script:1: bad', 'NOSCRIPT No matching script.', 'WRONGTYPE Operation against a key holding the wrong kind of value', 'NOPERM this user has no permissions']) {
    assert.equal(nodeStateError(message), undefined, message);
  }
});

test('sentinel: a +switch-master message moves the master it names to its new address; another master\'s, a malformed one or another channel\'s moves nothing (switchedTo)', () => {
  assert.deepEqual(switchedTo(['message', '+switch-master', 'limits 10.0.0.7 6379 10.0.0.8 6380'], 'limits'), { host: '10.0.0.8', port: 6380 });
  for (const message of [
    ['message', '+switch-master', 'other 10.0.0.7 6379 10.0.0.8 6380'],
    ['message', '+switch-master', 'limits 10.0.0.7 6379 10.0.0.8'],
    ['message', '+switch-master', 'limits 10.0.0.7 6379 10.0.0.8 port'],
    ['message', '+sdown', 'limits 10.0.0.7 6379 10.0.0.8 6380'],
    ['subscribe', '+switch-master', 1],
    new RespError('NOAUTH Authentication required.'),
  ]) {
    assert.equal(switchedTo(message as never, 'limits'), undefined, JSON.stringify(message));
  }
});
