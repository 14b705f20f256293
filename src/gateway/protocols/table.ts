// The wire protocols the gateway serves. Adding one is a new module and a line here.
import { anthropicMessages } from './anthropic-messages.ts';
import { bedrockMessages, vertexMessages } from './cloud-messages.ts';
import { chatCompletions } from './chat-completions.ts';
import type { WireProtocol } from './protocol.ts';
import { responses } from './responses.ts';

export const PROTOCOLS: readonly WireProtocol[] = [chatCompletions, responses, anthropicMessages, vertexMessages, bedrockMessages];
