// Every error the proxy itself produces, in one table: a stable code, an HTTP status and a
// fixed message. Messages never carry request data, upstream error text or credentials; each
// listener only decides how to render them (git: one text/plain line, gateway: OpenAI JSON).

export interface ProxyError {
  readonly code: string;
  readonly status: number;
  readonly message: string;
  /** The error type a protocol's clients act on, when the status alone does not say it (insufficient_quota, billing_error). */
  readonly type?: string;
}

function def(code: string, status: number, message: string, type?: string): ProxyError {
  return Object.freeze(type === undefined ? { code, status, message } : { code, status, message, type });
}

export const ERRORS = {
  absoluteForm: def('absolute_form', 400, 'absolute-form request targets are not accepted: this is a reverse proxy, send the path only'),
  barePath: def('bare_path', 400, 'the path must start with /<git host>/: configure git with the output of `proxy.js git-config`'),
  hostNotRegistered: def('host_not_registered', 403, 'that git host is not in the proxy registry'),
  pathRejected: def('path_rejected', 403, 'the repository path contains a forbidden segment or character (dot segments, encoded separators, backslash, semicolon)'),
  lfsNotSupported: def('lfs_not_supported', 501, 'Git LFS is not available through this proxy'),
  notGitRoute: def('not_git_route', 403, 'only git smart-HTTP requests are forwarded (info/refs, git-upload-pack, git-receive-pack)'),
  methodNotAllowed: def('method_not_allowed', 405, 'method not allowed on this path (the Allow header names the right one)'),
  workloadTokenMissing: def('workload_token_missing', 401, 'a workload token is required: configure git with `proxy.js git-config --workload-token-env VAR` and put a token from `proxy.js mint-token --git-repo ...` in VAR'),
  twoAuthorizations: def('two_authorizations', 400, 'the request has two Authorization headers; send one (the credential helper, or http.extraHeader, not both)'),
  workloadTokenInvalid: def('workload_token_invalid', 401, 'the workload token was refused'),
  clientCertificateRefused: def('client_certificate_refused', 403, 'the client certificate proves no identity this proxy serves (its SPIFFE ID, trust domain or workload policy entry)'),
  repoNotInScope: def('repo_not_in_scope', 403, 'this workload may not use that repository'),
  pushNotInScope: def('push_not_in_scope', 403, 'this workload may not push to that repository'),
  repoNotInHostRepos: def('repo_not_in_host_repos', 403, 'the proxy serves no such repository on that host'),
  hostReadOnly: def('host_read_only', 403, 'the proxy allows no pushes to that host'),
  refNotAllowed: def('ref_not_allowed', 403, 'the push changes a ref outside the ref rules for this workload and repository; nothing was sent to the git host'),
  pushUnreadable: def('push_unreadable', 400, "the push's command list is not one git reads, or passes the proxy's bounds; nothing was sent to the git host"),
  workloadBusy: def('workload_busy', 429, 'this workload already has as many git requests in progress as the proxy allows one workload (--git-max-concurrent-per-workload); retry when one has finished'),
  credentialMissing: def('credential_missing', 503, 'no credential is configured for that git host: the operator must set its token'),
  credentialInvalid: def('credential_invalid', 503, 'the credential configured for that git host is not a valid header value: the operator must fix it'),
  gitAppTokenFailed: def('git_app_token_failed', 502, "the proxy could not obtain its GitHub App installation token for that git host (the log says why); the operator must check the host's githubApp settings"),
  upstreamRejectedCredential: def('upstream_rejected_credential', 502, "the git host refused the proxy's credential; the operator must check its token"),
  upstreamUnreachable: def('upstream_unreachable', 502, 'the upstream could not be reached'),
  egressProxyFailed: def('egress_proxy_failed', 502, 'the egress proxy (HTTPS_PROXY) did not open a tunnel to the upstream; the operator must check the egress proxy'),
  upstreamTls: def('upstream_tls', 502, 'the upstream TLS certificate could not be verified'),
  upstreamProtocol: def('upstream_protocol', 502, 'the upstream sent a malformed HTTP response'),
  limitRateExceeded: def('rate_limit_exceeded', 429, 'a limit of this workload is reached for now (the operator sets them in --limits); retry after the time Retry-After says'),
  unpricedCall: def('price_not_counted', 400, 'the request asks for something billed at other rates than the budget counts'),
  limitsNotEnforced: def('limits_not_enforced', 503, 'this identity carries limits (a budget, a concurrency or a rate) and the gateway enforces none: it runs without --limits; the operator must start it with --limits FILE (an empty JSON object sets no ceiling of its own, so the identity\'s limits apply as written)'),
  limitsStoreUnavailable: def('limits_store_unavailable', 503, 'the store of the limits cannot be reached; retry after the time Retry-After says'),
  revocationStoreUnavailable: def('revocation_store_unavailable', 503, 'the store of revoked tokens cannot be reached, so the token cannot be checked; retry after the time Retry-After says'),
  // A store that answers but lost its state (restarted empty, flushed, evicting): not an outage,
  // and what ends it is the operator's confirmation, so it has a code and message of its own.
  limitsStoreStateLost: def('limits_store_state_lost', 503, 'the store of the limits lost its state (restarted empty, flushed or evicting keys): calls are refused until the operator confirms it (proxy.js confirm-store-reset) or every earlier token has expired; retry after the time Retry-After says'),
  revocationStoreStateLost: def('revocation_store_state_lost', 503, 'the store of revoked tokens lost its state (restarted empty, flushed or evicting keys), so the token cannot be checked until the operator confirms it (proxy.js confirm-store-reset --limits-store URL) or every earlier token has expired; retry after the time Retry-After says'),
  // A spent budget is final: answered the way each agent treats as "stop", not "retry" (Codex
  // stops on a 429 insufficient_quota, Claude Code on a 402 billing_error).
  budgetSpentOpenAi: def('insufficient_quota', 429, 'the budget of this workload is spent (the operator sets it in --limits)', 'insufficient_quota'),
  budgetSpentAnthropic: def('budget_spent', 402, 'the budget of this workload is spent (the operator sets it in --limits)', 'billing_error'),
  upstreamCredentialFailed: def('upstream_credential_failed', 502, "the gateway could not produce its credential for this provider (the log says which and why); the operator must check the provider's credential source"),
  upstreamEncoding: def('upstream_encoding', 502, 'the upstream compressed its answer though the proxy asked for none, so it could not be checked on its way; the operator must check what sits in front of the upstream (a CDN or load balancer compressing regardless of Accept-Encoding)'),
  upstreamTimeout: def('upstream_timeout', 504, 'the upstream did not answer in time'),
  notFound: def('not_found', 404, 'unknown path: this gateway serves POST /v1/chat/completions, POST /v1/responses, POST /v1/messages, POST /v1/messages/count_tokens, GET /v1/models and GET /v1/models/<model id>'),
  storedStateNotRouted: def('stored_state_not_routed', 404, 'stored responses and conversations are not reachable through this gateway: every bot shares the upstream key, so none may read or continue what another stored; send the whole conversation in "input" (with "store": false)'),
  modelInBody: def('model_in_body', 400, 'on this route the model is in the path; send the body without "model"'),
  cloudScopeNotAllowed: def('cloud_scope_not_allowed', 403, "the project or region in the path is not this gateway's for that model; use the provider's (agent-config writes them)"),
  modelNotFound: def('model_not_found', 404, 'that model is not available through this gateway; GET /v1/models lists the models it serves'),
  badQuery: def('invalid_query', 400, 'the query string holds characters the gateway does not forward'),
  unauthenticated: def('invalid_bot_token', 401, 'a bot token is required: send Authorization: Bearer $MODEL_PROXY_TOKEN (or x-api-key)'),
  unsupportedMediaType: def('unsupported_media_type', 415, 'the request body must be JSON (Content-Type: application/json)'),
  bodyTooLarge: def('request_too_large', 413, 'the request body is larger than the gateway accepts'),
  // The process's memory, not this call, is the cause: a transient refusal, before the body is read.
  requestBodiesFull: def('request_bodies_full', 503, 'the gateway holds as many request body bytes at once as its memory allows (--max-held-request-bytes), so this body was not read; retry after the time Retry-After says (an operator who sees this often adds replicas, or raises the cap with the memory limit)'),
  bodyTimeout: def('body_timeout', 408, 'the request body stopped arriving (no byte for --body-timeout): send the whole body without pausing'),
  invalidJson: def('invalid_json', 400, 'the request body is not a JSON object'),
  caseVariantKey: def('case_variant_key', 400, 'the request body has keys that differ only in case; case-insensitive readers take them for one key, so send each key once, spelled as the API documents it'),
  bodyTooComplex: def('body_too_complex', 400, 'the request body nests too deep or holds too many objects, arrays and keys for the gateway'),
  duplicateKey: def('duplicate_key', 400, 'the request body has the same key twice in one object; parsers disagree on which one counts, so send each key once'),
  modelMissing: def('model_missing', 400, 'the request body has no "model" string'),
  modelNotOnRoute: def('model_not_on_route', 400, 'that model is served by another route of this gateway'),
  modelNotAllowed: def('model_not_allowed', 400, 'that model is not available through this gateway; GET /v1/models lists the models it serves'),
  messagesMissing: def('messages_missing', 400, 'the request body has no "messages" array'),
  roleNotAllowed: def('role_not_allowed', 400, 'message roles must be one of system, developer, user, assistant, tool'),
  streamNotBoolean: def('invalid_stream', 400, '"stream" must be true or false'),
  inputMissing: def('input_missing', 400, 'the request body has no "input" string or array'),
  invalidInputItem: def('invalid_input_item', 400, 'every "input" item must be an object with a "type" (or a message "role")'),
  messagesRoleNotAllowed: def('message_role_not_allowed', 400, 'message roles must be one of user, assistant, system'),
  responsesRoleNotAllowed: def('input_role_not_allowed', 400, 'message roles must be one of system, developer, user, assistant'),
  urlContentNotAllowed: def('url_content_not_allowed', 400, 'the request gives content by URL, which the provider would fetch outside every network policy; send it inline (a data: URL or base64), or the operator can allow it with --allow-hosted-tools url_content'),
  storedStateRefused: def('stored_state_not_allowed', 400, 'the request refers to state stored at the provider, which this gateway does not let a workload reach; send the whole conversation in "input" (with "store": false)'),
  invalidTools: def('invalid_tools', 400, '"tools" must be an array of objects, each with a "type" string'),
  toolNotAllowed: def('tool_not_allowed', 400, 'that tool type is not allowed through this gateway'),
  badIdentityHeader: def('invalid_identity_header', 400, 'identity headers may hold 1-128 characters of A-Z a-z 0-9 . _ : @ / -'),
  upstreamKeyMissing: def('upstream_key_missing', 503, 'the gateway has no upstream API key: the operator must set UPSTREAM_API_KEY or UPSTREAM_API_KEY_FILE'),
  upstreamKeyInvalid: def('upstream_key_invalid', 503, 'the configured upstream API key is not a valid header value: the operator must fix it'),
  upstreamAuthFailed: def('upstream_auth_failed', 502, 'the upstream refused the gateway\'s own API key (not your bot token): the operator must check the gateway\'s key and its permissions'),
  httpVersion: def('http_version_not_supported', 505, 'only HTTP/1.1 (or HTTP/1.0 with a Host header) is accepted'),
  hostHeaderMissing: def('host_header_missing', 400, 'a Host header is required'),
  // A 404, not a 400: a client offered an upgrade (Codex's WebSocket first) falls back to plain
  // HTTP on a 404 and ends its turn on a 400.
  upgradeNotServed: def('upgrade_not_served', 404, 'this path serves no protocol upgrade (WebSocket, h2c): send the same request as plain HTTP/1.1, without Connection: Upgrade'),
  socketVersion: def('websocket_version_not_supported', 426, 'only WebSocket version 13 (RFC 6455) is served: send Sec-WebSocket-Version: 13'),
  socketHandshake: def('websocket_handshake_invalid', 400, 'the WebSocket upgrade needs Upgrade: websocket and a Sec-WebSocket-Key of 16 bytes in base64 (RFC 6455 section 4.1)'),
  socketEventNotServed: def('unsupported_client_event', 400, 'on this WebSocket the gateway takes "response.create" messages only, each one JSON object in a text message'),
  socketTurnInFlight: def('response_in_flight', 409, 'a response is still in progress on this WebSocket: send the next response.create after its response.completed (or open another connection)'),
  bodyOnBodylessMethod: def('body_not_allowed', 400, 'a GET or HEAD request may not carry a body: send it without Content-Length (or with Content-Length: 0) and without Transfer-Encoding'),
  internal: def('internal', 500, 'internal proxy error'),
} as const;

/**
 * The same error with a message that names what it is about. Only what the client already
 * knows or the registry holds may go in (a registry key, the repository path it asked for):
 * never a credential, never upstream text.
 */
export function withMessage(error: ProxyError, message: string): ProxyError {
  return Object.freeze({ ...error, message });
}

// What went wrong on the upstream leg. Transport error codes are mapped in exactly one place.
export type UpstreamFailure =
  | 'connect_refused'
  | 'dns'
  | 'tls'
  | 'reset'
  | 'connect_timeout'
  | 'response_timeout'
  | 'idle_timeout'
  | 'protocol'
  /** The upstream ended a stream's body cleanly but without the protocol's end event. */
  | 'truncated'
  /** The client's request body stopped arriving (--body-timeout): the upstream request is cut with it. */
  | 'body_timeout'
  /** The egress proxy (HTTPS_PROXY) could not be reached, refused the CONNECT or answered it malformed (tunnel.ts). */
  | 'egress'
  | 'other';

/** An upstream-leg failure. `cause` is kept for the log, never shown to a client. */
export class UpstreamError extends Error {
  override readonly name = 'UpstreamError';
  constructor(readonly kind: UpstreamFailure, options?: { cause?: unknown }) {
    super(`upstream ${kind}`, options);
  }
}

export function classifyUpstreamError(err: unknown): UpstreamFailure {
  if (err instanceof UpstreamError) return err.kind;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return 'other';
  switch (code) {
    case 'ERR_EGRESS_PROXY':
      return 'egress';
    case 'ECONNREFUSED':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'EADDRNOTAVAIL':
      return 'connect_refused';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'dns';
    case 'ECONNRESET':
    case 'EPIPE':
    case 'ECONNABORTED':
    case 'ERR_STREAM_PREMATURE_CLOSE':
      return 'reset';
    case 'ETIMEDOUT':
      return 'connect_timeout';
  }
  if (code.startsWith('HPE_')) return 'protocol';
  if (
    code.startsWith('ERR_TLS_') ||
    code.startsWith('ERR_SSL_') ||
    code.startsWith('CERT_') ||
    code.startsWith('UNABLE_TO_') ||
    code === 'DEPTH_ZERO_SELF_SIGNED_CERT' ||
    code === 'SELF_SIGNED_CERT_IN_CHAIN'
  ) {
    return 'tls';
  }
  return 'other';
}

/** The error a client gets for an upstream failure that happened before any response byte. */
export function errorForUpstreamFailure(kind: UpstreamFailure): ProxyError {
  switch (kind) {
    case 'connect_timeout':
    case 'response_timeout':
    case 'idle_timeout':
      return ERRORS.upstreamTimeout;
    case 'tls':
      return ERRORS.upstreamTls;
    case 'protocol':
      return ERRORS.upstreamProtocol;
    case 'body_timeout':
      return ERRORS.bodyTimeout;
    case 'egress':
      return ERRORS.egressProxyFailed;
    default:
      return ERRORS.upstreamUnreachable;
  }
}

/**
 * The error a client gets for an upstream failure before any response byte, with the egress
 * proxy's own message when it was the egress proxy (tunnel.ts's EgressError: it names the egress
 * proxy and its status, never a credential or the egress proxy's text).
 */
export function errorForUpstream(err: UpstreamError): ProxyError {
  const error = errorForUpstreamFailure(err.kind);
  const cause = err.cause as { code?: unknown; message?: unknown } | undefined;
  return err.kind === 'egress' && cause?.code === 'ERR_EGRESS_PROXY' && typeof cause.message === 'string' ? withMessage(error, cause.message) : error;
}
