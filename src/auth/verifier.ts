// The one thing a listener holds to learn who is asking: a TokenVerifier. Given what the request
// presents (a bearer token, the TLS peer) for a listener kind ('bot': the model gateway; 'git':
// the git proxy) at a clock, it answers with the verified claims (BotClaims, the one shape both
// listeners read) or a fixed-phrase reason that ends up in logs and refusals.
//
// A verifier is an ordered list of sources. Each source either answers (verified, or refused
// with its reason) or passes (undefined: "not mine") to the next; the first answer is final, so a
// token is never tried against several sources until one happens to accept it. The sources:
//
//   keyRingSource  tokens signed by our own keys (mint-token): HS256 secrets, Ed25519 and P-256
//                  public keys, from the environment and key files (src/auth/key-files.ts),
//                  chosen by the header's kid. It takes every bearer token it is shown, so it goes
//                  LAST: a source that recognises its tokens by something precise goes before it.
//
// Adding a source (one file, one line where src/run/ builds the verifier):
//   - A Kubernetes service-account token verified by JWKS: a source that reads the unverified
//     header and payload only to choose (its `iss` is the configured issuer, or its `kid` is in
//     the JWKS), passes on any other token, and otherwise answers alone: signature by the JWKS
//     key of that kid with the algorithm that key fixes, then iss, aud, exp, nbf, iat, and the
//     kubernetes.io claims mapped by the policy file into BotClaims. An unknown kid may fetch the
//     JWKS again, so its verify returns a Promise; the listeners await only a promise.
//   - A client certificate's SPIFFE ID: a source that reads `presented.peer.tls` (filled by
//     peerOf from the request's socket), passes when there is no verified client certificate,
//     and maps the certificate's one URI SAN through the same policy into BotClaims. With mutual
//     TLS a request may carry no token at all: that is why `token` is optional.
// A source never sees another source's key and never widens what another refused.
import type { Socket } from 'node:net';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import { tokenCacheKey } from './compact-token.ts';
import { asBotToken, asGitToken, ringHolds, TOKEN_LEEWAY_SEC, verifySignedToken, type BotClaims, type KeyRing, type SignedResult, type VerificationKey } from './jwt.ts';

/** Which listener asks: the model gateway ('bot' tokens) or the git proxy ('git' workload tokens, with a git scope). */
export type ListenerKind = 'bot' | 'git';

/** The request's connection, as far as a source may need it (mutual TLS). */
export interface PresentedPeer {
  readonly remoteAddress: string | undefined;
  /** On a TLS connection: whether the client certificate chained to the configured CA, and the certificate (empty object: none sent). */
  readonly tls?: { readonly authorized: boolean; readonly certificate: PeerCertificate };
}

/** What one request presents to prove who it is. */
export interface Presented {
  /** The bearer token (Authorization, x-api-key, or the git password); undefined: none sent. */
  readonly token?: string;
  readonly peer?: PresentedPeer;
}

/**
 * A verifier's answer. `absent`: nothing was presented that any source could read (the listener
 * then asks for a token, as a 401 with its own instructions, instead of naming a reason).
 * `forbidden`: the proof was verified but grants nothing here (a client certificate without a
 * usable SPIFFE ID or policy entry): a token cannot change that, so the listener answers 403 with
 * the reason, not a 401 whose challenge would make git ask for a password and hide the reason.
 */
export type Verification =
  | { readonly ok: true; readonly claims: BotClaims }
  /** `serviceAccount`: a Kubernetes service-account token was refused: its fix is never a token from mint-token. */
  | { readonly ok: false; readonly reason: string; readonly absent?: true; readonly forbidden?: true; readonly serviceAccount?: true };

/** One way of proving identity. undefined: not this source's kind of proof; the next source is asked. */
export interface TokenSource {
  readonly name: string;
  verify(kind: ListenerKind, presented: Presented, nowSec: number): Verification | undefined | Promise<Verification | undefined>;
}

export interface TokenVerifier {
  /** A value when every source asked answered at once (our own keys, a cached JWKS); a promise only when one had to wait. */
  verify(kind: ListenerKind, presented: Presented, nowSec: number): Verification | Promise<Verification>;
}

const NOTHING_PRESENTED: Verification = Object.freeze({ ok: false, reason: 'no token', absent: true });
const NO_SOURCE: Verification = Object.freeze({ ok: false, reason: 'no verifier for this token' });

/** The sources, asked in order; the first answer is the verifier's. */
export function composeVerifier(sources: readonly TokenSource[]): TokenVerifier {
  return { verify: (kind, presented, nowSec) => askFrom(sources, 0, kind, presented, nowSec) };
}

function askFrom(sources: readonly TokenSource[], first: number, kind: ListenerKind, presented: Presented, nowSec: number): Verification | Promise<Verification> {
  for (let i = first; i < sources.length; i++) {
    const answer = sources[i]!.verify(kind, presented, nowSec);
    if (answer instanceof Promise) return answer.then((a) => a ?? askFrom(sources, i + 1, kind, presented, nowSec));
    if (answer !== undefined) return answer;
  }
  return presented.token === undefined ? NOTHING_PRESENTED : NO_SOURCE;
}

/**
 * A TLS connection's peer, read once: its certificate cannot change while it is open (the
 * listeners refuse renegotiation, src/http/tls-listener.ts), and getPeerCertificate() costs about
 * 120 us a call (measured on Node 20), more than the rest of a request's verification.
 */
const tlsPeers = new WeakMap<Socket, PresentedPeer>();

/** The request's peer, for the sources that read it; a TLS socket's certificate only when the connection is TLS. */
export function peerOf(socket: Socket): PresentedPeer {
  const tls = socket as Partial<TLSSocket>;
  if (tls.encrypted !== true || typeof tls.getPeerCertificate !== 'function') return { remoteAddress: socket.remoteAddress };
  let peer = tlsPeers.get(socket);
  if (peer === undefined) {
    peer = { remoteAddress: socket.remoteAddress, tls: { authorized: tls.authorized === true, certificate: tls.getPeerCertificate() } };
    tlsPeers.set(socket, peer);
  }
  return peer;
}

/** Verifications remembered, by the whole token string in its one form (a few hundred bytes each). */
const VERIFIED_CACHE_ENTRIES = 4096;

interface CachedToken {
  readonly claims: BotClaims;
  readonly key: VerificationKey;
}

/**
 * Tokens signed by our own keys: the ring as it is now (re-read from its files, src/auth/key-files.ts)
 * at every request. An Ed25519 or ES256 signature costs tens of microseconds to check, and even
 * an HS256 token costs a strict parse of its header and claims besides the HMAC, while an agent
 * sends one token again and again: a verified token is remembered by its whole string until its
 * exp, in its one form (tokenCacheKey: an ES256 token's high-s twin is the low-s token, one entry
 * and one verification). A hit skips the signature and the parsing, and is checked again against the clock (exp,
 * with jwt.ts's leeway) and the ring (a removed or replaced key refuses its tokens from the next
 * request). Everything else a verification checked cannot change with time. The kind's rules (a
 * git scope or not) apply on every request, cached or not. Only a verified token is remembered:
 * a refused one costs its verification every time, as before.
 */
export function keyRingSource(ring: () => KeyRing, maxLifetimeSec: number): TokenSource {
  const cache = new Map<string, CachedToken>();
  return {
    name: 'keys',
    verify(kind, presented, nowSec) {
      if (presented.token === undefined) return undefined;
      const token = tokenCacheKey(cache, presented.token);
      const keys = ring();
      const hit = cache.get(token);
      if (hit !== undefined) {
        cache.delete(token);
        if (ringHolds(keys, hit.key) && hit.claims.exp > nowSec - TOKEN_LEEWAY_SEC) {
          cache.set(token, hit);
          return fromSigned(kind, token, { ok: true, claims: hit.claims, key: hit.key });
        }
      }
      const verified = verifySignedToken(token, keys, { nowSec, maxLifetimeSec });
      if (verified.ok) {
        cache.set(token, { claims: verified.claims, key: verified.key });
        if (cache.size > VERIFIED_CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
      }
      return fromSigned(kind, token, verified);
    },
  };
}

function fromSigned(kind: ListenerKind, token: string, verified: SignedResult): Verification {
  return kind === 'bot' ? asBotToken(token, verified) : asGitToken(token, verified);
}
