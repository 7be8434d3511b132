import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { makeCertificate, startProxy, type Proxy } from 'knotless-devnet';
import { knotless } from './helpers/cli.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test']);
const cert = makeCertificate();
let front: Proxy | undefined;

before(async () => {
  await t.ready;
  front = await startProxy({ target: t.net.pdsUrl, tls: cert });
});
after(() => front?.close());

describe('https and KNOTLESS_CA_CERTS', () => {
  it('refuses a certificate it does not trust, with a clear message', async () => {
    const res = await knotless(['login', 'alice.test', '--app-password', t.password], {
      env: t.env({ KNOTLESS_SERVICE: front!.url }),
    });
    assert.equal(res.code, 8);
    assert.match(
      res.stderr,
      /^Logging in as alice\.test \(did:plc:[a-z2-7]+\) on https:\/\/127\.0\.0\.1:\d+\nknotless: https:\/\/127\.0\.0\.1:\d+ presented a certificate that is not trusted \(\w+\); if you run that server, name its CA in KNOTLESS_CA_CERTS\.\n$/,
    );
  });

  it('trusts the certificates KNOTLESS_CA_CERTS names', async () => {
    const env = t.env({ KNOTLESS_SERVICE: front!.url, KNOTLESS_CA_CERTS: cert.certFile });
    front!.reset();
    const login = await knotless(['login', 'alice.test', '--app-password', t.password], { env });
    assert.equal(login.code, 0, login.stderr);
    const who = await knotless(['whoami'], { env });
    assert.equal(who.code, 0, who.stderr);
    assert.ok(
      front!.count('com.atproto.server.getSession') >= 1,
      'the request did not go through the https front',
    );
  });
});
