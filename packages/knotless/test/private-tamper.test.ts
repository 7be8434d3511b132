// A private repository's records and blobs as a hostile PDS could change them, and a removed
// member's keys against what is pushed after: each refused, nothing reaches git.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PackFile } from 'knotless-core/git/pack-file';
import { decryptPack } from 'knotless-core/private/pack-crypt';
import { RepoSealer, derive } from 'knotless-core/private/sealer';
import { accountBytes } from './helpers/account-dump.ts';
import { putRaw, uploadRaw } from './helpers/forge.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test', 'bob.test']);
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0' }));
const bob = useGitUser(t, 'bob.test');

interface Listed {
  uri: string;
  value: Record<string, unknown>;
}

async function refRecords(): Promise<Listed[]> {
  const q = new URLSearchParams({
    repo: t.dids['alice.test']!,
    collection: 'dev.knotless.ref',
    limit: '100',
  });
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.listRecords?${q}`);
  return ((await res.json()) as { records: Listed[] }).records.filter((r) => r.uri.includes('/vault~'));
}
const rkey = (r: Listed) => r.uri.slice(r.uri.lastIndexOf('/') + 1);

function ringOf(configDir: string): { epochs: Uint8Array[] } {
  const file = path.join(configDir, 'keys', 'repos', encodeURIComponent(t.dids['alice.test']!), 'vault.json');
  const v = JSON.parse(fs.readFileSync(file, 'utf8')) as { epochs: string[] };
  return { epochs: v.epochs.map((k) => Buffer.from(k, 'base64')) };
}

describe('a private repository under a hostile PDS', () => {
  let work = '';

  it('refuses a changed record and a record moved to another key', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'vault', '--private')).code, 0);
    work = await newRepo(alice, 'knotless://alice.test/vault');
    await commitFiles(alice, work, { 'big.bin': crypto.randomBytes(100_000) }, 'first');
    await alice.ok(work, 'push', '-q', 'origin', 'main', 'main:side');
    const records = await refRecords();
    assert.equal(records.length, 3, 'main, side and HEAD');
    const [a, b] = records;
    const sealed = Buffer.from((a!.value['sealed'] as { $bytes: string }).$bytes, 'base64');
    sealed[sealed.length - 5]! ^= 1;
    await putRaw(t, 'alice.test', 'dev.knotless.ref', rkey(a!), {
      ...a!.value,
      sealed: { $bytes: sealed.toString('base64') },
    });
    const changed = await alice.git(alice.dir(), 'ls-remote', 'knotless://alice.test/vault');
    assert.notEqual(changed.code, 0);
    assert.match(changed.stderr, /A ref record of the private repository does not decrypt/);

    await putRaw(t, 'alice.test', 'dev.knotless.ref', rkey(a!), b!.value);
    const moved = await alice.git(alice.dir(), 'ls-remote', 'knotless://alice.test/vault');
    assert.notEqual(moved.code, 0);
    assert.match(moved.stderr, /A ref record of the private repository does not decrypt/);
    await putRaw(t, 'alice.test', 'dev.knotless.ref', rkey(a!), a!.value);
    assert.equal((await alice.git(alice.dir(), 'ls-remote', 'knotless://alice.test/vault')).code, 0);
  });

  it('refuses a pack whose encrypted bytes were changed, before git sees it', async () => {
    const ring = ringOf(alice.env['KNOTLESS_CONFIG_DIR']!);
    const sealer = await RepoSealer.create(t.dids['alice.test']!, 'vault', ring);
    const main = (await refRecords()).find((r) => {
      try {
        return sealer.open(rkey(r), r.value).ref === 'refs/heads/main';
      } catch {
        return false;
      }
    })!;
    const record = sealer.open(rkey(main), main.value);
    const part = record.packs.find((p) => p.parts !== undefined)!;
    const blob = await (
      await fetch(
        `${t.net.pdsUrl}/xrpc/com.atproto.sync.getBlob?did=${t.dids['alice.test']}&cid=${part.parts![0]!.ref.$link}`,
      )
    ).arrayBuffer();
    const bad = Buffer.from(blob);
    bad[bad.length >> 1]! ^= 1;
    const ref = await uploadRaw(t, 'alice.test', bad);
    // The record is sealed with the repository's own key (a member could, a PDS cannot): only the
    // pack's authentication stands between these bytes and git.
    const forged = { ...record, packs: record.packs.map((p) => (p === part ? { ...p, parts: [ref] } : p)) };
    await putRaw(t, 'alice.test', 'dev.knotless.ref', rkey(main), sealer.seal(rkey(main), forged));
    const mine = await alice.git(alice.dir(), 'clone', '-q', 'knotless://alice.test/vault', 'c');
    assert.notEqual(mine.code, 0);
    assert.match(mine.stderr, /Pack [0-9a-f]{40} of the private repository does not decrypt/);
    await putRaw(t, 'alice.test', 'dev.knotless.ref', rkey(main), main.value);
  });

  it('keeps what is pushed after unshare from the removed member, records and packs', async () => {
    assert.equal((await bob.knotless('key', 'list')).code, 0);
    assert.equal((await alice.knotless('repo', 'share', 'vault', 'bob.test')).code, 0);
    await bob.ok(bob.dir(), 'ls-remote', 'knotless://alice.test/vault');
    const old = ringOf(bob.env['KNOTLESS_CONFIG_DIR']!);
    assert.equal((await alice.knotless('repo', 'unshare', 'vault', 'bob.test')).code, 0);
    const before = new Set(
      (await accountBytes(t, t.dids['alice.test']!)).blobs.map((b) => b.toString('base64')),
    );
    await commitFiles(alice, work, { 'after.bin': crypto.randomBytes(100_000) }, 'after');
    await alice.ok(work, 'push', '-q', 'origin', 'main');

    const sealer = await RepoSealer.create(t.dids['alice.test']!, 'vault', old);
    for (const r of await refRecords()) {
      assert.equal(r.value['epoch'], 1, 'every record is sealed under the new key');
      // Even told the record is of the old epoch, the old key does not open it.
      assert.throws(() => sealer.open(rkey(r), { ...r.value, epoch: 0 }), /does not decrypt/);
    }
    const fresh = (await accountBytes(t, t.dids['alice.test']!)).blobs.filter(
      (b) => !before.has(b.toString('base64')),
    );
    assert.ok(fresh.length > 0, 'the push after unshare stored blobs');
    const dir = t.tmpdir();
    for (const blob of fresh)
      for (const key of old.epochs)
        await assert.rejects(
          decryptPack(PackFile.fromBytes(blob), derive(key, 'packs'), dir, 'x'),
          /does not decrypt/,
        );
  });
});
