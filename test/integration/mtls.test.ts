// Mutual TLS on the git listener (issue 28 item 5), in this process: the listener as src/run/tls.ts
// builds it from the flags (--tls-cert, --tls-key, --tls-client-ca, --spiffe-trust-domain,
// --workload-policy), the real git handler behind it, a real `git http-backend` upstream, and an
// openssl-made PKI. What is refused where:
//   at the handshake  no client certificate, one from another CA, an expired one (OpenSSL, with
//                     requestCert + rejectUnauthorized): no request is read, a tls_refused line
//   403 + the reason  a verified certificate without exactly one SPIFFE ID in the trust domain
//                     naming /ns/<ns>/sa/<sa>, or whose account the policy does not grant (no
//                     401: its challenge would make git ask for a password and hide the reason)
import assert from 'node:assert/strict';
import { appendFileSync, copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import { after, before, test } from 'node:test';
import type { ServeOptions } from '../../src/config/cli.ts';
import { literalSecret } from '../../src/config/secret.ts';
import { gitWorkloadConfig } from '../../src/git/config.ts';
import { parseHostsFile } from '../../src/git/hosts.ts';
import { createGitHandler, refuseAtGit, type GitProxyDeps, type GitUpstream } from '../../src/git/proxy.ts';
import type { GitRequestRecord } from '../../src/git/record.ts';
import { createUpstreamAgent } from '../../src/http/forward.ts';
import type { LogRecord } from '../../src/http/log.ts';
import { startListener, type Listener } from '../../src/http/server.ts';
import { tlsFileSource } from '../../src/http/tls-listener.ts';
import { listenerVerifier } from '../../src/run/keys.ts';
import { sharedWorkloadPolicy } from '../../src/run/policy-file.ts';
import { listenerTls } from '../../src/run/tls.ts';
import { makeGitHome, runGit } from '../support/git-client.ts';
import { startGitServer, type GitServer } from '../support/git-server.ts';
import { GOOD_ID, makeMtlsPki, TRUST_DOMAIN, type ClientPair, type MtlsPki } from '../support/mtls-pki.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

let pki: MtlsPki;
let upstreamPki: TestPki;
let server: GitServer;
let listener: Listener;
let work: string;
let bundleFile: string;
const records: GitRequestRecord[] = [];
/** Told of each record as it is written; a waiter that returns true has what it waited for. */
const recordWaiters: ((rec: GitRequestRecord) => boolean)[] = [];
const logs: LogRecord[] = [];
/** The TLS files' clock: the listener looks at them at most once a second of it. */
let filesClockMs = 0;
/** The tls_refused lines the server would have written unthrottled (its 'tlsClientError' events). */
let handshakesRefused = 0;

before(async () => {
  pki = makeMtlsPki();
  upstreamPki = makeTestPki();
  server = await startGitServer({ pki: upstreamPki, auth: { type: 'bearer', token: 'ghp_mtls_host_token_0123456789' } });
  server.createBareRepo('acme/widgets.git');
  work = mkdtempSync(join(tmpdir(), 'test-mtls-'));
  bundleFile = join(work, 'client-ca.pem');
  copyFileSync(pki.caFile, bundleFile);
  const policyFile = join(work, 'policy.json');
  writeFileSync(policyFile, JSON.stringify({ serviceAccounts: { 'agents/triage-bot': { git: [`${server.hostKey}/acme/*:read`], models: true } } }));
  const options = { tlsCertFile: pki.serverCertFile, tlsKeyFile: pki.serverKeyFile, tlsClientCaFile: bundleFile, spiffeTrustDomain: TRUST_DOMAIN, workloadPolicyFile: policyFile } as ServeOptions;
  const log = (r: LogRecord) => void logs.push(r);
  const tls = listenerTls(options, 'git', sharedWorkloadPolicy(policyFile, log), log);
  assert.equal(tls.mode, 'mutual-tls');
  const [config] = parseHostsFile(JSON.stringify({ hosts: [{ host: server.hostKey, auth: 'bearer', tokenEnv: 'UNUSED' }] }), 'test');
  const upstream: GitUpstream = { config: config!, agent: createUpstreamAgent({ ca: upstreamPki.caPem, tlsInsecureSkipVerify: false }), token: literalSecret('ghp_mtls_host_token_0123456789'), username: undefined };
  const deps: GitProxyDeps = {
    hosts: new Map([[config!.key, upstream]]),
    // No signing key: the client certificate is the only proof this listener takes.
    verifier: listenerVerifier([tls.certificates]),
    timeouts: { connectMs: 5000, responseMs: 10_000, idleMs: 10_000, bodyIdleMs: 5000 },
    revoked: undefined,
    maxConcurrentPerWorkload: 0,
    record: (rec) => {
      records.push(rec);
      recordWaiters.splice(0, recordWaiters.length, ...recordWaiters.filter((w) => !w(rec)));
    },
    log,
  };
  listener = await startListener({
    name: 'git',
    flag: 'git-auth-listen',
    address: { host: '127.0.0.1', port: 0 },
    timeouts: { headerMs: 5000, keepAliveMs: 5000 },
    caps: { total: 0, perClient: 0 },
    log,
    handle: createGitHandler(deps),
    refuse: refuseAtGit(deps),
    // The files as listenerTls reads them, on a clock the tests move instead of waiting a second.
    tls: tlsFileSource({ certFile: pki.serverCertFile, keyFile: pki.serverKeyFile, clientCaFile: bundleFile }, 'git', log, () => filesClockMs),
  });
  listener.server.on('tlsClientError', () => void handshakesRefused++);
});

after(async () => {
  await listener?.close(0);
  await server?.close();
  pki?.cleanup();
  upstreamPki?.cleanup();
  if (work) rmSync(work, { recursive: true, force: true });
});

const REFS = () => `/${server.hostKey}/acme/widgets.git/info/refs?service=git-upload-pack`;

type Answer = { status: number; body: string; protocol: string | null } | { error: string };

/** One GET through a fresh connection, with the client's certificate (or none). */
function get(client: ClientPair | undefined, path = REFS(), extra: { maxVersion?: 'TLSv1.2' } = {}): Promise<Answer> {
  return new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', port: listener.port, path, ca: pki.caPem, servername: 'localhost', agent: false, ...(client ? { cert: client.cert, key: client.key } : {}), ...extra },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), protocol: (res.socket as TLSSocket).getProtocol?.() ?? null }));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
    req.end();
  });
}

function refusedAtHandshake(answer: Answer, what: string): void {
  assert.ok('error' in answer, `${what}: expected the handshake to fail, got ${JSON.stringify(answer)}`);
}

/** The record of the request served after `before` records: written when the handler finishes, which may be just after the client has the whole answer. */
async function servedRecord(before: number): Promise<GitRequestRecord> {
  return records.slice(before).find((r) => r.status === 200) ?? (await new Promise<GitRequestRecord>((resolve) => recordWaiters.push((r) => r.status === 200 && (resolve(r), true))));
}

function refusedWith(answer: Answer, reason: RegExp, what: string): void {
  assert.ok(!('error' in answer), `${what}: ${JSON.stringify(answer)}`);
  assert.equal(answer.status, 403, `${what}: ${answer.body}`);
  assert.match(answer.body, /the client certificate was refused: /, what);
  assert.match(answer.body, reason, what);
}

test('mutual TLS: a certificate with the SPIFFE ID of an account the policy grants is served, as that account, over TLS 1.3', async () => {
  const before = records.length;
  const answer = await get(pki.clients.good);
  assert.ok(!('error' in answer), JSON.stringify(answer));
  assert.equal(answer.status, 200, answer.body);
  assert.equal(answer.protocol, 'TLSv1.3');
  const rec = await servedRecord(before);
  assert.equal(rec?.instance_id, 'agents/triage-bot');
  assert.equal(rec?.workflow, 'agents/triage-bot');
});

test('mutual TLS: a TLS 1.2 client is served too (TLS 1.2 is the minimum)', async () => {
  const before = records.length;
  const answer = await get(pki.clients.good, REFS(), { maxVersion: 'TLSv1.2' });
  assert.ok(!('error' in answer), JSON.stringify(answer));
  assert.equal(answer.status, 200);
  assert.equal(answer.protocol, 'TLSv1.2');
  // Its record, written just after the answer, is in before the next test counts records.
  await servedRecord(before);
});

test('mutual TLS: no client certificate, one from another CA, or an expired one is refused at the handshake, with a tls_refused line', async () => {
  const before = records.length;
  const logged = logs.length;
  const seen = handshakesRefused;
  refusedAtHandshake(await get(undefined), 'no certificate');
  refusedAtHandshake(await get(pki.clients.otherCa), 'another CA');
  refusedAtHandshake(await get(pki.clients.expired), 'expired');
  assert.equal(records.length, before, 'no request was read');
  // The server sees each failed handshake as the client does, or just after.
  while (handshakesRefused < seen + 3) await new Promise((r) => setImmediate(r));
  // The first names the client; the two within the interval are summed into the next line.
  const refused = logs.slice(logged).filter((l) => l.event === 'tls_refused');
  assert.equal(refused.length, 1, JSON.stringify(logs.slice(logged)));
  assert.equal(refused[0]!.listener, 'git');
  assert.equal(refused[0]!.client, '127.0.0.1');
  assert.equal(refused[0]!.refused, 1);
  assert.equal(typeof refused[0]!.reason, 'string');
});

test('mutual TLS: a verified certificate without a SPIFFE ID is refused with 403 saying which URI SAN to give it', async () => {
  refusedWith(await get(pki.clients.noSan), new RegExp(`no SPIFFE ID: give it one URI SAN spiffe://${TRUST_DOMAIN}/ns/<namespace>/sa/<serviceaccount>`), 'no SAN');
  refusedWith(await get(pki.clients.dnsOnly), /no SPIFFE ID/, 'a DNS SAN only');
});

test('mutual TLS: a SPIFFE ID in another trust domain is refused with 403 naming both trust domains', async () => {
  refusedWith(await get(pki.clients.wrongDomain), new RegExp(`trust domain evil.example, not ${TRUST_DOMAIN.replace('.', '\\.')}`), 'wrong trust domain');
});

test('mutual TLS: two URI SANs, or a URI that is not a SPIFFE ID, are refused with 403', async () => {
  refusedWith(await get(pki.clients.twoUris), /has 2 URI SANs: an X\.509-SVID has exactly one/, 'two URIs');
  refusedWith(await get(pki.clients.notSpiffe), /URI SAN is not a SPIFFE ID: it does not begin with spiffe:\/\//, 'https URI');
});

test('mutual TLS: a CA certificate presented as a client certificate is refused', async () => {
  const answer = await get(pki.clients.caTrue);
  // OpenSSL may refuse it at the handshake; if it does not, the SVID rule does.
  if (!('error' in answer)) refusedWith(answer, /is a CA certificate/, 'CA:TRUE');
});

test('mutual TLS: an account the workload policy does not list is refused with 403 naming it and what to add', async () => {
  refusedWith(await get(pki.clients.otherAccount), /the service account billing\/reporter is not in the workload policy .*: add "billing\/reporter"/, 'unmapped account');
});

test('mutual TLS: a TLS 1.2 client asking to renegotiate is cut (no renegotiation)', async () => {
  const socket = await new Promise<TLSSocket>((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port: listener.port, ca: pki.caPem, servername: 'localhost', cert: pki.clients.good.cert, key: pki.clients.good.key, maxVersion: 'TLSv1.2' }, () => resolve(s));
    s.once('error', reject);
  });
  assert.equal(socket.getProtocol(), 'TLSv1.2');
  const outcome = await new Promise<string>((resolve) => {
    socket.on('error', (err: NodeJS.ErrnoException) => resolve(`error ${err.code ?? err.message}`));
    socket.on('close', () => resolve('closed'));
    // Node 24 and 26 end the connection without an alert (the client reads its end while its
    // renegotiation waits, and never closes); 20 and 22 send one (EPROTO here).
    socket.on('end', () => resolve('ended'));
    const started = socket.renegotiate({ rejectUnauthorized: true }, (err) => resolve(err ? `error ${(err as NodeJS.ErrnoException).code ?? err.message}` : 'renegotiated'));
    if (started === false) resolve('not started');
    // Renegotiation happens on the next exchange: send a request to drive it.
    socket.write(`GET ${REFS()} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
  });
  socket.destroy();
  assert.notEqual(outcome, 'renegotiated', 'the server must not renegotiate');
});

test('mutual TLS: the client CA bundle is read again when it changes: a CA added is trusted, a CA removed is refused, from the next connection a second after the last look', async () => {
  refusedAtHandshake(await get(pki.clients.otherCa), 'another CA, before');
  writeFileSync(bundleFile, `${readFileSync(pki.caFile, 'utf8')}${pki.otherCaPem}`);
  filesClockMs += 1000;
  const added = await get(pki.clients.otherCa);
  assert.ok(!('error' in added) && added.status === 200, `after adding its CA: ${JSON.stringify(added)}`);
  writeFileSync(bundleFile, pki.otherCaPem);
  filesClockMs += 1000;
  refusedAtHandshake(await get(pki.clients.good), 'its CA removed');
  assert.ok(logs.some((l) => l.event === 'tls_reloaded' && l.listener === 'git'));
  copyFileSync(pki.caFile, bundleFile);
  filesClockMs += 1000;
  const back = await get(pki.clients.good);
  assert.ok(!('error' in back) && back.status === 200, JSON.stringify(back));
});

test('mutual TLS: the real git clones with its client certificate (http.sslCert) and no token at all', async () => {
  const home = makeGitHome();
  try {
    const dir = join(work, 'clone');
    const r = await runGit(
      ['-c', `http.sslCert=${pki.clients.good.certFile}`, '-c', `http.sslKey=${pki.clients.good.keyFile}`, '-c', `http.sslCAInfo=${pki.caFile}`, 'clone', `https://localhost:${listener.port}/${server.hostKey}/acme/widgets.git`, dir],
      { home: home.home },
    );
    assert.equal(r.code, 0, r.stderr);
    const denied = await runGit(['-c', `http.sslCert=${pki.clients.otherAccount.certFile}`, '-c', `http.sslKey=${pki.clients.otherAccount.keyFile}`, '-c', `http.sslCAInfo=${pki.caFile}`, 'ls-remote', `https://localhost:${listener.port}/${server.hostKey}/acme/widgets.git`], { home: home.home });
    assert.notEqual(denied.code, 0);
    assert.match(denied.stderr, /remote: git-auth-proxy: the client certificate was refused: the service account billing\/reporter is not in the workload policy/);
  } finally {
    home.cleanup();
  }
});

test('mutual TLS: git-config --tls routes the real git to https:// on the proxy, and it clones the host\'s own URL with its client certificate', async () => {
  const home = makeGitHome();
  try {
    const { text } = gitWorkloadConfig({ hostKeys: [server.hostKey], proxyHostFlag: `localhost:${listener.port}`, proxyHostEnv: undefined, credentialHelper: undefined, workloadTokenEnv: undefined, tls: true });
    appendFileSync(join(home.home, '.gitconfig'), text);
    const dir = join(work, 'clone-via-git-config');
    const r = await runGit(
      ['-c', `http.sslCert=${pki.clients.good.certFile}`, '-c', `http.sslKey=${pki.clients.good.keyFile}`, '-c', `http.sslCAInfo=${pki.caFile}`, 'clone', `https://${server.hostKey}/acme/widgets.git`, dir],
      { home: home.home },
    );
    assert.equal(r.code, 0, r.stderr);
  } finally {
    home.cleanup();
  }
});

test('mutual TLS: the identity is the SPIFFE ID checked here, the subject CN is never read', () => {
  assert.ok(GOOD_ID.endsWith('/ns/agents/sa/triage-bot'));
  assert.ok(records.every((r) => r.instance_id === null || r.instance_id === 'agents/triage-bot'), JSON.stringify(records.map((r) => r.instance_id)));
});
