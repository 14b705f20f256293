// Step 5 of a model call: the upstream request, built from the provider's configuration and the
// checked call, never from the raw path; the credential from the provider's source for this very
// call (a key read now, a minted access token, or a signature over the bytes to be sent), its
// headers checked (credentials/source.ts) and kept opaque on the target (forward.ts writes them),
// and its secrets as the Redactor the relay holds: no value is read here.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { ERRORS, type ProxyError } from '../http/errors.ts';
import type { UpstreamTarget } from '../http/forward.ts';
import { allowedRequestHeaders, assertHeaderValue } from '../http/headers.ts';
import type { Refusal } from '../http/lifecycle.ts';
import type { LogSink } from '../http/log.ts';
import { bounded } from '../http/log.ts';
import type { ProviderConfig } from './config.ts';
import { Redactor } from '../http/redactor.ts';
import type { GatewayLogEvent } from './log-events.ts';
import type { PathModel, ProtocolRoute, WireProtocol } from './protocols/protocol.ts';
import { credentialHeaderProblem } from './credentials/source.ts';
import type { Provider } from './providers.ts';
import { providerHeaders } from './providers.ts';

export type PreparedUpstream = { readonly ok: true; readonly target: UpstreamTarget; readonly redactor: Redactor } | { readonly ok: false; readonly refusal: Refusal };

/**
 * Pure: a cloud route names its project and region: only the provider's own may be used (never
 * another project the provider's credential might reach).
 */
export function cloudScopeRefusal(pathModel: PathModel | undefined, provider: Provider['config'], model: string): Refusal | undefined {
  if (!pathModel) return undefined;
  const otherProject = pathModel.project !== undefined && pathModel.project !== provider.project;
  const otherRegion = pathModel.region !== undefined && pathModel.region !== provider.region;
  if (!otherProject && !otherRegion) return undefined;
  return {
    error: ERRORS.cloudScopeNotAllowed,
    message: `the path names project ${bounded(pathModel.project ?? '')} and region ${bounded(pathModel.region ?? '')}; model ${model} is served in project ${provider.project} and region ${provider.region} (provider ${provider.name})`,
  };
}

export interface UpstreamCallShape {
  readonly protocol: WireProtocol;
  readonly route: ProtocolRoute;
  readonly query: string;
  readonly pathModel: PathModel | undefined;
  readonly model: string;
  readonly provider: Provider;
  readonly requestId: string;
  /** POST, unless said (a WebSocket's upgrade is a GET). */
  readonly method?: 'GET';
}

/** The credential could not be produced: logged (the reason, never a value), and a 5xx that tells the operator. */
function credentialRefusal(provider: Provider, error: ProxyError, reason: string, log: LogSink<GatewayLogEvent>): PreparedUpstream {
  const name = provider.config.name;
  log({ event: 'credential_error', listener: 'model', provider: name, credential: provider.credential.type, reason });
  const message = error === ERRORS.upstreamCredentialFailed ? `the gateway could not produce its credential for provider ${name} (${reason}); the operator must check it` : undefined;
  return { ok: false, refusal: { error, ...(message === undefined ? {} : { message }) } };
}

/** The step: the upstream request for this call, with its credential, or a refusal (the cause logged, never the credential). */
export async function prepareUpstream(call: UpstreamCallShape, headers: IncomingHttpHeaders, body: Buffer, log: LogSink<GatewayLogEvent>, nowMs: number): Promise<PreparedUpstream> {
  const { provider, pathModel, route } = call;
  const config = provider.config;
  const scoped = cloudScopeRefusal(pathModel, config, call.model);
  if (scoped) return { ok: false, refusal: scoped };
  const { upstream } = config;
  const scope = { project: config.project, region: config.region };
  const path = pathModel && route.upstreamPathFor ? `${upstream.basePath}${route.upstreamPathFor(scope, pathModel)}` : upstreamPath(upstream.basePath, route, call.query);
  const method = call.method ?? 'POST';
  const auth = await provider.credential.authenticate({ method, target: path, host: upstream.host, contentType: headers['content-type'], body }, nowMs);
  if (!auth.ok) return credentialRefusal(provider, auth.error, auth.reason, log);
  const bad = credentialHeaderProblem(auth.headers);
  if (bad !== undefined) return credentialRefusal(provider, ERRORS.upstreamCredentialFailed, `its ${bad} header is not a valid header value`, log);
  const target: UpstreamTarget = {
    agent: provider.agent,
    plainHttp: upstream.plainHttp,
    hostname: upstream.hostname,
    port: upstream.port,
    method,
    path,
    headers: gatewayUpstreamHeaders(headers, call.protocol, { host: upstream.host, provider: config, clientRequestId: call.requestId }),
    credential: auth.headers,
  };
  return { ok: true, target, redactor: new Redactor(auth.secrets) };
}


export interface GatewayUpstreamHeaderInput {
  readonly host: string;
  /** The provider's kind decides where the account headers go. */
  readonly provider: Pick<ProviderConfig, 'kind' | 'organization' | 'project'>;
  readonly clientRequestId: string;
}

/**
 * Upstream headers for a model call: the client headers the protocol allows
 * (allowedRequestHeaders), then Host, identity encoding, the correlation id, and the
 * provider's account headers where its kind reads them; its credential is the target's, added
 * as the request is written (forward.ts). Everything else stays
 * here: credentials of any kind, account selectors, forwarding metadata, our identity headers,
 * headers nobody thought of.
 */
export function gatewayUpstreamHeaders(incoming: IncomingHttpHeaders, protocol: Pick<WireProtocol, 'requestHeaders' | 'requestHeaderPrefixes'>, set: GatewayUpstreamHeaderInput): OutgoingHttpHeaders {
  const out = allowedRequestHeaders(incoming, (name) => protocol.requestHeaders.has(name) || protocol.requestHeaderPrefixes.some((p) => name.startsWith(p)));
  out.host = assertHeaderValue('host', set.host);
  // Only what the usage inspector can read: identity, so usage is never lost to an encoding.
  out['accept-encoding'] = 'identity';
  out['x-client-request-id'] = assertHeaderValue('x-client-request-id', set.clientRequestId);
  return Object.assign(out, providerHeaders(set.provider));
}

/** A protocol path under an SDK-style base path: `/v1` + `/chat/completions`, never `/v1/v1`. */
export function upstreamPath(basePath: string, route: ProtocolRoute, query: string): string {
  return `${basePath}${route.upstreamPath}${query ? `?${query}` : ''}`;
}
