import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { tempDir } from './tmp.ts';

/** A self-signed certificate for 127.0.0.1 and localhost, PEM-encoded. */
export interface Certificate {
  key: string;
  cert: string;
  /** A file holding `cert`, for KNOTLESS_CA_CERTS; removed when this process exits. */
  certFile: string;
}

/**
 * Makes a throwaway certificate with the openssl command (Node cannot issue X.509 certificates by
 * itself). Valid two days. The private key is on disk only while openssl writes it; the certificate's
 * file stays until the process exits (children are given it as KNOTLESS_CA_CERTS).
 */
export function makeCertificate(): Certificate {
  const { dir } = tempDir('knotless-tls-');
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  try {
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
  } finally {
    fs.rmSync(keyFile, { force: true });
  }
}
