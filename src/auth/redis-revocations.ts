// The deny list in the store the replicas share (--limits-store redis://): one key per revoked run,
// instance or token, expiring when the last token it could stop has expired, so the store holds
// only what still matters. A check is one MGET; `revoke` writes a key with SET ... EX. With the
// store unreachable, the failure policy of --limits-store-failure decides: closed refuses the
// token (a revocation must not be lost to an outage), open lets it through.
import { RespError, type RespClient } from '../store/resp.ts';

export type RevocationKind = 'run_id' | 'instance_id' | 'token_id';

/** What a check answers when the store cannot be reached and the failure policy is closed: a transient refusal (503), not a revoked token. */
export const STORE_UNREACHABLE = 'the revocation store cannot be reached (--limits-store-failure closed)';

const PREFIX: Record<RevocationKind, string> = { run_id: 'rev:run:', instance_id: 'rev:inst:', token_id: 'rev:tok:' };
const REASON: Record<RevocationKind, string> = { run_id: 'its run was revoked', instance_id: 'its instance was revoked', token_id: 'the token was revoked' };

/** Pure: the store key that revokes one run, instance or token. */
function revocationKey(kind: RevocationKind, value: string): string {
  return `${PREFIX[kind]}${value}`;
}

/** Pure: what a token's claims are checked against, in order. */
function checks(claims: { sub: string; run_id: string; jti?: string }): [RevocationKind, string][] {
  const list: [RevocationKind, string][] = [['run_id', revocationKey('run_id', claims.run_id)], ['instance_id', revocationKey('instance_id', claims.sub)]];
  if (claims.jti !== undefined) list.push(['token_id', revocationKey('token_id', claims.jti)]);
  return list;
}

export function storeRevocations(client: RespClient, failure: 'open' | 'closed', onError: (why: string) => void): { reason(claims: { sub: string; run_id: string; jti?: string }): Promise<string | undefined> } {
  return {
    async reason(claims) {
      const list = checks(claims);
      try {
        const reply = await client.command(['MGET', ...list.map(([, key]) => key)]);
        if (!Array.isArray(reply) || reply.length !== list.length) throw reply instanceof RespError ? reply : new Error('the store answered MGET with something else');
        const hit = reply.findIndex((v) => v !== null);
        return hit < 0 ? undefined : REASON[list[hit]![0]];
      } catch (err) {
        onError((err as Error).message);
        return failure === 'closed' ? STORE_UNREACHABLE : undefined;
      }
    },
  };
}

/** Revokes one run, instance or token in the store for `ttlSec` seconds. */
export async function addStoreRevocation(client: RespClient, kind: RevocationKind, value: string, ttlSec: number): Promise<void> {
  const reply = await client.command(['SET', revocationKey(kind, value), '1', 'EX', Math.max(1, Math.ceil(ttlSec))]);
  if (reply !== 'OK') throw new Error(`the store refused the revocation: ${reply instanceof RespError ? reply.message : String(reply)}`);
}
