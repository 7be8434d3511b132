import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { knotless } from './helpers/cli.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork();

function sessionFile(env: Record<string, string>, did: string): string {
  return path.join(env['KNOTLESS_CONFIG_DIR']!, 'sessions', `${did.replaceAll(':', '_')}.json`);
}

describe('login, whoami, logout', () => {
  it('logs in with --app-password, stores a 0600 session and never prints tokens', async () => {
    const env = t.env();
    const res = await knotless(['login', 'alice.test', '--app-password', t.password], { env });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /Logged in as alice\.test/);
    const file = sessionFile(env, t.dids['alice.test']!);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    const session = JSON.parse(fs.readFileSync(file, 'utf8')) as { accessJwt: string; refreshJwt: string };
    for (const out of [res.stdout, res.stderr]) {
      assert.ok(!out.includes(session.accessJwt) && !out.includes(session.refreshJwt), 'a token was printed');
    }
    const who = await knotless(['whoami'], { env });
    assert.equal(who.code, 0, who.stderr);
    assert.match(who.stdout, new RegExp(`^alice\\.test \\(${t.dids['alice.test']}\\) on ${t.net.pdsUrl}`));
  });

  it('reads the password from stdin with --password', async () => {
    const env = t.env();
    const res = await knotless(['login', 'bob.test', '--password'], { env, input: `${t.password}\n` });
    assert.equal(res.code, 0, res.stderr);
    const who = await knotless(['whoami'], { env });
    assert.match(who.stdout, /^bob\.test /);
  });

  it('takes the password as --password P, before or after the handle, or --password=P', async () => {
    for (const args of [
      ['login', 'alice.test', '--password', t.password],
      ['login', '--password', t.password, 'alice.test'],
      ['login', 'alice.test', `--password=${t.password}`],
    ]) {
      const env = t.env();
      // Standard input holds a wrong password: the one on the command line is the one used.
      const res = await knotless(args, { env, input: 'not-the-password\n' });
      assert.equal(res.code, 0, `${args.join(' ')}: ${res.stderr}`);
      assert.match(res.stderr, /Logged in as alice\.test \(did:plc:/);
      assert.match((await knotless(['whoami'], { env })).stdout, /^alice\.test /);
    }
    // --password before the handle with nothing after: the handle is the handle, the password is asked.
    const env = t.env();
    const asked = await knotless(['login', '--password', 'bob.test'], { env, input: `${t.password}\n` });
    assert.equal(asked.code, 0, asked.stderr);
    assert.match((await knotless(['whoami'], { env })).stdout, /^bob\.test /);
    const twice = await knotless(['login', 'alice.test', '--password', 'p', '--app-password', 'p'], { env });
    assert.equal(twice.code, 2);
    assert.match(twice.stderr, /--app-password and --password both give the password; use one\./);
    const extra = await knotless(['login', 'alice.test', '--password', 'p', 'q'], { env });
    assert.equal(extra.code, 2);
    assert.match(extra.stderr, /takes 1 argument \(<handle>\), not 2/);
  });

  it('refuses a wrong password with one clear sentence and exit 4', async () => {
    const env = t.env();
    const res = await knotless(['login', 'alice.test', '--app-password', 'not-the-password'], { env });
    assert.equal(res.code, 4);
    // Where the password went, said before sending it, then the refusal in one sentence.
    assert.match(
      res.stderr,
      /^Logging in as alice\.test \(did:plc:[a-z2-7]+\) on http:\/\/localhost:\d+\nknotless: The PDS refused the password for alice\.test; .+\.\n$/,
    );
    assert.equal(fs.existsSync(sessionFile(env, t.dids['alice.test']!)), false);
  });

  it('refuses an unknown handle with exit 3', async () => {
    const res = await knotless(['login', 'nobody.test', '--app-password', 'x'], { env: t.env() });
    assert.equal(res.code, 3);
    assert.match(res.stderr, /nobody\.test does not exist on the dev network/);
  });

  it('says how to log in when not logged in', async () => {
    const res = await knotless(['whoami'], { env: t.env() });
    assert.equal(res.code, 4);
    assert.match(res.stderr, /You are not logged in; run `knotless login <handle>`/);
  });

  it('logs out, revoking the refresh token at the PDS', async () => {
    const env = t.env();
    assert.equal((await knotless(['login', 'alice.test', '--app-password', t.password], { env })).code, 0);
    const file = sessionFile(env, t.dids['alice.test']!);
    const { refreshJwt } = JSON.parse(fs.readFileSync(file, 'utf8')) as { refreshJwt: string };
    const out = await knotless(['logout'], { env });
    assert.equal(out.code, 0, out.stderr);
    assert.equal(fs.existsSync(file), false);
    const refresh = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.server.refreshSession`, {
      method: 'POST',
      headers: { authorization: `Bearer ${refreshJwt}` },
    });
    assert.equal(refresh.ok, false, 'the refresh token still works after logout');
    assert.equal((await knotless(['whoami'], { env })).code, 4);
    assert.equal((await knotless(['logout'], { env })).code, 4);
  });

  it('logs out of a named account and keeps the other', async () => {
    const env = t.env();
    await knotless(['login', 'alice.test', '--app-password', t.password], { env });
    await knotless(['login', 'bob.test', '--app-password', t.password], { env });
    assert.equal((await knotless(['logout', 'alice.test'], { env })).code, 0);
    assert.match((await knotless(['whoami'], { env })).stdout, /^bob\.test /);
  });

  it('logs in from KNOTLESS_IDENTIFIER and KNOTLESS_PASSWORD without a prompt', async () => {
    const env = t.env({ KNOTLESS_IDENTIFIER: 'bob.test', KNOTLESS_PASSWORD: t.password });
    const who = await knotless(['whoami'], { env });
    assert.equal(who.code, 0, who.stderr);
    assert.match(who.stdout, /^bob\.test /);
    const wrong = await knotless(['whoami'], {
      env: t.env({ KNOTLESS_IDENTIFIER: 'bob.test', KNOTLESS_PASSWORD: 'nope' }),
    });
    assert.equal(wrong.code, 4);
  });
});
