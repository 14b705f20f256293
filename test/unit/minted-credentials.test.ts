// Minted credentials are checked like static keys before they are kept (visible ASCII only): a
// Google access token (service account, metadata server) or an AWS web-identity credential
// (AccessKeyId, SecretAccessKey, SessionToken) with CR/LF, NUL, DEL or a non-ASCII character is
// a failed refresh: reported through onRefresh (logged and counted by its caller) by field name,
// never by value, never kept, and a call gets 502 upstream_credential_failed, never a 500.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { awsWebIdentitySource } from '../../src/gateway/credentials/aws.ts';
import { googleMetadataSource, googleServiceAccountSource } from '../../src/gateway/credentials/google.ts';
import { mintedValueProblem, type MintedSource } from '../../src/gateway/credentials/minted.ts';
import { reveal } from '../../src/http/secret-value.ts';
import { rsaKeyPair } from '../support/test-keys.ts';
import { revealed } from '../support/secrets.ts';

const CALL = { method: 'POST', target: '/v1/chat/completions', host: 'api.example', contentType: 'application/json', body: Buffer.from('{"model":"m"}') };

/** Each class of character a minted value must not hold, inside an otherwise plausible value. */
const BAD: readonly (readonly [string, string])[] = [
  ['CR/LF', 'a\r\nx-injected: 1'],
  ['LF', 'a\nb'],
  ['NUL', 'a\0b'],
  ['DEL', 'a\x7fb'],
  ['a Latin-1 character', 'a\u00e9b'],
  ['a character above U+00FF', 'a\u0100b'],
  ['a space', 'a b'],
];

test('mintedValueProblem: the field holding CR, LF, NUL, DEL, a space, a non-ASCII character or nothing is named; visible ASCII passes', () => {
  for (const [name, bad] of BAD) assert.equal(mintedValueProblem({ AccessKeyId: 'ASIA1', SessionToken: `t${bad}` }), 'SessionToken', name);
  assert.equal(mintedValueProblem({ access_token: '' }), 'access_token');
  assert.equal(mintedValueProblem({ access_token: 'ya29.A0_b-c~d/e+f=' }), undefined);
  assert.equal(mintedValueProblem({ AccessKeyId: 'ASIA1', SecretAccessKey: 'x/y+z', SessionToken: '!~' }), undefined);
});

/** A source of one kind whose next mint gives the fields in `next` (a good value unless changed). */
interface Kind {
  readonly name: string;
  readonly fields: readonly string[];
  make(next: () => Record<string, string>, onRefresh: (o: { ok: true } | { ok: false; reason: string }) => void): MintedSource;
}

const { privateKey } = rsaKeyPair(2048);
const SA_KEY = JSON.stringify({ type: 'service_account', private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), client_email: 'gw@proj.iam.gserviceaccount.com', token_uri: 'https://oauth2.example/token' });
const EXPIRY = Date.UTC(2026, 10, 24, 13);

const KINDS: readonly Kind[] = [
  {
    name: 'google service account',
    fields: ['access_token'],
    make: (next, onRefresh) => googleServiceAccountSource({ readKeyFile: () => SA_KEY, scope: 's', exchange: async () => ({ accessToken: next().access_token!, expiresInSec: 3600 }), onRefresh }),
  },
  {
    name: 'google metadata server',
    fields: ['access_token'],
    make: (next, onRefresh) => googleMetadataSource({ metadataHost: 'md', fetchJson: async () => ({ access_token: next().access_token, expires_in: 3600 }), onRefresh }),
  },
  {
    name: 'aws web identity',
    fields: ['AccessKeyId', 'SecretAccessKey', 'SessionToken'],
    make: (next, onRefresh) =>
      awsWebIdentitySource({
        roleArn: 'arn:aws:iam::123456789012:role/gw',
        readTokenFile: () => 'projected',
        stsEndpoint: 'https://sts.example/',
        region: 'us-east-1',
        service: 'bedrock',
        assume: async () => {
          const f = next();
          // STS's XML as the parser reads it: any character but '<' passes the parser, so the check is what refuses it.
          return { status: 200, body: Buffer.from(`<Credentials><AccessKeyId>${f.AccessKeyId}</AccessKeyId><SecretAccessKey>${f.SecretAccessKey}</SecretAccessKey><SessionToken>${f.SessionToken}</SessionToken><Expiration>${new Date(EXPIRY).toISOString()}</Expiration></Credentials>`) };
        },
        onRefresh,
      }),
  },
];

const GOOD: Record<string, string> = { access_token: 'ya29.good', AccessKeyId: 'ASIAGOOD', SecretAccessKey: 'good/secret+key', SessionToken: 'good-session-token' };

for (const kind of KINDS) {
  for (const field of kind.fields) {
    for (const [name, bad] of BAD) {
      test(`minted credentials (${kind.name}): an answer whose ${field} holds ${name} is a failed refresh, named by field and never by value, not kept; the call gets 502 upstream_credential_failed (mintedValueProblem)`, async () => {
        const value = `${GOOD[field]}${bad}`;
        let next = { ...GOOD, [field]: value };
        const outcomes: ({ ok: true } | { ok: false; reason: string })[] = [];
        const source = kind.make(() => next, (o) => outcomes.push(o));
        const at = EXPIRY - 3600_000;
        const refused = await source.authenticate(CALL, at);
        assert.equal(refused.ok, false);
        assert.ok(!refused.ok && refused.error.code === 'upstream_credential_failed' && refused.error.status === 502, JSON.stringify(refused));
        assert.ok(!refused.ok && refused.reason.includes(`${field} in the answer is not visible ASCII`), !refused.ok ? refused.reason : '');
        assert.equal(outcomes.length, 1);
        assert.ok(!outcomes[0]!.ok && outcomes[0]!.reason.includes(field), 'counted as a failed refresh, naming the field');
        // The value begins with the good one: a reason without the good one holds no part of the value either.
        for (const reason of [refused.ok ? '' : refused.reason, outcomes[0]!.ok ? '' : outcomes[0]!.reason]) assert.ok(!reason.includes(GOOD[field]!), `never the value: ${reason}`);
        // Never kept: the next call fetches again, and a good value serves it.
        next = { ...GOOD };
        const served = await source.authenticate(CALL, at + 1000);
        assert.ok(served.ok, 'a good value is fetched again and used');
        assert.ok(![...served.secrets, ...Object.values(served.headers)].some((v) => reveal(v).includes(value)), 'the bad value was never kept');
        assert.deepEqual(outcomes.map((o) => o.ok), [false, true]);
      });
    }
  }
}

test('minted credentials: a bad value at a refresh ahead of expiry leaves the current good one in use until it expires (mintedSource)', async () => {
  let token = 'ya29.first';
  const outcomes: boolean[] = [];
  const source = googleMetadataSource({ metadataHost: 'md', fetchJson: async () => ({ access_token: token, expires_in: 3600 }), onRefresh: (o) => outcomes.push(o.ok) });
  await source.refresh(0);
  token = 'ya29.second\r\nx-injected: 1';
  await source.refresh(3_600_000 - 4 * 60_000);
  const r = await source.authenticate(CALL, 3_600_000 - 60_000);
  assert.deepEqual(r.ok && revealed(r.headers), { authorization: 'Bearer ya29.first' });
  assert.deepEqual(outcomes, [true, false]);
});
