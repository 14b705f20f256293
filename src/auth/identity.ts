// Who is asking, the same on both listeners and in the limits: the instance, workflow and run a
// verified token names (or, in network-policy mode, the gateway's informational headers), the
// token's own id for the deny list, and what the token lowered of the limits. One shape, read by
// the handlers, the revocation check, the limits and the records.

/** What a bot token may lower of the limits file for its run (never raise). */
export interface LoweredLimits {
  readonly budgetUsd?: number;
  readonly concurrent?: number;
  readonly requestsPerMinute?: number;
  readonly tokensPerMinute?: number;
}

export interface WorkloadIdentity {
  /** The token's `sub`: one workload instance (a pod, a sandbox); null when nobody said. */
  readonly instanceId: string | null;
  readonly workflow: string | null;
  readonly runId: string | null;
  /** The token's `jti`, when mint-token gave it one (the deny list can name it). */
  readonly tokenId?: string;
  /** What the token lowered for this run. */
  readonly lowered?: LoweredLimits;
}

/** Nobody said who is asking (refused before authentication, or no identity headers). */
export const NO_IDENTITY: WorkloadIdentity = Object.freeze({ instanceId: null, workflow: null, runId: null });

/**
 * What the deny list answers about a verified identity: let it through, it is revoked (a fixed
 * phrase for the message and the log), or, under the failure policy closed, it cannot say: the
 * list cannot be read (`unavailable`: the store cannot be reached, or answered something else),
 * or the store answers but lost its state (`state_lost`: its revocations may be gone, until an
 * operator runs confirm-store-reset). Both are transient refusals (503), never "revoked".
 */
export type RevocationVerdict = { readonly kind: 'ok' } | { readonly kind: 'revoked'; readonly reason: string } | { readonly kind: 'unavailable' } | { readonly kind: 'state_lost' };

export const NOT_REVOKED: RevocationVerdict = Object.freeze({ kind: 'ok' });

/** What the listeners ask of the deny list; a promise when the list is in the shared store. */
export type RevocationCheck = (identity: WorkloadIdentity, nowSec: number) => RevocationVerdict | Promise<RevocationVerdict>;
