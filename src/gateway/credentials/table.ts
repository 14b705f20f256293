// The credential-source table: a provider's configured credential to the source that
// authenticates its calls (credentials/source.ts). Adding a source is one module and one line here.
import { readFileSync } from 'node:fs';
import type { ProviderConfig } from '../config.ts';
import { keyHeader } from '../providers.ts';
import { secretSource } from '../../config/secret.ts';
import type { CredentialSource } from './source.ts';
import { staticKeySource } from './static-key.ts';
import { awsSource, awsWebIdentitySource } from './aws.ts';
import { exchangeAtTokenEndpoint, fetchMetadataJson, googleMetadataSource, googleServiceAccountSource } from './google.ts';
import { fetchBody, FETCH_DEADLINE_MS } from './fetch.ts';
import type { Egress } from '../../http/tunnel.ts';
import type { MintedSource } from './minted.ts';

/**
 * A provider's credential source, from its configuration and the environment its secrets are
 * named in. Its HTTPS endpoints (a token endpoint, STS) are reached through the egress proxy
 * when there is one; the metadata server (plain HTTP, link-local) never is.
 */
export function openCredential(config: ProviderConfig, env: NodeJS.ProcessEnv, onRefresh: (outcome: { ok: true } | { ok: false; reason: string }) => void, egress?: Egress): CredentialSource {
  const c = config.credential;
  switch (c.type) {
    case 'none':
      return { type: 'none', present: () => true, authenticate: async () => ({ ok: true, headers: {}, secrets: [] }) };
    case 'key':
      return staticKeySource(c.key ? secretSource(env, c.key) : undefined, c.header === undefined ? keyHeader(config.kind) : [c.header, '']);
    case 'aws-sigv4':
      return awsSource({ accessKeyId: secretSource(env, c.accessKeyId), secretAccessKey: secretSource(env, c.secretAccessKey), sessionToken: c.sessionToken ? secretSource(env, c.sessionToken) : undefined, region: c.region, service: c.service });
    case 'google-service-account':
      return keepFresh(googleServiceAccountSource({ readKeyFile: () => readFileSync(c.keyFile, 'utf8'), scope: c.scope, exchange: (tokenUri, assertion) => exchangeAtTokenEndpoint(tokenUri, assertion, FETCH_DEADLINE_MS, egress), onRefresh }));
    case 'google-metadata':
      return keepFresh(googleMetadataSource({ metadataHost: env.GCE_METADATA_HOST || 'metadata.google.internal', fetchJson: fetchMetadataJson, onRefresh }));
    case 'aws-web-identity':
      return keepFresh(awsWebIdentitySource({ roleArn: c.roleArn, readTokenFile: () => readFileSync(c.tokenFile, 'utf8'), stsEndpoint: c.stsEndpoint, region: c.region, service: c.service, assume: (url, form) => fetchBody(url, { form, egress }), onRefresh }));
  }
}

/**
 * A minted credential's first fetch at once, then refreshes ahead of each expiry, so that no call
 * waits on one; `close` stops the refreshes.
 */
export function keepFresh(source: MintedSource): MintedSource & { close(): void } {
  void source.refresh(Date.now());
  const timer = setInterval(() => void source.refreshIfDue(Date.now()), 30_000).unref();
  return { ...source, close: () => clearInterval(timer) };
}
