// Step 4 of a model call: the limits (--limits). A call is admitted before anything is sent, and
// holds a slot until the call object gives it back with the charge, whichever way the call ends.
import type { WorkloadIdentity } from '../auth/identity.ts';
import { ERRORS } from '../http/errors.ts';
import type { Refusal } from '../http/lifecycle.ts';
import { effectivePolicy, type LimitsStore, type Reservation } from '../limits/admission.ts';
import { ASSUMED_MAX_OUTPUT_TOKENS, unpricedCallReason } from '../limits/policy.ts';
import { worstCase, type WorstCase } from '../limits/worst-case.ts';
import { limitRefusal } from '../limits/refusal.ts';
import type { CheckedCall } from './check-call.ts';
import { callPriceChange } from './protocols/pricing.ts';
import type { WireProtocol } from './protocols/protocol.ts';

export type AdmittedCall =
  /** `worst`: the most the call may cost, held against the budgets until it is charged. */
  | { readonly ok: true; readonly reservation: Reservation | undefined; readonly worst?: WorstCase }
  /** `limit` names the limit for the record. */
  | { readonly ok: false; readonly refusal: Refusal; readonly limit: string };

/**
 * The step: under a money budget, a value the budget cannot price is refused;
 * then the store admits the call or says which limit refuses it. Without --limits: admitted,
 * unless the identity carries limits of its own (a token's claim, a workload policy entry's):
 * a limit that is written is enforced or refused, never ignored.
 */
export async function admitCall(limits: LimitsStore | undefined, who: WorkloadIdentity, call: Extract<CheckedCall, { ok: true }>, anthropicBeta: string | string[] | undefined, bodyBytes: number, protocol: WireProtocol, nowMs: number): Promise<AdmittedCall> {
  if (!limits) return carriesLimits(who) ? { ok: false, refusal: { error: ERRORS.limitsNotEnforced }, limit: 'limits_not_enforced' } : { ok: true, reservation: undefined };
  const change = callPriceChange(protocol.api, call.priceChange, { 'anthropic-beta': anthropicBeta });
  const unpriced = unpricedCallReason(effectivePolicy(limits.policy, who.lowered), { model: call.model, priced: call.price !== undefined, ...(change === undefined ? {} : { priceChange: change }) });
  if (unpriced) return { ok: false, refusal: { error: ERRORS.unpricedCall, message: unpriced }, limit: 'unpriced_call' };
  const worst = worstCase(bodyBytes, call.maxOutputTokens, limits.policy.assumedMaxOutputTokens ?? ASSUMED_MAX_OUTPUT_TOKENS, call.price, call.outputFactor);
  const admitted = await limits.admit(who, bodyBytes, nowMs, limits.policy.holdWorstCase === true ? worst.usd : 0);
  if (admitted.ok) return { ok: true, reservation: admitted.reservation, worst };
  return { ok: false, refusal: limitRefusal(admitted, protocol.kind === 'openai' ? 'openai' : 'anthropic'), limit: admitted.kind };
}

/** Pure: whether an identity lowers any limit (a token minted with --budget-usd and the like, a workload policy entry's `limits`). */
export function carriesLimits(who: WorkloadIdentity): boolean {
  return who.lowered !== undefined && Object.values(who.lowered).some((v) => v !== undefined);
}
