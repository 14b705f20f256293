// `npm run e2e:cloud`: the real Claude Code (pinned, installed outside the tree like the other
// agents) in its Bedrock and Vertex modes, configured by `agent-config` only, through the BUILT
// gateway, against fakes that check the gateway's credentials for real: a fake STS that trades an
// EKS-style projected token for temporary credentials (the gateway's aws-web-identity source), a
// fake Bedrock runtime that verifies every SigV4 signature made with them using AWS's own signer
// (@smithy/signature-v4, installed into the e2e cache, never a dependency of the project), a fake
// Google token endpoint that verifies the service account's assertion, and a fake Vertex AI. The service-account key file is then
// rotated (another key) and picked up by the next token refresh, without a restart. Exits non-zero
// on any failure; everything it starts is stopped.
import { spawn } from 'node:child_process';
import { createHash, createHmac, generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { claudeCode } from './e2e/agents/claude-code.ts';
import { binPath, cacheRoot, ensureDependencyDir, ensureInstalled } from './e2e/install.ts';
import { startAnthropicUpstream, streamHandler, textTranscript } from '../test/support/anthropic-upstream.ts';
import { startTokenEndpoint } from '../test/support/cloud-fakes.ts';
import { CHUNK_HEADERS, encodeFrame } from '../test/support/eventstream-frame.ts';
import type { ModelRequest } from '../test/support/https-fake.ts';
import { runProxyCommand, startProxy } from '../test/support/proxy-process.ts';
import { makeTestPki } from '../test/support/tls.ts';

const SIGNER = '@smithy/signature-v4@5.7.5';
/** What the fake STS hands out for the projected token: the credentials that must sign every call. */
const AWS = { accessKeyId: 'ASIAE2ECLOUD', secretAccessKey: `e2e-secret-${Date.now()}`, sessionToken: `e2e-session-${Date.now()}` };
const REGION = 'us-east-1';
const log = (line: string) => process.stdout.write(`${line}\n`);

/** SHA-256 in the shape AWS's signer takes (a Checksum class), on node:crypto. */
class Sha256 {
  readonly #hash;
  constructor(secret?: Uint8Array) {
    this.#hash = secret ? createHmac("sha256", secret) : createHash("sha256");
  }
  update(data: Uint8Array | string): void {
    this.#hash.update(data);
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.#hash.digest());
  }
}

async function main(): Promise<void> {
  ensureInstalled(claudeCode, log);
  const signerDir = ensureDependencyDir(join(cacheRoot(), 'aws-signer'), SIGNER, log);
  const { SignatureV4 } = createRequire(join(signerDir, 'package.json'))('@smithy/signature-v4') as { SignatureV4: new (o: object) => { sign(r: object, o: object): Promise<{ headers: Record<string, string> }> } };
  const signer = new SignatureV4({ credentials: AWS, region: REGION, service: 'bedrock', sha256: Sha256, applyChecksum: false });

  const pki = makeTestPki();
  const dir = mkdtempSync(join(tmpdir(), 'e2e-cloud-'));
  const first = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const second = generateKeyPairSync('rsa', { modulusLength: 2048 });
  // Tokens that live five minutes: every call is inside the refresh-ahead window, so each one
  // sets off a background refresh, and a rotated key is used by the next token.
  const tokens = await startTokenEndpoint(pki, [first.publicKey, second.publicKey], 300);
  const [bedrock, vertex] = await Promise.all([startAnthropicUpstream(pki), startAnthropicUpstream(pki)]);
  let stsCalls = 0;
  const sts = createHttpsServer({ key: pki.keyPem, cert: pki.certPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString());
      if (form.get('Action') !== 'AssumeRoleWithWebIdentity' || form.get('WebIdentityToken') !== 'eks-projected-token') return void res.writeHead(400).end('<ErrorResponse><Error><Code>InvalidIdentityToken</Code></Error></ErrorResponse>');
      stsCalls++;
      res.writeHead(200, { 'content-type': 'text/xml' }).end(`<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>${AWS.accessKeyId}</AccessKeyId><SecretAccessKey>${AWS.secretAccessKey}</SecretAccessKey><SessionToken>${AWS.sessionToken}</SessionToken><Expiration>${new Date(Date.now() + 3600_000).toISOString()}</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`);
    });
  });
  await new Promise<void>((resolve) => sts.listen(0, '127.0.0.1', resolve));
  const stsEndpoint = `https://127.0.0.1:${(sts.address() as { port: number }).port}/`;
  const stops: (() => Promise<unknown>)[] = [() => tokens.close(), () => bedrock.close(), () => vertex.close(), () => new Promise((r) => sts.close(r))];
  try {
    const saKey = (pair: typeof first, email: string) => JSON.stringify({ type: 'service_account', private_key: pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), client_email: email, token_uri: tokens.uri });
    writeFileSync(join(dir, 'sa.json'), saKey(first, 'first@proj-1.iam.gserviceaccount.com'));
    writeFileSync(join(dir, 'eks-token'), 'eks-projected-token\n');

    let verifiedByAws = 0;
    const bedrockAnswer = async (req: IncomingMessage, res: ServerResponse, r: ModelRequest) => {
      // AWS's signer signs what arrived, with the headers the gateway says it signed.
      const signedNames = /SignedHeaders=([^,]+)/.exec(String(req.headers.authorization))?.[1]?.split(';') ?? [];
      const headers = Object.fromEntries(signedNames.map((n) => [n, String(req.headers[n])]));
      const date = String(req.headers['x-amz-date']);
      const signingDate = new Date(`${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 8)}T${date.slice(9, 11)}:${date.slice(11, 13)}:${date.slice(13, 15)}Z`);
      const [path] = r.url.split('?') as [string];
      const signed = await signer.sign({ method: req.method, protocol: 'https:', hostname: String(req.headers.host), path, query: {}, headers, body: r.body }, { signingDate });
      if (signed.headers.authorization !== req.headers.authorization) {
        res.writeHead(403, { 'content-type': 'application/json' }).end('{"message":"The request signature we calculated does not match the signature you provided."}');
        return;
      }
      verifiedByAws++;
      res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream' });
      for (const e of textTranscript('E2E-BEDROCK-OK', { model: 'us.anthropic.claude-opus-5-5' })) {
        res.write(encodeFrame(CHUNK_HEADERS, Buffer.from(JSON.stringify({ bytes: Buffer.from(JSON.stringify(e.data)).toString('base64') }))));
      }
      res.end();
    };
    for (let i = 0; i < 10; i++) bedrock.script((req, res, r) => void bedrockAnswer(req, res, r));
    for (let i = 0; i < 10; i++) vertex.script(streamHandler(textTranscript('E2E-VERTEX-OK', { model: 'claude-opus-5-5' })));
    writeFileSync(
      join(dir, 'providers.json'),
      JSON.stringify({
        providers: [
          { name: 'bedrock', kind: 'anthropic-bedrock', baseUrl: bedrock.baseUrl.replace(/\/v1$/, ''), region: REGION, credential: { type: 'aws-web-identity', roleArn: 'arn:aws:iam::123456789012:role/e2e-gateway', tokenFile: join(dir, 'eks-token'), region: REGION, stsEndpoint }, models: ['us.anthropic.claude-opus-5-5'], caFile: pki.caFile },
          { name: 'vertex', kind: 'anthropic-vertex', baseUrl: vertex.baseUrl.replace(/\/v1$/, ''), project: 'proj-1', region: 'us-east5', credential: { type: 'google-service-account', keyFile: join(dir, 'sa.json') }, models: ['claude-opus-5-5'], caFile: pki.caFile },
        ],
      }),
    );
    const env = { NODE_EXTRA_CA_CERTS: pki.caFile, MODEL_PROXY_SIGNING_KEY: `e2e-cloud-${'k'.repeat(32)}` };
    const gw = await startProxy({ env, args: ['--model-gateway-listen', '127.0.0.1:0', '--providers', join(dir, 'providers.json')], listeners: ['model'] });
    stops.unshift(() => gw.stop());
    const token = (await runProxyCommand(['mint-token', '--instance-id', 'cc-cloud', '--workflow', 'e2e', '--run-id', 'r1'], env)).stdout.trim();

    const runClaude = async (mode: string, model: string): Promise<string> => {
      const cfg = await runProxyCommand(['agent-config', '--agent', 'claude-code', '--providers', join(dir, 'providers.json'), '--proxy-host', `127.0.0.1:${gw.ports.model}`, '--model', model], env);
      if (cfg.code !== 0) throw new Error(`agent-config (${mode}) failed: ${cfg.stderr}`);
      const home = join(dir, `home-${mode}`);
      mkdirSync(join(home, '.claude'), { recursive: true });
      writeFileSync(join(home, '.claude', 'settings.json'), cfg.stdout);
      return new Promise((resolve, reject) => {
        const child = spawn(binPath(claudeCode), ['-p', 'Say OK'], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, CLAUDE_CONFIG_DIR: join(home, '.claude'), MODEL_PROXY_TOKEN: token }, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stdout.on('data', (d: Buffer) => (out += d));
        child.stderr.on('data', (d: Buffer) => (err += d));
        const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
        child.on('exit', (code) => {
          clearTimeout(timer);
          if (code === 0) resolve(out.trim());
          else reject(new Error(`claude (${mode}) exited ${code}: ${err.trim().slice(0, 500)}`));
        });
      });
    };

    const bedrockOut = await runClaude('bedrock', 'us.anthropic.claude-opus-5-5');
    if (!bedrockOut.includes('E2E-BEDROCK-OK') || verifiedByAws < 1) throw new Error(`Bedrock mode: "${bedrockOut}", signatures verified by AWS's signer: ${verifiedByAws}`);
    if (stsCalls !== 1) throw new Error(`STS was asked ${stsCalls} times`);
    log(`bedrock    claude -p → "${bedrockOut}"; credentials from STS (web identity, ${stsCalls} exchange); ${verifiedByAws} call(s) signed with them, each verified by ${SIGNER}`);

    const vertexOut = await runClaude('vertex', 'claude-opus-5-5');
    if (!vertexOut.includes('E2E-VERTEX-OK')) throw new Error(`Vertex mode: "${vertexOut}"`);
    log(`vertex     claude -p → "${vertexOut}"; tokens issued ${tokens.issued()}, for ${[...new Set(tokens.assertions.map((a) => a.iss))].join(', ')}`);

    // Rotation: another service account's key in the same file; the next refresh uses it.
    writeFileSync(join(dir, 'sa.json'), saKey(second, 'second@proj-1.iam.gserviceaccount.com'));
    await runClaude('vertex', 'claude-opus-5-5');
    await runClaude('vertex', 'claude-opus-5-5');
    const issuers = tokens.assertions.map((a) => a.iss);
    if (!issuers.includes('second@proj-1.iam.gserviceaccount.com')) throw new Error(`the rotated key was not picked up: assertions from ${issuers.join(', ')}`);
    log(`rotation   the key file now holds another service account: assertions from ${[...new Set(issuers)].join(' then ')}, no restart`);
    const records = gw.records().filter((r) => r.event === 'request' && r.status === 200);
    log(`records    ${records.map((r) => `${String(r.provider)} ${String(r.model)} in=${String(r.input_tokens)} out=${String(r.output_tokens)}`).join(' · ')}`);
    if (gw.output().includes(AWS.secretAccessKey) || gw.output().includes(AWS.sessionToken)) throw new Error('an AWS secret reached the gateway log');
    log('e2e:cloud ok');
  } finally {
    for (const stop of stops) await stop().catch(() => {});
    pki.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`e2e:cloud FAILED: ${(err as Error).message}\n`);
  process.exitCode = 1;
});
