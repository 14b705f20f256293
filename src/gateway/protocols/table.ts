// The wire protocols the gateway serves. Adding one is a new module and a line here.
import { anthropicMessages } from './anthropic-messages.ts';
import { bedrockMessages, vertexMessages } from './cloud-messages.ts';
import { chatCompletions } from './chat-completions.ts';
import type { ProviderKind, WireProtocol } from './protocol.ts';
import { responses } from './responses.ts';

export const PROTOCOLS: readonly WireProtocol[] = [chatCompletions, responses, anthropicMessages, vertexMessages, bedrockMessages];

/**
 * Pure: the APIs a gateway with providers of these kinds serves, each named once, in table order
 * (the cloud routes speak Messages too; without an Anthropic-kind provider no Messages route is served).
 */
export function servedApis(protocols: readonly WireProtocol[], kinds: readonly ProviderKind[]): string[] {
  return [...new Set(protocols.filter((p) => kinds.includes(p.kind)).map((p) => p.api))];
}
