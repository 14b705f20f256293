// Every line the proxy writes to its log, as one type: LogEvent below, the union of the events
// start-up and the process write (this file), those a listener writes itself
// (http/log-events.ts), those a gateway call writes (gateway/log-events.ts), the start-up
// warnings (warnings.ts) and the two access records (git/record.ts, gateway/record.ts). Each is a
// named type discriminated by `event`: a misspelt event name, or a field its type does not name,
// is a type error where the line is written. The field types are the allowlist of what a line
// may hold: names, addresses, counts, reasons; never a header, a body, a query or a credential.
// docs/operations.md lists the events (test/unit/log-events.test.ts keeps the two in step).
import type { GatewayLogEvent } from '../gateway/log-events.ts';
import type { ProviderKind } from '../gateway/protocols/protocol.ts';
import type { CredentialSource } from '../gateway/credentials/source.ts';
import type { ModelRequestRecord } from '../gateway/record.ts';
import type { GitRequestRecord } from '../git/record.ts';
import type { StartupWarning } from './warnings.ts';

/** A git host as the start-up line shows it: presence of its credential, never its value. */
export type HostState = {
  readonly host: string;
  readonly auth: string;
  readonly credential: 'present' | 'missing';
  readonly tls_verify: boolean;
  readonly repos: string[] | undefined;
  readonly read_only: boolean | undefined;
  /** The hosts file's protectedRefs, when it has any. */
  readonly protected_refs?: string[];
  /** The egress proxy (host:port) the host is reached through, or `direct`. */
  readonly egress: string;
};

/** A token key as the logs name it: its kid and algorithm, never its value. */
export type KeyDescription = { readonly kid: string | null; readonly alg: string };

/** How a listener authenticates its callers (listenerAuthentication, keys.ts). */
export type ListenerAuthMode = 'mutual-tls' | 'jwt' | 'network-policy';

/** What a listening line adds about authentication: the issuer of service-account tokens, the keys, the TLS mode. */
export type ListenerAuthFields = {
  readonly service_account_issuer?: string;
  readonly keys?: readonly KeyDescription[];
  readonly tls: 'plain' | 'tls' | 'mutual-tls';
};

/** A provider as the gateway's listening line shows it: presence of its credential, never its value. */
export type ProviderState = {
  readonly name: string;
  readonly kind: ProviderKind;
  readonly upstream: string;
  readonly models: readonly string[];
  readonly credential: CredentialSource['type'];
  readonly key: 'present' | 'missing';
  readonly egress: string;
  /** It serves the Responses API's WebSocket mode (one provider at most). */
  readonly websocket: boolean;
};

/** A listener is up (git.ts, gateway.ts, serve.ts): its bound address and what it serves. */
export type ListeningEvent =
  | ({ readonly event: 'listening'; readonly listener: 'git'; readonly address: string; readonly version: string; readonly hosts: readonly HostState[]; readonly workload_auth: ListenerAuthMode } & ListenerAuthFields)
  | ({
      readonly event: 'listening';
      readonly listener: 'model';
      readonly address: string;
      readonly version: string;
      readonly providers: readonly ProviderState[];
      readonly apis: readonly string[];
      readonly hosted_tools: readonly string[];
      readonly bot_auth: ListenerAuthMode;
    } & ListenerAuthFields)
  | { readonly event: 'listening'; readonly listener: 'metrics'; readonly address: string; readonly version: string };

/** The limits store's settings risk its state (persistence off, an evicting memory policy): shared.ts, at its first connection. */
export type StoreWarningEvent = { readonly event: 'warning'; readonly store: string; readonly message: string };

/** A minted credential's refresh failed (a GitHub App's installation token, a provider's token): the reason, never a token or key. */
export type CredentialRefreshFailedEvent =
  | { readonly event: 'credential_refresh_failed'; readonly listener: 'git'; readonly host: string; readonly credential: 'github-app'; readonly reason: string }
  | { readonly event: 'credential_refresh_failed'; readonly listener: 'model'; readonly provider: string; readonly reason: string };

/** A listener's token key files changed and were taken: the keys now in force, kid and algorithm only. */
export type KeysReloadedEvent = { readonly event: 'keys_reloaded'; readonly listener: 'git' | 'model'; readonly keys: readonly KeyDescription[] };

/**
 * A file read while serving has a problem, logged once until it changes: a listener's key files
 * (keys.ts), the workload policy file (tls.ts), the revocations file (shared.ts). The gateway's
 * own (a provider refused its key) is ProviderKeyRefusedEvent.
 */
export type ConfigErrorEvent =
  | { readonly event: 'config_error'; readonly listener: 'git' | 'model'; readonly message: string }
  | { readonly event: 'config_error'; readonly file: string; readonly message: string }
  | { readonly event: 'config_error'; readonly message: string };

/** The workload policy file changed and was taken. */
export type WorkloadPolicyReloadedEvent = { readonly event: 'workload_policy_reloaded'; readonly file: string; readonly entries: number };

/** The shared limits store (shared.ts): its connection up or down, its state lost, trusted again. */
export type LimitsStoreEvent =
  | { readonly event: 'limits_store'; readonly state: 'up' | 'down'; readonly store: string; readonly node?: string; readonly reason?: string; readonly failure_policy: 'open' | 'closed' }
  | { readonly event: 'limits_store'; readonly state: 'trusted'; readonly store: string; readonly reason: 'confirmed' | 'expired'; readonly failure_policy: 'open' | 'closed' }
  | {
      readonly event: 'limits_store';
      readonly state: 'lost';
      readonly store: string;
      readonly lost_at: string;
      readonly until: string;
      readonly failure_policy: 'open' | 'closed';
      readonly message: string;
    };

/** Charges the store could not take yet: waiting (and how many were dropped), or all settled. */
export type LimitsChargesEvent = { readonly event: 'limits_charges'; readonly state: 'waiting' | 'settled'; readonly pending: number; readonly settled: number; readonly dropped: number };

/** Tracing is on (telemetry.ts): the collector, the sampler, the names of the headers sent (never their values), the egress. */
export type TracingEvent = { readonly event: 'tracing'; readonly endpoint: string; readonly parent_based: boolean; readonly ratio: number; readonly headers: readonly string[]; readonly egress: string };

/** Span exports began failing (the reason: a status or a connection error), or are taken again. */
export type TracesExportEvent = { readonly event: 'traces_export'; readonly endpoint: string; readonly state: 'failing'; readonly reason: string } | { readonly event: 'traces_export'; readonly endpoint: string; readonly state: 'recovered' };

/** The service-account issuer's key set was read (its kids; keys of other types skipped), or could not be: the last good set kept. */
export type ServiceAccountKeysEvent =
  | { readonly event: 'sa_keys_loaded'; readonly from: string; readonly kids: readonly string[]; readonly skipped?: readonly string[] }
  | { readonly event: 'sa_keys_failed'; readonly from: string; readonly message: string };

/** The process nets (shutdown.ts): a bug nothing else caught, logged while the process keeps serving. */
export type ProcessFaultEvent =
  | { readonly event: 'uncaught_exception'; readonly error: string; readonly detail: string }
  | { readonly event: 'unhandled_rejection'; readonly detail: string };

/** SIGTERM or SIGINT: the drain begins (with its grace), is done, or a second signal forces the cut. */
export type ShutdownEvent =
  | { readonly event: 'shutdown'; readonly signal: string; readonly phase: 'draining'; readonly grace_ms: number }
  | { readonly event: 'shutdown'; readonly signal: string; readonly phase: 'forced' | 'done' };

/** Every line the proxy writes. */
export type LogEvent =
  | GitRequestRecord
  | ModelRequestRecord
  | ListeningEvent
  | StartupWarning
  | StoreWarningEvent
  | CredentialRefreshFailedEvent
  | KeysReloadedEvent
  | ConfigErrorEvent
  | WorkloadPolicyReloadedEvent
  | LimitsStoreEvent
  | LimitsChargesEvent
  | TracingEvent
  | TracesExportEvent
  | ServiceAccountKeysEvent
  | ProcessFaultEvent
  | ShutdownEvent
  | GatewayLogEvent;
