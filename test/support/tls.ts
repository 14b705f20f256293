// Throwaway PKI for tests and the demo: a private CA plus a loopback server
// certificate signed by it, generated with the `openssl` CLI (OpenSSL 3).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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

// Our own config file, so the result does not depend on the system
// openssl.cnf (whose default x509 extensions would clash with ours).
// The [dn] section is required by `openssl req` but its content is
// unused because every call passes -subj.
const OPENSSL_CNF = `
[req]
distinguished_name = dn
prompt = no

[dn]

[ca_ext]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash

[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, IP:::1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
`;

/** EC P-256 keys: generating them takes milliseconds, unlike RSA. */
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-noenc'];

export function makeTestPki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'test-pki-'));
  const openssl = (args: string[]): void => {
    execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  };
  try {
    writeFileSync(join(dir, 'openssl.cnf'), OPENSSL_CNF);
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
      // Random serial: no .srl bookkeeping, and every run's cert is distinct.
      '-set_serial', `0x${randomBytes(8).toString('hex')}`, '-days', '1',
      '-extfile', 'openssl.cnf', '-extensions', 'server_ext', '-out', 'server.pem',
    ]);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
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
