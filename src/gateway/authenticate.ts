// Step 1 of a model call: who is asking. With a verifier (signing keys) only a verified bot
// token counts, and the deny list may still refuse it; without one (network-policy mode) the
// identity headers are informational. The decisions are pure (botPresentation, botIdentity);
// the verification (a source may fetch keys) and the deny list may be awaited between them.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { RevocationCheck, WorkloadIdentity } from '../auth/identity.ts';
import { IDENTITY_VALUE } from '../auth/jwt.ts';
import { peerOf, type TokenVerifier, type Verification } from '../auth/verifier.ts';
import { ERRORS, type ProxyError } from '../http/errors.ts';
import { headerCount } from '../http/headers.ts';
import type { Refusal } from '../http/lifecycle.ts';
import { loweredByClaim } from '../limits/policy.ts';
import type { WireProtocol } from './protocols/protocol.ts';

export interface BotAuth {
  /** Verifies bot tokens (src/auth/verifier.ts); undefined: network-policy mode. */
  readonly verifier: TokenVerifier | undefined;
  /** The deny list (--revocations, or the shared store). */
  readonly revoked?: RevocationCheck;
}

export type Authenticated = { readonly ok: true; readonly identity: WorkloadIdentity } | { readonly ok: false; readonly refusal: Refusal };

/**
 * Pure: where a bot token goes, as the protocol's own clients send it: the Anthropic SDKs and
 * Claude Code send `x-api-key`, the OpenAI SDKs `Authorization: Bearer` (both are accepted).
 */
export function tokenHeaderHint(protocol: WireProtocol | undefined): string {
  return protocol?.kind === 'anthropic'
    ? "as x-api-key: $MODEL_PROXY_TOKEN (the Anthropic SDKs' api key; Authorization: Bearer works too)"
    : "as Authorization: Bearer $MODEL_PROXY_TOKEN (the OpenAI SDKs' api key; x-api-key works too)";
}

function unauthenticated(message: string): Authenticated {
  return { ok: false, refusal: { error: ERRORS.unauthenticated, message } };
}

/**
 * Pure: what the request's headers present. Without a verifier (network-policy mode) the identity
 * they state is the answer; with one, the token to verify (undefined: none sent), or why not.
 */
export function botPresentation(req: Pick<IncomingMessage, 'headers' | 'rawHeaders'>, verifying: boolean): Authenticated | { readonly token: string | undefined } {
  if (!verifying) {
    const fromHeaders = identityFromHeaders(req.headers);
    if ('error' in fromHeaders) return { ok: false, refusal: { error: fromHeaders.error, param: fromHeaders.param } };
    return { ok: true, identity: fromHeaders };
  }
  // Two of a header are refused, not chosen from: Node keeps the first, another reader the last.
  const twice = headerCount(req.rawHeaders, 'authorization') > 1 || headerCount(req.rawHeaders, 'x-api-key') > 1;
  const presented: PresentedToken = twice ? { kind: 'conflict' } : botToken(req.headers);
  if (presented.kind === 'conflict') return unauthenticated('the request carries two different bot tokens (Authorization and x-api-key, or one of them twice): send one token');
  return { token: presented.token };
}

/** Pure: the identity a verification proves, or the refusal that says what to send instead. */
export function botIdentity(verified: Verification, protocol: WireProtocol | undefined): Authenticated {
  if (!verified.ok && verified.absent) return unauthenticated(`a bot token is required: send the one mint-token made ${tokenHeaderHint(protocol)}`);
  if (!verified.ok && verified.forbidden) return { ok: false, refusal: { error: ERRORS.clientCertificateRefused, message: `the client certificate was refused: ${verified.reason}` } };
  // A service-account token's fix is the pod's own token or the policy, never one from mint-token.
  if (!verified.ok && verified.serviceAccount) return unauthenticated(`the service-account token was refused: ${verified.reason}`);
  if (!verified.ok) return unauthenticated(`the bot token was refused (${verified.reason}): send a valid one, from mint-token, ${tokenHeaderHint(protocol)}`);
  const c = verified.claims;
  const lowered = c.limits && loweredByClaim(c.limits);
  return { ok: true, identity: { instanceId: c.sub, workflow: c.workflow, runId: c.run_id, ...(c.jti === undefined ? {} : { tokenId: c.jti }), ...(lowered ? { lowered } : {}) } };
}

/** Pure: the refusal a revoked or uncheckable token gets on the gateway, or undefined to let it through. */
export function revocationRefusal(verdict: Awaited<ReturnType<RevocationCheck>>): Refusal | undefined {
  if (verdict.kind === 'ok') return undefined;
  if (verdict.kind === 'unavailable') return { error: ERRORS.revocationStoreUnavailable, headers: { 'retry-after': '1' } };
  if (verdict.kind === 'state_lost') return { error: ERRORS.revocationStoreStateLost, headers: { 'retry-after': '1' } };
  return { error: ERRORS.unauthenticated, message: `the bot token was refused (${verdict.reason}): the operator stopped it before it expired` };
}

/** The step: the verified identity, checked against the deny list (which may live in the shared store). */
export async function authenticateBot(req: IncomingMessage, auth: BotAuth, protocol: WireProtocol | undefined, nowSec: number): Promise<Authenticated> {
  const presented = botPresentation(req, auth.verifier !== undefined);
  if ('ok' in presented) return presented;
  const verification = auth.verifier!.verify('bot', { token: presented.token, peer: peerOf(req.socket) }, nowSec);
  const who = botIdentity(verification instanceof Promise ? await verification : verification, protocol);
  if (!who.ok || !auth.revoked) return who;
  const refusal = revocationRefusal(await auth.revoked(who.identity, nowSec));
  return refusal ? { ok: false, refusal } : who;
}



/** Network-policy mode: identity from headers, which are informational and unauthenticated. */
export function identityFromHeaders(headers: IncomingHttpHeaders): WorkloadIdentity | { error: ProxyError; param: string } {
  const read = (name: string): string | null | false => {
    const v = headers[name];
    if (v === undefined) return null;
    return typeof v === 'string' && IDENTITY_VALUE.test(v) ? v : false;
  };
  const instanceId = read('x-instance-id');
  const workflow = read('x-workflow');
  const runId = read('x-run-id');
  if (instanceId === false) return { error: ERRORS.badIdentityHeader, param: 'X-Instance-Id' };
  if (workflow === false) return { error: ERRORS.badIdentityHeader, param: 'X-Workflow' };
  if (runId === false) return { error: ERRORS.badIdentityHeader, param: 'X-Run-Id' };
  return { instanceId, workflow, runId };
}

/** The bot token a request presents (undefined: none), or two different ones. */
export type PresentedToken = { readonly kind: 'token'; readonly token: string | undefined } | { readonly kind: 'conflict' };

/**
 * The bot token: `Authorization: Bearer`, or `x-api-key` (what Claude Code's apiKeyHelper and the
 * Anthropic SDKs send; Claude Code sends both). Two different values are refused, not chosen from.
 */
export function botToken(headers: IncomingHttpHeaders): PresentedToken {
  const bearer = /^Bearer +([^ ]+)$/.exec(headers.authorization ?? '')?.[1];
  const apiKey = typeof headers['x-api-key'] === 'string' && headers['x-api-key'] !== '' ? headers['x-api-key'] : undefined;
  if (bearer !== undefined && apiKey !== undefined && bearer !== apiKey) return { kind: 'conflict' };
  return { kind: 'token', token: bearer ?? apiKey };
}
