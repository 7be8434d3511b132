// Throwaway files of the tests' own making go when the process ends, passed or failed: the TLS
// certificate's folder (its private key sooner, once read) and any other tempDir().
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';
import { makeCertificate } from '../src/tls.ts';

const TLS = pathToFileURL(path.join(import.meta.dirname, '..', 'src', 'tls.ts')).href;

/** Runs `body` as a module in a child Node after making a certificate; returns what it printed. */
async function child(body: string): Promise<{ code: number | null; lines: string[] }> {
  const script = `import fs from 'node:fs'; import path from 'node:path';
import { makeCertificate } from '${TLS}';
const cert = makeCertificate();
console.log(cert.certFile);
console.log(fs.existsSync(path.join(path.dirname(cert.certFile), 'key.pem')));
${body}`;
  const proc = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  const code = await new Promise<number | null>((resolve) => proc.on('close', resolve));
  return { code, lines: out.trim().split('\n') };
}

describe('temporary files of the dev network', () => {
  it('keeps no private key on disk, and the certificate only while it is in use', () => {
    const cert = makeCertificate();
    assert.match(cert.key, /PRIVATE KEY/);
    assert.deepEqual(fs.readdirSync(path.dirname(cert.certFile)), ['cert.pem']);
  });

  for (const [how, body, code] of [
    ['ends normally', '', 0],
    ['fails with an uncaught error', "throw new Error('a failing test');", 1],
    ['calls process.exit', 'process.exit(3);', 3],
  ] as const) {
    it(`removes the certificate's folder when the process ${how}`, async () => {
      const res = await child(body);
      assert.equal(res.code, code);
      const [certFile, keyThere] = res.lines;
      assert.match(certFile!, /knotless-tls-/);
      assert.equal(keyThere, 'false', 'the private key was still on disk');
      assert.equal(fs.existsSync(path.dirname(certFile!)), false, `${certFile} was left behind`);
    });
  }
});
