// AWS credentials for the Bedrock runtime: an access key id, its secret and an optional session
// token, read at request time (files re-read when they change), and every call signed with
// Signature Version 4 over the exact bytes sent.
import type { SecretSource } from '../../config/secret.ts';
import { ERRORS } from '../../http/errors.ts';
import { amzDate, authorization, sha256Hex } from './sigv4.ts';
import type { Authenticated, CredentialSource, OutgoingCall } from './source.ts';

export interface AwsSourceConfig {
  readonly accessKeyId: SecretSource;
  readonly secretAccessKey: SecretSource;
  readonly sessionToken: SecretSource | undefined;
  readonly region: string;
  /** `bedrock` for the Bedrock runtime and its OpenAI-compatible endpoint. */
  readonly service: string;
}

/** Pure: the headers that sign `call` at `nowMs` with these credentials. */
export function sigV4Headers(call: OutgoingCall, nowMs: number, region: string, service: string, credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string }): Record<string, string> {
  const date = amzDate(nowMs);
  const payloadHash = sha256Hex(call.body);
  const signed: [string, string][] = [['host', call.host], ['x-amz-date', date], ['x-amz-content-sha256', payloadHash]];
  if (call.contentType !== undefined) signed.push(['content-type', call.contentType]);
  if (credentials.sessionToken !== undefined) signed.push(['x-amz-security-token', credentials.sessionToken]);
  const q = call.target.indexOf('?');
  const path = q < 0 ? call.target : call.target.slice(0, q);
  const query = q < 0 ? '' : call.target.slice(q + 1);
  const auth = authorization({ method: call.method, path, query, headers: signed, payloadHash }, { region, service, amzDate: date }, credentials);
  const out: Record<string, string> = { 'x-amz-date': date, 'x-amz-content-sha256': payloadHash, authorization: auth };
  if (credentials.sessionToken !== undefined) out['x-amz-security-token'] = credentials.sessionToken;
  return out;
}

export function awsSource(config: AwsSourceConfig): CredentialSource {
  return {
    type: 'aws-sigv4',
    present: () => config.accessKeyId.read().ok && config.secretAccessKey.read().ok,
    authenticate: async (call, nowMs): Promise<Authenticated> => {
      const id = config.accessKeyId.read();
      const secret = config.secretAccessKey.read();
      const token = config.sessionToken?.read();
      if (!id.ok || !secret.ok || (token !== undefined && !token.ok)) {
        const which = !id.ok ? 'access key id' : !secret.ok ? 'secret access key' : 'session token';
        return { ok: false, error: ERRORS.upstreamCredentialFailed, reason: `the AWS ${which} is missing or invalid` };
      }
      const credentials = { accessKeyId: id.value, secretAccessKey: secret.value, sessionToken: token?.ok ? token.value : undefined };
      return { ok: true, headers: sigV4Headers(call, nowMs, config.region, config.service, credentials), secrets: [secret.value, ...(credentials.sessionToken ? [credentials.sessionToken] : [])] };
    },
  };
}
