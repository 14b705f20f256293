// Step 3 of a model call: what it asks for. The body is read as strict JSON and checked by the
// protocol's rules; the model picks its provider, whose kind must be the route's. Pure.
import type { Refusal } from '../http/lifecycle.ts';
import { ERRORS } from '../http/errors.ts';
import type { PriceChange } from '../limits/policy.ts';
import type { ModelPrice, PriceTable } from '../limits/prices.ts';
import type { PathModel, RequestPolicy, WireProtocol } from './protocols/protocol.ts';
import { routesOfKind, type Provider } from './providers.ts';
import { checkRequestBody } from './rules.ts';

/** What the call checks against: the allowlist and hosted tools, the providers by model, the protocol table, the prices. */
export interface CallPolicy {
  readonly request: RequestPolicy;
  readonly byModel: ReadonlyMap<string, Provider>;
  readonly protocols: readonly WireProtocol[];
  readonly prices?: PriceTable;
}

export type CheckedCall =
  | {
      readonly ok: true;
      readonly model: string;
      readonly provider: Provider;
      readonly stream: boolean;
      /** The model's price (absent: the price table has none, which a money budget refuses). */
      readonly price?: ModelPrice;
      /** The first value of the body that changes the price (the limits refuse what they cannot count). */
      readonly priceChange?: PriceChange;
      /** The most output the body allows, when it names a limit (the call's worst case). */
      readonly maxOutputTokens?: number;
      /** How many times over the provider generates that output (`n` choices), when more than once. */
      readonly outputFactor?: number;
    }
  | {
      readonly ok: false;
      readonly refusal: Refusal;
      /** The allowed model a refused request named: its record says what it targeted. */
      readonly model?: string;
      readonly provider?: Provider;
      /** A model the allowlist refused, bounded, for the log line only. */
      readonly refusedModel?: string;
    };

/** A flat copy: a model id V8 sliced out of the body's text would keep all of that text alive. */
function flat(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}

/** Pure: the call the body asks for, or why it is refused. */
export function checkCall(bytes: Buffer, protocol: WireProtocol, pathModel: PathModel | undefined, policy: CallPolicy): CheckedCall {
  const checked = checkRequestBody(bytes, protocol, policy.request, pathModel);
  if (!checked.ok) {
    const refusal = { error: checked.error, param: checked.param, ...(checked.message === undefined ? {} : { message: checked.message }) };
    // Refused for what it asked besides the model: its record names the model and provider.
    const known = checked.model === undefined ? {} : { model: flat(checked.model), provider: policy.byModel.get(checked.model) };
    return { ok: false, refusal, ...known, ...(checked.refusedModel === undefined ? {} : { refusedModel: checked.refusedModel }) };
  }
  const model = flat(checked.model);
  const provider = policy.byModel.get(checked.model)!;
  if (provider.config.kind !== protocol.kind) {
    const message = `model "${checked.model}" is served by ${routesOfKind(provider.config.kind, policy.protocols)} (provider ${provider.config.name}), not by this route`;
    return { ok: false, refusal: { error: ERRORS.modelNotOnRoute, param: 'model', message }, model, provider };
  }
  const price = policy.prices?.get(provider.config.name, checked.model);
  return { ok: true, model, provider, stream: checked.stream, ...(checked.outputFactor === undefined ? {} : { outputFactor: checked.outputFactor }), ...(price === undefined ? {} : { price }), ...(checked.priceChange === undefined ? {} : { priceChange: checked.priceChange }), ...(checked.maxOutputTokens === undefined ? {} : { maxOutputTokens: checked.maxOutputTokens }) };
}
