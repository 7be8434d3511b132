// `knotless whoami` after the account's handle changed (`knotless dev account … handle`, on the dev
// network's reference PDS and PLC): it shows the handle the DID document claims now and that
// resolves back to the DID, not the one stored at login, and the stored session goes by it from then.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { knotless } from './helpers/cli.ts';
import { useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['carol.test']);
const carol = useGitUser(t, 'carol.test');

async function whoami(): Promise<{ handle: string; did: string }> {
  const res = await carol.knotless('whoami', '--json');
  assert.equal(res.code, 0, res.stderr);
  return JSON.parse(res.stdout) as { handle: string; did: string };
}

describe('whoami after a handle change', () => {
  it('shows the handle verified now, and the session is found by it', async () => {
    const did = t.dids['carol.test']!;
    assert.equal((await whoami()).handle, 'carol.test');

    const renamed = await knotless(
      ['dev', 'account', 'carol.test', 'handle', 'carol2.test', '--dir', t.net.dir],
      {
        env: { ...t.env(), KNOTLESS_DEV_PASSWORD: t.password },
      },
    );
    assert.equal(renamed.code, 0, renamed.stderr);

    const now = await whoami();
    assert.equal(now.handle, 'carol2.test');
    assert.equal(now.did, did);
    const line = await carol.knotless('whoami');
    assert.equal(line.code, 0, line.stderr);
    assert.equal(line.stdout.trim(), `carol2.test (${did}) on ${t.pdsOf['carol.test']}`);
    // The stored session goes by the new handle: `logout` finds it by that name.
    const out = await carol.knotless('logout', 'carol2.test');
    assert.equal(out.code, 0, out.stderr);
    assert.equal(out.stderr.trim(), 'Logged out of carol2.test.');
  });
});
