// A throwaway PKI for mutual TLS, made with the `openssl` CLI: a CA, a loopback server
// certificate, client certificates with and without a SPIFFE ID (one good, one in another trust
// domain, one with two URI SANs, one CA:TRUE, one expired), and a second CA with a client of its
// own. EC P-256 keys (milliseconds each).
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cachedDir } from './cached-dir.ts';
import { EC_KEY, OPENSSL_CNF_BASE, opensslRecipe, runOpenssl } from './tls.ts';

export const TRUST_DOMAIN = 'cluster.local';
export const GOOD_ID = `spiffe://${TRUST_DOMAIN}/ns/agents/sa/triage-bot`;

/** A client's certificate and key, PEM. */
export interface ClientPair {
  readonly cert: string;
  readonly key: string;
  readonly certFile: string;
  readonly keyFile: string;
}

export interface MtlsPki {
  readonly dir: string;
  readonly caFile: string;
  readonly caPem: string;
  readonly otherCaPem: string;
  readonly serverCertFile: string;
  readonly serverKeyFile: string;
  readonly clients: Record<'good' | 'otherAccount' | 'noSan' | 'dnsOnly' | 'wrongDomain' | 'twoUris' | 'notSpiffe' | 'caTrue' | 'expired' | 'otherCa', ClientPair>;
  cleanup(): void;
}

const CNF = `${OPENSSL_CNF_BASE}
[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
[client_good]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectAltName = URI:${GOOD_ID}
[client_other_account]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectAltName = URI:spiffe://${TRUST_DOMAIN}/ns/billing/sa/reporter
[client_nosan]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
[client_dns]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectAltName = DNS:triage-bot.agents.svc
[client_wrongdomain]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectAltName = URI:spiffe://evil.example/ns/agents/sa/triage-bot
[client_twouris]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectAltName = URI:${GOOD_ID}, URI:spiffe://${TRUST_DOMAIN}/ns/kube-system/sa/admin
[client_notspiffe]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectAltName = URI:https://${TRUST_DOMAIN}/ns/agents/sa/triage-bot
[client_catrue]
basicConstraints = critical, CA:TRUE
keyUsage = critical, digitalSignature, keyCertSign
extendedKeyUsage = clientAuth
subjectAltName = URI:${GOOD_ID}
[ca]
default_ca = test_ca
[test_ca]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
`;

/** The mutual-TLS PKI: made once a day and cached (test/support/cached-dir.ts), in a directory of the caller's own. */
export function makeMtlsPki(): MtlsPki {
  const dir = cachedDir('mtls-pki', opensslRecipe(CNF), (into) => {
    const openssl = (args: string[]): void => runOpenssl(into, args);
    const serial = () => `0x${randomBytes(8).toString('hex')}`;
    const request = (name: string, cn: string) => openssl(['req', '-new', ...EC_KEY, '-config', 'openssl.cnf', '-subj', `/CN=${cn}`, '-keyout', `${name}.key`, '-out', `${name}.csr`]);
    const sign = (name: string, ca: string, ext: string) =>
      openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-set_serial', serial(), '-days', '1', '-extfile', 'openssl.cnf', '-extensions', ext, '-out', `${name}.pem`]);
    writeFileSync(join(into, 'openssl.cnf'), CNF);
    for (const ca of ['ca', 'other-ca']) openssl(['req', '-x509', ...EC_KEY, '-config', 'openssl.cnf', '-extensions', 'ca_ext', '-subj', `/CN=mtls test ${ca}`, '-days', '1', '-keyout', `${ca}.key`, '-out', `${ca}.pem`]);
    request('server', 'localhost');
    sign('server', 'ca', 'server_ext');
    const clients = { good: 'client_good', otherAccount: 'client_other_account', noSan: 'client_nosan', dnsOnly: 'client_dns', wrongDomain: 'client_wrongdomain', twoUris: 'client_twouris', notSpiffe: 'client_notspiffe', caTrue: 'client_catrue' } as const;
    for (const [name, ext] of Object.entries(clients)) {
      request(name, `client ${name}`);
      sign(name, 'ca', ext);
    }
    request('otherCa', 'client otherCa');
    sign('otherCa', 'other-ca', 'client_good');
    // Expired: `openssl ca` sets any validity (x509 -req only counts days from now).
    writeFileSync(join(into, 'index.txt'), '');
    writeFileSync(join(into, 'serial'), `${randomBytes(8).toString('hex')}\n`);
    request('expired', 'client expired');
    openssl(['ca', '-batch', '-config', 'openssl.cnf', '-cert', 'ca.pem', '-keyfile', 'ca.key', '-in', 'expired.csr', '-out', 'expired.pem', '-notext', '-startdate', '20200101000000Z', '-enddate', '20200102000000Z', '-extfile', 'openssl.cnf', '-extensions', 'client_good']);
  });
  const pair = (name: string): ClientPair => ({ cert: readFileSync(join(dir, `${name}.pem`), 'utf8'), key: readFileSync(join(dir, `${name}.key`), 'utf8'), certFile: join(dir, `${name}.pem`), keyFile: join(dir, `${name}.key`) });
  const names = ['good', 'otherAccount', 'noSan', 'dnsOnly', 'wrongDomain', 'twoUris', 'notSpiffe', 'caTrue', 'expired', 'otherCa'] as const;
  return {
    dir,
    caFile: join(dir, 'ca.pem'),
    caPem: readFileSync(join(dir, 'ca.pem'), 'utf8'),
    otherCaPem: readFileSync(join(dir, 'other-ca.pem'), 'utf8'),
    serverCertFile: join(dir, 'server.pem'),
    serverKeyFile: join(dir, 'server.key'),
    clients: Object.fromEntries(names.map((n) => [n, pair(n)])) as MtlsPki['clients'],
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
