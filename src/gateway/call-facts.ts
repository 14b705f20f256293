// What a model call found, step by step, kept alike by an HTTP call (./call.ts) and a WebSocket
// turn (./socket-turn.ts): private, each fact written by the one method that records it, read by
// getters (the record and the spans: ModelCallState, ModelSpanFacts). Written once, here, around
// whichever class each extends; each adds only the steps that are its own.
import { NO_IDENTITY, type WorkloadIdentity } from '../auth/identity.ts';
import { NO_SECRETS, type Redactor } from '../http/redactor.ts';
import type { Reservation } from '../limits/admission.ts';
import type { WorstCase } from '../limits/worst-case.ts';
import type { AdmittedCall } from './admit-call.ts';
import type { CheckedCall } from './check-call.ts';
import type { CallSummary } from './protocols/protocol.ts';
import type { Provider } from './providers.ts';
import type { Held } from './settle.ts';

// The class the facts are added to: its constructor's arguments pass through unchanged.
type Base = abstract new (...args: any[]) => object;

export function withCallFacts<B extends Base>(base: B) {
  abstract class CallFacts extends base {
    #identity: WorkloadIdentity = NO_IDENTITY;
    #provider: Provider | undefined;
    #model: string | null = null;
    #refusedModel: string | null = null;
    #maxOutputTokens: number | undefined;
    #bytesIn = 0;
    #reservation: Reservation | undefined;
    #worst: WorstCase | undefined;
    #limit: string | null = null;
    #redactor: Redactor = NO_SECRETS;
    #rateLimited = 0;
    #upstreamRequestId: string | undefined;
    #relaying = false;
    #summary: CallSummary | undefined;

    // Read by the record and the spans (ModelCallState, ModelSpanFacts).
    get identity(): WorkloadIdentity { return this.#identity; }
    get provider(): Provider | undefined { return this.#provider; }
    get model(): string | null { return this.#model; }
    get refusedModel(): string | null { return this.#refusedModel; }
    get maxOutputTokens(): number | undefined { return this.#maxOutputTokens; }
    get bytesIn(): number { return this.#bytesIn; }
    get limit(): string | null { return this.#limit; }
    get redactor(): Redactor { return this.#redactor; }
    get rateLimited(): number { return this.#rateLimited; }
    get upstreamRequestId(): string | undefined { return this.#upstreamRequestId; }
    get relaying(): boolean { return this.#relaying; }
    get summary(): CallSummary | undefined { return this.#summary; }

    identified(identity: WorkloadIdentity): void {
      this.#identity = identity;
    }

    /** The provider that serves the call before any body names one (a WebSocket's, from its handshake). */
    servedBy(provider: Provider): void {
      this.#provider = provider;
    }

    /** The model asked for (a refusal names it too), its provider when the allowlist names one, or the model refused. */
    checked(checked: CheckedCall): void {
      this.#model = checked.model ?? null;
      if (checked.provider !== undefined) this.#provider = checked.provider;
      if (!checked.ok) this.#refusedModel = checked.refusedModel ?? null;
      else this.#maxOutputTokens = checked.maxOutputTokens;
    }

    /** The limits slot and the worst case held against the budgets (given back when the call is settled), or the limit that refused. */
    admitted(admitted: AdmittedCall): void {
      if (!admitted.ok) this.#limit = admitted.limit;
      else {
        this.#reservation = admitted.reservation;
        this.#worst = admitted.worst;
      }
    }

    prepared(redactor: Redactor): void {
      this.#redactor = redactor;
    }

    throttled(): void {
      this.#rateLimited++;
    }

    protected bodySized(bytes: number): void {
      this.#bytesIn = bytes;
    }

    protected upstreamNamed(id: string | undefined): void {
      this.#upstreamRequestId = id;
    }

    protected relayBegan(): void {
      this.#relaying = true;
    }

    protected summarized(summary: CallSummary | undefined): void {
      this.#summary = summary;
    }

    /** What the call holds, for its settling (settle.ts): the slot and worst case admitted, with what the class adds. */
    protected held(body: Held['body'], reached: boolean, betweenAttempts: boolean): Held {
      return { body, reservation: this.#reservation, worst: this.#worst, reached, betweenAttempts };
    }
  }
  return CallFacts;
}
