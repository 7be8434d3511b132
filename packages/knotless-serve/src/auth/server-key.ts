// The server's key: an ES256 (P-256) private key from configuration. Its public half is the OAuth
// client's JWKS (a confidential client proves itself by signing with it), and a key derived from it
// (HKDF-SHA256) seals what the index keeps of sessions with AES-256-GCM, node:crypto's AEAD: a copy
// of the database alone gives no tokens.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export interface ServerKey {
  /** The private key as PKCS#8 PEM, for the OAuth library's keyset. */
  pem: string;
  /** Seals `plain`, bound to `context` (the row it is stored in): another row's value will not open. */
  seal(plain: string, context: string): string;
  /** Opens what `seal` made for the same `context`; throws when it was altered or sealed elsewhere. */
  open(sealed: string, context: string): string;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A server key from its PEM text; throws a sentence when it is not an EC P-256 private key. */
export function serverKeyOf(pemText: string, where: string): ServerKey {
  let key: crypto.KeyObject;
  try {
    key = crypto.createPrivateKey(pemText);
  } catch (err) {
    throw new Error(`${where} is not a private key in PEM (${err instanceof Error ? err.message : ''})`, {
      cause: err,
    });
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1')
    throw new Error(
      `${where} is not a P-256 (ES256) key; make one with \`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256\``,
    );
  const pem = key.export({ type: 'pkcs8', format: 'pem' }).toString();
  const secret = Buffer.from(
    crypto.hkdfSync(
      'sha256',
      key.export({ type: 'pkcs8', format: 'der' }),
      'knotless-serve',
      'session sealing v1',
      32,
    ),
  );
  return {
    pem,
    seal(plain, context) {
      const iv = crypto.randomBytes(IV_BYTES);
      const c = crypto.createCipheriv('aes-256-gcm', secret, iv);
      c.setAAD(Buffer.from(context, 'utf8'));
      const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
      return Buffer.concat([iv, c.getAuthTag(), body]).toString('base64');
    },
    open(sealed, context) {
      const all = Buffer.from(sealed, 'base64');
      const d = crypto.createDecipheriv('aes-256-gcm', secret, all.subarray(0, IV_BYTES));
      d.setAAD(Buffer.from(context, 'utf8'));
      d.setAuthTag(all.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      return Buffer.concat([d.update(all.subarray(IV_BYTES + TAG_BYTES)), d.final()]).toString('utf8');
    },
  };
}

/**
 * The configured key; in dev mode without one, a key made once in the data directory (0600). In
 * production without one there is no sign-in: undefined.
 */
export function loadServerKey(
  file: string | undefined,
  dataDir: string,
  dev: boolean,
): ServerKey | undefined {
  if (file !== undefined) return serverKeyOf(fs.readFileSync(file, 'utf8'), file);
  if (!dev) return undefined;
  const made = path.join(dataDir, 'oauth-key.pem');
  if (!fs.existsSync(made)) {
    const { privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    fs.mkdirSync(dataDir, { recursive: true });
    fs.writeFileSync(made, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
  }
  return serverKeyOf(fs.readFileSync(made, 'utf8'), made);
}
