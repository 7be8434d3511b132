import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { knotless } from './helpers/cli.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test']);

interface Session {
  accessJwt: string;
  refreshJwt: string;
}

/** A JWT-shaped token with the given expiry; the PDS will not accept its signature. */
function fakeJwt(exp: number): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'ES256K', typ: 'at+jwt' })}.${part({ exp, sub: 'did:plc:x' })}.c2ln`;
}

async function loggedIn(): Promise<{ env: Record<string, string>; file: string }> {
  const env = t.env({ KNOTLESS_TRACE: '1' });
  const res = await knotless(['login', 'alice.test', '--app-password', t.password], { env });
  assert.equal(res.code, 0, res.stderr);
  const file = path.join(
    env['KNOTLESS_CONFIG_DIR']!,
    'sessions',
    `${t.dids['alice.test']!.replaceAll(':', '_')}.json`,
  );
  return { env, file };
}

function patchSession(file: string, patch: Partial<Session>): Session {
  const s = JSON.parse(fs.readFileSync(file, 'utf8')) as Session;
  fs.writeFileSync(file, JSON.stringify({ ...s, ...patch }));
  return s;
}

const refreshes = (stderr: string) =>
  stderr.split('\n').filter((l) => l.includes('com.atproto.server.refreshSession')).length;

describe('token refresh', () => {
  it('renews an expired access token before sending it', async () => {
    const { env, file } = await loggedIn();
    const before = patchSession(file, { accessJwt: fakeJwt(1) });
    const res = await knotless(['whoami'], { env });
    assert.equal(res.code, 0, res.stderr);
    assert.equal(refreshes(res.stderr), 1);
    assert.doesNotMatch(res.stderr, /getSession 40/, 'the expired token was sent');
    const after = JSON.parse(fs.readFileSync(file, 'utf8')) as Session;
    assert.notEqual(after.refreshJwt, before.refreshJwt);
  });

  it('renews a token the PDS rejects and retries the request once', async () => {
    const { env, file } = await loggedIn();
    patchSession(file, { accessJwt: fakeJwt(Math.floor(Date.now() / 1000) + 3600) });
    const res = await knotless(['whoami'], { env });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /getSession 40\d/);
    assert.equal(refreshes(res.stderr), 1);
  });

  it('spends the refresh token once when many processes need it at the same time', async () => {
    const { env, file } = await loggedIn();
    patchSession(file, { accessJwt: fakeJwt(1) });
    const runs = await Promise.all(Array.from({ length: 6 }, () => knotless(['whoami'], { env })));
    for (const r of runs) assert.equal(r.code, 0, r.stderr);
    assert.equal(
      runs.reduce((n, r) => n + refreshes(r.stderr), 0),
      1,
      'more than one process refreshed',
    );
  });

  it('asks to log in again when the refresh token is dead', async () => {
    const { env, file } = await loggedIn();
    patchSession(file, { accessJwt: fakeJwt(1), refreshJwt: fakeJwt(Math.floor(Date.now() / 1000) + 3600) });
    const res = await knotless(['whoami'], { env });
    assert.equal(res.code, 4);
    assert.match(
      res.stderr,
      /Your session for alice\.test has expired; run `knotless login alice\.test` again\./,
    );
  });
});
