// KNOTLESS_VERIFY=0 (security.md, "A repository with a ref table is verified"): a proof that does not
// hold is refused by default, and taken, with one line on stderr saying verification is off, when the
// variable turns it off for one command. The forged proof is another account's real getRecord answer
// (bob's proof that he has no table by that name) served by a proxy for alice's ref table.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { refTableProof } from './helpers/proof.ts';

const t = useNetwork(['alice.test', 'bob.test']);
let proxy: Proxy | undefined;
let off = false;
const alice = useGitUser(t, 'alice.test', () => ({
  // Its repositories start on ref records (KNOTLESS_REF_TABLE=0): the forged proof says alice has no
  // table, which a reader that takes it answers from her ref records.
  KNOTLESS_REF_TABLE: '0',
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT: '0',
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
  ...(off ? { KNOTLESS_VERIFY: '0' } : {}),
}));
const URL_ = 'knotless://alice.test/site';
const OFF_LINE =
  "knotless: warning: KNOTLESS_VERIFY=0: refs are read without checking their proofs against the account's signing key, so the PDS or anyone in between can change them; unset it to verify";

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl });
});
after(() => proxy?.close());

describe('KNOTLESS_VERIFY=0', () => {
  it('takes a forged proof, saying so in one line, where it is refused by default', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const dir = await newRepo(alice, URL_);
    const head = await commitFiles(alice, dir, { 'a.txt': 'one\n' }, 'one');
    await alice.ok(dir, 'push', '-q', 'origin', 'main');

    // bob's answer for a ref table he does not have: a real proof, of the wrong account.
    proxy!.inject({
      nsid: 'com.atproto.sync.getRecord',
      times: Infinity,
      fault: {
        kind: 'replace',
        body: await refTableProof(t.net.pdsUrl, t.dids['bob.test']!, 'site'),
        contentType: 'application/vnd.ipld.car',
      },
    });
    try {
      for (const [res, code] of [
        [await alice.git(dir, 'ls-remote', URL_), 128],
        [await alice.knotless('repo', 'info', 'alice.test/site'), 21],
      ] as const) {
        assert.equal(res.code, code, res.stderr);
        assert.equal(res.stdout, '');
        assert.equal(
          res.stderr.trim(),
          "knotless: The ref table of alice.test/site could not be verified (the proof is another account's commit); nothing from it was used, so check the PDS or the network in between and try again.",
        );
      }
      const fired = proxy!.faultsFired.length;
      assert.ok(fired > 0);

      off = true;
      const ls = await alice.git(dir, 'ls-remote', URL_);
      assert.equal(ls.code, 0, ls.stderr);
      assert.match(ls.stdout, new RegExp(`^${head}\trefs/heads/main$`, 'm'));
      assert.equal(ls.stderr.trim(), OFF_LINE);
      const info = await alice.knotless('repo', 'info', 'alice.test/site');
      assert.equal(info.code, 0, info.stderr);
      assert.match(info.stdout, /refs\s+1$/m);
      assert.equal(info.stderr.trim(), OFF_LINE);
      // The forged answer was what these commands read and took.
      assert.ok(proxy!.faultsFired.length >= fired + 2);
    } finally {
      off = false;
      proxy!.clearFaults();
    }
    // Verification is back for the next command: the honest proof holds, and nothing is said.
    const ls = await alice.git(dir, 'ls-remote', URL_);
    assert.equal(ls.code, 0, ls.stderr);
    assert.equal(ls.stderr, '');
  });
});
