import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestCerts {
  ca: Buffer;
  serverCert: Buffer;
  serverKey: Buffer;
  clientCert: Buffer;
  clientKey: Buffer;
  /** A CA nobody trusts, with a client certificate it signed. */
  otherCa: Buffer;
  otherClientCert: Buffer;
  otherClientKey: Buffer;
}

/**
 * Makes a private CA, a server certificate for 127.0.0.1/localhost and client certificates
 * with openssl, in `dir`. Nothing is committed: every run makes fresh keys.
 */
export function makeCerts(dir: string): TestCerts {
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ca = (name: string) =>
    ssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
    );
  const leaf = (name: string, signer: string, ext: string) => {
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.csr`);
    writeFileSync(join(dir, `${name}.ext`), ext);
    ssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${signer}.crt`,
      '-CAkey',
      `${signer}.key`,
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.crt`,
    );
  };
  ca('test-ca');
  ca('other-ca');
  leaf('server', 'test-ca', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  leaf('agent', 'test-ca', 'extendedKeyUsage=clientAuth\n');
  leaf('stranger', 'other-ca', 'extendedKeyUsage=clientAuth\n');
  const read = (f: string) => readFileSync(join(dir, f));
  return {
    ca: read('test-ca.crt'),
    serverCert: read('server.crt'),
    serverKey: read('server.key'),
    clientCert: read('agent.crt'),
    clientKey: read('agent.key'),
    otherCa: read('other-ca.crt'),
    otherClientCert: read('stranger.crt'),
    otherClientKey: read('stranger.key'),
  };
}
