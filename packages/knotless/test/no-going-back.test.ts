// No going back (format.md, "The ref table", "Verified"): the cache keeps, per account, the newest
// commit it verified, and a proof at an older commit is refused in one sentence (exit 21), even
// though its signature holds. A proxy replays an older getRecord answer of the dev network's real PDS
// (the proof that the repository had no ref table then, which would hide a table written since); a
// reader with an empty cache has nothing to compare with and takes it. An account that moved (`knotless
// dev migrate`: another PDS, another key) starts its history again at the new PDS.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { knotless } from './helpers/cli.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { refTableProof } from './helpers/proof.ts';

const t = useNetwork(['alice.test'], { pdses: 2 });
let proxy: Proxy | undefined;
let service: string | undefined;
let cache: string | undefined;
const alice = useGitUser(t, 'alice.test', () => ({
  // Its repositories start on ref records (KNOTLESS_REF_TABLE=0): the replayed proof is of a time the
  // repository had no table yet, answered then from its ref records.
  KNOTLESS_REF_TABLE: '0',
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT: '0',
  ...(service === undefined ? {} : { KNOTLESS_SERVICE: service }),
  ...(cache === undefined ? {} : { KNOTLESS_CACHE_DIR: cache }),
}));
const URL_ = 'knotless://alice.test/site';

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdses[0]!.url });
});
after(() => proxy?.close());

function replay(body: Uint8Array): void {
  proxy!.inject({
    nsid: 'com.atproto.sync.getRecord',
    times: Infinity,
    fault: { kind: 'replace', body, contentType: 'application/vnd.ipld.car' },
  });
}

/** The newest verified commit the cache keeps for alice's account. */
function mark(): { rev: string; pds: string; key: string } {
  const file = path.join(
    alice.env['KNOTLESS_CACHE_DIR']!,
    'verified',
    `${encodeURIComponent(t.dids['alice.test']!)}.json`,
  );
  return JSON.parse(fs.readFileSync(file, 'utf8')) as { rev: string; pds: string; key: string };
}

/** git (which ends 128 when its helper fails) and `knotless repo info` (exit 21) both refuse. */
async function refused(dir: string, words: RegExp): Promise<void> {
  for (const [res, code] of [
    [await alice.git(dir, 'ls-remote', URL_), 128],
    [await alice.knotless('repo', 'info', 'alice.test/site'), 21],
  ] as const) {
    assert.equal(res.code, code, res.stderr);
    assert.equal(res.stdout, '');
    const lines = res.stderr.trim().split('\n');
    assert.equal(lines.length, 1, res.stderr);
    assert.match(lines[0]!, /^knotless: The ref table of alice\.test\/site could not be verified \(/);
    assert.match(lines[0]!, words);
  }
}

describe('no going back', () => {
  it('refuses a proof at a commit older than one it verified, and takes it with no memory of the account', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const dir = await newRepo(alice, URL_);
    const first = await commitFiles(alice, dir, { 'a.txt': 'first\n' }, 'first');
    await alice.ok(dir, 'push', '-q', 'origin', 'main');
    const old = await refTableProof(t.net.pdses[0]!.url, t.dids['alice.test']!, 'site');
    // The ref records as they were then, beside that proof: a listing is taken only as the signed
    // commit holds it, so a replay of the past must show the past whole to be taken.
    const oldListing = Buffer.from(
      await (
        await fetch(
          `${t.net.pdses[0]!.url}/xrpc/com.atproto.repo.listRecords?repo=${t.dids['alice.test']!}&collection=dev.knotless.ref&limit=100`,
        )
      ).arrayBuffer(),
    );
    const second = await commitFiles(alice, dir, { 'a.txt': 'second\n' }, 'second');
    await alice.ok(dir, 'push', '-q', 'origin', 'main');

    service = proxy!.url;
    assert.match(await alice.ok(dir, 'ls-remote', URL_), new RegExp(`^${second}\trefs/heads/main$`, 'm'));
    const newest = mark();

    replay(old);
    try {
      await refused(dir, /older than \S+ already verified on this machine/);
      assert.ok(proxy!.faultsFired.length > 0);
      assert.deepEqual(mark(), newest);
      // The same answers (the proof, and the listing of its time) to a cache that never saw the
      // account: the signature holds, so the repository as it was then is taken.
      proxy!.inject({
        nsid: 'com.atproto.repo.listRecords',
        times: Infinity,
        fault: { kind: 'replace', body: oldListing, contentType: 'application/json' },
      });
      cache = alice.dir();
      try {
        assert.match(await alice.ok(dir, 'ls-remote', URL_), new RegExp(`^${first}\trefs/heads/main$`, 'm'));
      } finally {
        cache = undefined;
      }
    } finally {
      proxy!.clearFaults();
    }
    assert.notEqual(first, second);
  });

  it('starts again at the new PDS and key when the account moved', async () => {
    const dir = alice.dir();
    // As if the old PDS's clock ran ahead: the newest verified commit there is later than any the new
    // PDS will sign. Refused while the account is there...
    const file = path.join(
      alice.env['KNOTLESS_CACHE_DIR']!,
      'verified',
      `${encodeURIComponent(t.dids['alice.test']!)}.json`,
    );
    const before = mark();
    fs.writeFileSync(file, JSON.stringify({ ...before, rev: 'zzzzzzzzzzzzz' }));
    service = proxy!.url;
    await refused(dir, /older than zzzzzzzzzzzzz already verified/);

    // ...and taken once its DID document names another PDS and key.
    const moved = await knotless(['dev', 'migrate', 'alice.test', '--dir', t.net.dir], {
      env: { ...alice.env, KNOTLESS_DEV_PASSWORD: t.password },
    });
    assert.equal(moved.code, 0, moved.stderr);
    service = t.net.pdses[1]!.url;
    // The new PDS holds the commit the old one signed until the account writes again: a write, signed
    // with the new key, makes the history the reader takes.
    const login = await alice.knotless('login', 'alice.test', '--app-password', t.password);
    assert.equal(login.code, 0, login.stderr);
    assert.equal((await alice.knotless('repo', 'create', 'another')).code, 0);
    assert.match(await alice.ok(dir, 'ls-remote', URL_), /\trefs\/heads\/main$/m);
    const after = mark();
    assert.equal(after.pds, t.net.pdses[1]!.url);
    assert.notEqual(after.key, before.key);
    assert.ok(after.rev < 'zzzzzzzzzzzzz');
  });
});
