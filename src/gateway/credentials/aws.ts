// AWS credentials for the Bedrock runtime: an access key id, its secret and an optional session
// token, read at request time (files re-read when they change), and every call signed with
// Signature Version 4 over the exact bytes sent.
import type { SecretSource } from '../../config/secret.ts';
import { ERRORS } from '../../http/errors.ts';
import { reveal, Secret } from '../../http/secret-value.ts';
import { amzDate, authorization, sha256Hex } from './sigv4.ts';
import { secretHeaders, type Authenticated, type CredentialSource, type OutgoingCall } from './source.ts';
import { mintedSource, type Minted, type MintedSource } from './minted.ts';

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
      const credentials = { accessKeyId: reveal(id.value), secretAccessKey: reveal(secret.value), sessionToken: token?.ok ? reveal(token.value) : undefined };
      return { ok: true, headers: secretHeaders(sigV4Headers(call, nowMs, config.region, config.service, credentials)), secrets: [secret.value, ...(token?.ok ? [token.value] : [])] };
    },
  };
}

/** Pure: the temporary credentials in STS's AssumeRoleWithWebIdentity answer (XML), or why not. */
export function parseAssumeRoleAnswer(xml: string, status: number): Minted<{ accessKeyId: string; secretAccessKey: string; sessionToken: string }> {
  const field = (name: string) => new RegExp(`<${name}>([^<]{1,4096})</${name}>`).exec(xml)?.[1];
  if (status !== 200) {
    // STS's own error code only (e.g. InvalidIdentityToken), never the body as a whole.
    const code = field('Code');
    throw new Error(`STS answered ${status}${code && /^[A-Za-z.]{1,64}$/.test(code) ? `: ${code}` : ''}`);
  }
  const accessKeyId = field('AccessKeyId');
  const secretAccessKey = field('SecretAccessKey');
  const sessionToken = field('SessionToken');
  const expiration = Date.parse(field('Expiration') ?? '');
  if (!accessKeyId || !secretAccessKey || !sessionToken || Number.isNaN(expiration)) throw new Error('STS answered without credentials');
  return { value: { accessKeyId, secretAccessKey, sessionToken }, expiresAtMs: expiration };
}

export interface WebIdentityOptions {
  readonly roleArn: string;
  /** The projected service-account token (EKS IRSA), re-read at each refresh. */
  readonly readTokenFile: () => string;
  /** `https://sts.<region>.amazonaws.com/`. */
  readonly stsEndpoint: string;
  readonly region: string;
  readonly service: string;
  readonly assume: (endpoint: string, form: Record<string, string>) => Promise<{ status: number; body: Buffer }>;
  readonly onRefresh: (outcome: { ok: true } | { ok: false; reason: string }) => void;
  /** How long a call waits for a refresh in flight (minted.ts REFRESH_WAIT_MS by default). */
  readonly waitMs?: number;
}

/**
 * Web identity (EKS IRSA): the projected token traded at STS (AssumeRoleWithWebIdentity) for
 * temporary credentials, kept and refreshed before they expire; every call signed with them.
 */
export function awsWebIdentitySource(opts: WebIdentityOptions): MintedSource {
  return mintedSource({
    type: 'aws-web-identity',
    what: 'AWS web-identity credentials',
    async mint() {
      const res = await opts.assume(opts.stsEndpoint, {
        Action: 'AssumeRoleWithWebIdentity',
        Version: '2011-06-15',
        RoleArn: opts.roleArn,
        RoleSessionName: 'credential-proxy',
        DurationSeconds: '3600',
        WebIdentityToken: opts.readTokenFile().trim(),
      });
      return parseAssumeRoleAnswer(res.body.toString('utf8'), res.status);
    },
    // STS's own names for them; each goes into a header (the session token) or the signature.
    fields: (credentials) => ({ AccessKeyId: credentials.accessKeyId, SecretAccessKey: credentials.secretAccessKey, SessionToken: credentials.sessionToken }),
    use: (credentials, call, nowMs) => ({ headers: secretHeaders(sigV4Headers(call, nowMs, opts.region, opts.service, credentials)), secrets: [new Secret(credentials.secretAccessKey), new Secret(credentials.sessionToken)] }),
    present: () => {
      try {
        return opts.readTokenFile().trim() !== '';
      } catch {
        return false;
      }
    },
    onRefresh: opts.onRefresh,
    waitMs: opts.waitMs,
  });
}
