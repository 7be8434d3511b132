import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** A self-signed certificate for 127.0.0.1 and localhost, PEM-encoded. */
export interface Certificate {
  key: string;
  cert: string;
  /** A file holding `cert`, for KNOTLESS_CA_CERTS. */
  certFile: string;
}

/**
 * Makes a throwaway certificate with the openssl command (Node cannot issue X.509 certificates by
 * itself). Valid two days; the files live in a temporary directory.
 */
export function makeCertificate(): Certificate {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-tls-'));
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '2',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ],
    { stdio: 'ignore' },
  );
  return { key: fs.readFileSync(keyFile, 'utf8'), cert: fs.readFileSync(certFile, 'utf8'), certFile };
}
