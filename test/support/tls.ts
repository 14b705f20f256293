// Throwaway PKI for tests and the demo: a private CA plus a loopback server
// certificate signed by it, generated with the `openssl` CLI (OpenSSL 3).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cachedDir } from './cached-dir.ts';

export interface TestPki {
  dir: string;
  /** Path of the CA certificate (PEM); what git's http.sslCAInfo wants. */
  caFile: string;
  caPem: string;
  /** Server private key and certificate (PEM), for https.createServer. */
  keyPem: string;
  certPem: string;
  cleanup(): void;
}

/**
 * The start of every test PKI's own openssl config (this file's, test/support/mtls-pki.ts's), so
 * that the result does not depend on the system openssl.cnf (whose default x509 extensions would
 * clash with ours): the [req] and [dn] sections `openssl req` requires ([dn]'s content is unused
 * because every call passes -subj) and the CA's extensions.
 */
export const OPENSSL_CNF_BASE = `
[req]
distinguished_name = dn
prompt = no

[dn]

[ca_ext]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
`;

const OPENSSL_CNF = `${OPENSSL_CNF_BASE}
[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, IP:::1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
`;

/** EC P-256 keys: generating them takes milliseconds, unlike RSA. */
export const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-noenc'];

/** Runs the openssl CLI in `cwd`, its output captured (and in the error when it fails). */
export function runOpenssl(cwd: string, args: string[]): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** What a PKI's files depend on besides its own `make`: for its cache key (test/support/cached-dir.ts). */
export const opensslRecipe = (cnf: string): string => `${cnf}${EC_KEY.join(' ')}${runOpenssl.toString()}`;

/**
 * A CA and a loopback server certificate it signed. The same `which` gives the same certificates
 * for the whole day (made once, cached: test/support/cached-dir.ts), in a directory of the
 * caller's own; another `which` is another CA, for a test that needs one its peer does not trust.
 */
export function makeTestPki(which: 'default' | 'other' = 'default'): TestPki {
  const dir = cachedDir(`pki-${which}`, opensslRecipe(OPENSSL_CNF), (into) => {
    const openssl = (args: string[]): void => runOpenssl(into, args);
    writeFileSync(join(into, 'openssl.cnf'), OPENSSL_CNF);
    openssl([
      'req', '-x509', ...EC_KEY, '-config', 'openssl.cnf', '-extensions', 'ca_ext',
      '-subj', '/CN=credential-proxy test CA', '-days', '1',
      '-keyout', 'ca.key', '-out', 'ca.pem',
    ]);
    openssl([
      'req', '-new', ...EC_KEY, '-config', 'openssl.cnf',
      '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr',
    ]);
    openssl([
      'x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key',
      // Random serial: no .srl bookkeeping.
      '-set_serial', `0x${randomBytes(8).toString('hex')}`, '-days', '1',
      '-extfile', 'openssl.cnf', '-extensions', 'server_ext', '-out', 'server.pem',
    ]);
  });
  const caFile = join(dir, 'ca.pem');
  return {
    dir,
    caFile,
    caPem: readFileSync(caFile, 'utf8'),
    keyPem: readFileSync(join(dir, 'server.key'), 'utf8'),
    certPem: readFileSync(join(dir, 'server.pem'), 'utf8'),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
