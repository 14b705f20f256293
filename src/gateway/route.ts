// The gateway's routing: which route a request takes (a protocol's, the catalog's, or a refusal), the
// client's correlation id, and the model catalog answered from the allowlist. Pure.
import type { IncomingHttpHeaders } from 'node:http';
import { ERRORS, withMessage, type ProxyError } from '../http/errors.ts';
import type { ProviderConfig } from './config.ts';
import type { PathModel, ProtocolRoute, WireProtocol } from './protocols/protocol.ts';

export type GatewayRoute =
  | { readonly ok: true; readonly kind: 'protocol'; readonly protocol: WireProtocol; readonly route: ProtocolRoute; readonly query: string; readonly pathModel?: PathModel }
  | { readonly ok: true; readonly kind: 'models' }
  | { readonly ok: true; readonly kind: 'model'; readonly id: string }
  | { readonly ok: false; readonly error: ProxyError; readonly allow?: string; readonly protocol?: WireProtocol };

// A query is passed on (some OpenAI-compatible hosts want `api-version=`), but only when it is
// plain `key=value&...` text that no server could read as anything else.
const SAFE_QUERY = /^[A-Za-z0-9\-._~=&%+,]*$/;

/** Paths of state stored at the provider: never routed, whatever the method. */
const STORED_STATE_PATH = /^\/v1\/(?:responses\/|conversations(?:\/|$))/;

/**
 * The route of a request: a protocol's POST path, the model catalog, or an error. `protocols`
 * is the gateway's table; a path served by none of them is 404.
 */
export function routeGatewayRequest(method: string, target: string, protocols: readonly WireProtocol[]): GatewayRoute {
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? '' : target.slice(q + 1);
  for (const protocol of protocols) {
    for (const route of protocol.routes) {
      if (route.modelInPath) {
        const m = route.modelInPath(path);
        if (m === undefined) continue;
        if ('error' in m) return { ok: false, error: withMessage(ERRORS.pathRejected, m.error), protocol };
        if (method !== 'POST') return { ok: false, error: ERRORS.methodNotAllowed, allow: 'POST', protocol };
        // The clouds' routes take no query: nothing to pass on, nothing to misread.
        if (query !== '') return { ok: false, error: ERRORS.badQuery, protocol };
        return { ok: true, kind: 'protocol', protocol, route, query, pathModel: m };
      }
      if (path !== route.path) continue;
      if (method !== 'POST') return { ok: false, error: ERRORS.methodNotAllowed, allow: 'POST', protocol };
      if (!SAFE_QUERY.test(query)) return { ok: false, error: ERRORS.badQuery, protocol };
      return { ok: true, kind: 'protocol', protocol, route, query };
    }
  }
  if (path === '/v1/models' || path.startsWith('/v1/models/')) {
    if (method !== 'GET') return { ok: false, error: ERRORS.methodNotAllowed, allow: 'GET' };
    if (path === '/v1/models') return { ok: true, kind: 'models' };
    let id: string;
    try {
      id = decodeURIComponent(path.slice('/v1/models/'.length));
    } catch {
      return { ok: false, error: ERRORS.modelNotFound };
    }
    return { ok: true, kind: 'model', id };
  }
  if (STORED_STATE_PATH.test(path)) return { ok: false, error: ERRORS.storedStateNotRouted };
  return { ok: false, error: ERRORS.notFound };
}

const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The client's correlation id when it is sane, else undefined (the caller generates one). */
export function clientRequestId(headers: IncomingHttpHeaders): string | undefined {
  const v = headers['x-client-request-id'];
  return typeof v === 'string' && CLIENT_REQUEST_ID.test(v) ? v : undefined;
}

function modelObject(id: string, provider: string): Record<string, unknown> {
  return { id, object: 'model', created: 0, owned_by: provider };
}

/** The catalog: exactly the allowlist of every provider, in OpenAI's list format, owned_by the provider. */
export function modelsListBody(providers: readonly Pick<ProviderConfig, 'name' | 'models'>[]): string {
  return JSON.stringify({ object: 'list', data: providers.flatMap((p) => p.models.map((id) => modelObject(id, p.name))) });
}

/** One model of the catalog (`GET /v1/models/{id}`, the SDKs' models.retrieve), or undefined. */
export function modelBody(id: string, providers: readonly Pick<ProviderConfig, 'name' | 'models'>[]): string | undefined {
  const owner = providers.find((p) => p.models.includes(id));
  return owner ? JSON.stringify(modelObject(id, owner.name)) : undefined;
}
