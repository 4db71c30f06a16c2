import { execFile } from 'node:child_process';
import fsp from 'node:fs/promises';
import path from 'node:path';

/**
 * Certificates made by the openssl command line (Debian's) for the TLS tests: a private CA, and
 * server or client certificates it signs. P-256 keys, unencrypted, valid for two days.
 */

export interface CertificateFiles {
  cert: string;
  key: string;
}

function openssl(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('openssl', args, { cwd, timeout: 30_000 }, (error, _stdout, stderr) => (error ? reject(new Error(`openssl ${args[0]} failed: ${stderr.trim() || error.message}`)) : resolve()));
  });
}

const NEW_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A self-signed CA named `name` in `dir`: `<name>.crt` and `<name>.key`. */
export async function makeCertificateAuthority(dir: string, name: string): Promise<CertificateFiles> {
  await fsp.mkdir(dir, { recursive: true });
  const files = { cert: path.join(dir, `${name}.crt`), key: path.join(dir, `${name}.key`) };
  await openssl(
    ['req', '-x509', ...NEW_KEY, '-keyout', files.key, '-out', files.cert, '-days', '2', '-subj', `/CN=${name}`, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
    dir,
  );
  return files;
}

/**
 * A certificate signed by `ca`: for a server (`subjectAltName` of `hosts`, IPs and DNS names) or
 * a client (`hosts` empty).
 */
export async function makeSignedCertificate(ca: CertificateFiles, name: string, hosts: readonly string[] = []): Promise<CertificateFiles> {
  const dir = path.dirname(ca.cert);
  const files = { cert: path.join(dir, `${name}.crt`), key: path.join(dir, `${name}.key`) };
  const csr = path.join(dir, `${name}.csr`);
  const extensions = path.join(dir, `${name}.ext`);
  const altNames = hosts.map((h) => (/^[\d.]+$|:/.test(h) ? `IP:${h}` : `DNS:${h}`)).join(',');
  await fsp.writeFile(
    extensions,
    [
      'basicConstraints=CA:FALSE',
      'keyUsage=critical,digitalSignature,keyAgreement',
      `extendedKeyUsage=${hosts.length > 0 ? 'serverAuth' : 'clientAuth'}`,
      ...(altNames ? [`subjectAltName=${altNames}`] : []),
      '',
    ].join('\n'),
  );
  await openssl(['req', '-new', ...NEW_KEY, '-keyout', files.key, '-out', csr, '-subj', `/CN=${name}`], dir);
  await openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-out', files.cert, '-days', '2', '-extfile', extensions], dir);
  return files;
}
