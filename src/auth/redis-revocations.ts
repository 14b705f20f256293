// The deny list in the store the replicas share (--limits-store redis://): one key per revoked run,
// instance or token, expiring when the last token it could stop has expired, so the store holds
// only what still matters. A check is one MGET; `revoke` writes a key with SET ... EX. With the
// store unreachable, or found to have lost its state (store/state-marker.ts: its revocations may be
// gone), the failure policy of --limits-store-failure decides: closed refuses the token (a
// revocation must not be lost to an outage), each cause with its own verdict, open lets it through.
import { RespError, type RespClient } from '../store/resp.ts';
import { NOT_REVOKED, type RevocationVerdict, type WorkloadIdentity } from './identity.ts';

export type RevocationKind = 'run_id' | 'instance_id' | 'token_id';


const PREFIX: Record<RevocationKind, string> = { run_id: 'rev:run:', instance_id: 'rev:inst:', token_id: 'rev:tok:' };
const REASON: Record<RevocationKind, string> = { run_id: 'its run was revoked', instance_id: 'its instance was revoked', token_id: 'the token was revoked' };

/** Pure: the store key that revokes one run, instance or token. */
function revocationKey(kind: RevocationKind, value: string): string {
  return `${PREFIX[kind]}${value}`;
}

/** Pure: what a verified identity is checked against, in order. */
function checks(who: WorkloadIdentity): [RevocationKind, string][] {
  const list: [RevocationKind, string][] = [];
  if (who.runId !== null) list.push(['run_id', revocationKey('run_id', who.runId)]);
  if (who.instanceId !== null) list.push(['instance_id', revocationKey('instance_id', who.instanceId)]);
  if (who.tokenId !== undefined) list.push(['token_id', revocationKey('token_id', who.tokenId)]);
  return list;
}

export function storeRevocations(client: RespClient, failure: 'open' | 'closed', onError: (why: string) => void, stateLost: () => boolean = () => false): { verdict(who: WorkloadIdentity): Promise<RevocationVerdict> } {
  return {
    async verdict(who) {
      const list = checks(who);
      if (list.length === 0) return NOT_REVOKED;
      if (failure === 'closed' && stateLost()) return { kind: 'state_lost' };
      try {
        const reply = await client.command(['MGET', ...list.map(([, key]) => key)]);
        if (!Array.isArray(reply) || reply.length !== list.length) throw reply instanceof RespError ? reply : new Error('the store answered MGET with something else');
        const hit = reply.findIndex((v) => v !== null);
        return hit < 0 ? NOT_REVOKED : { kind: 'revoked', reason: REASON[list[hit]![0]] };
      } catch (err) {
        onError((err as Error).message);
        return failure === 'closed' ? { kind: 'unavailable' } : NOT_REVOKED;
      }
    },
  };
}

/** Revokes one run, instance or token in the store for `ttlSec` seconds. */
export async function addStoreRevocation(client: RespClient, kind: RevocationKind, value: string, ttlSec: number): Promise<void> {
  const reply = await client.command(['SET', revocationKey(kind, value), '1', 'EX', Math.max(1, Math.ceil(ttlSec))]);
  if (reply !== 'OK') throw new Error(`the store refused the revocation: ${reply instanceof RespError ? reply.message : String(reply)}`);
}
