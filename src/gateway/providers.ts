// The providers at run time: which provider serves a model, and what each kind of provider needs
// on the upstream leg. Pure, but for the HTTPS agent and secret source each provider carries.
import type { OutgoingHttpHeaders } from 'node:http';
import type { Agent } from 'node:http';
import { assertHeaderValue } from '../http/headers.ts';
import type { ProviderConfig } from './config.ts';
import type { ProviderKind, WireProtocol } from './protocols/protocol.ts';
import type { CredentialSource } from './credentials/source.ts';

export interface Provider {
  readonly config: ProviderConfig;
  /** Its own keep-alive pool and trust store. */
  readonly agent: Agent;
  /** Its credential source: the headers that authenticate each call (./credentials/). */
  readonly credential: CredentialSource;
}

interface KindRules {
  /** Where the key goes, and what comes before it: OpenAI reads a bearer token, Anthropic the x-api-key header. */
  readonly credentialHeader: readonly [name: string, prefix: string];
  /** The headers the kind reads the configured organization and project from, if it has them. */
  readonly organizationHeader: string | undefined;
  readonly projectHeader: string | undefined;
}

const PROVIDER_KINDS: Readonly<Record<ProviderKind, KindRules>> = {
  openai: { credentialHeader: ['authorization', 'Bearer '], organizationHeader: 'openai-organization', projectHeader: 'openai-project' },
  anthropic: { credentialHeader: ['x-api-key', ''], organizationHeader: undefined, projectHeader: undefined },
  // The clouds take a bearer token (a Google access token; a Bedrock API key) when not signed.
  'anthropic-vertex': { credentialHeader: ['authorization', 'Bearer '], organizationHeader: undefined, projectHeader: undefined },
  'anthropic-bedrock': { credentialHeader: ['authorization', 'Bearer '], organizationHeader: undefined, projectHeader: undefined },
};

/** Where a static key goes for a kind, and its prefix: `Authorization: Bearer ` (OpenAI) or `x-api-key` (Anthropic). */
export function keyHeader(kind: ProviderKind): readonly [name: string, prefix: string] {
  return PROVIDER_KINDS[kind].credentialHeader;
}

/** The provider's account headers, each value checked for CR/LF (the credential's own are the target's: forward.ts). */
export function providerHeaders(config: Pick<ProviderConfig, 'kind' | 'organization' | 'project'>): OutgoingHttpHeaders {
  const rules = PROVIDER_KINDS[config.kind];
  const out: OutgoingHttpHeaders = {};
  if (config.organization && rules.organizationHeader) out[rules.organizationHeader] = assertHeaderValue(rules.organizationHeader, config.organization);
  if (config.project && rules.projectHeader) out[rules.projectHeader] = assertHeaderValue(rules.projectHeader, config.project);
  return out;
}

/** Model ID to its provider (the configuration guarantees one provider per model). */
export function providersByModel(providers: readonly Provider[]): ReadonlyMap<string, Provider> {
  return new Map(providers.flatMap((p) => p.config.models.map((m) => [m, p] as const)));
}

/** The routes that serve a kind's models, for the message of a model sent to the wrong route. */
export function routesOfKind(kind: ProviderKind, protocols: readonly WireProtocol[]): string {
  return protocols
    .filter((p) => p.kind === kind)
    .flatMap((p) => p.routes.filter((r) => !r.noUsage).map((r) => `POST ${r.path}`))
    .join(' or ');
}
