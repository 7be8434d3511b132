// A push stores its structure (commits, trees, tags) and its blobs in packs of their own, and a
// `--filter=blob:none` clone downloads the structure only into the helper's mirror: its blobs come
// when a checkout asks for them (git's lazy fetch). A repository whose packs carry no `holds` (pushed
// before the split) is downloaded whole, and still clones. Real git, the reference PDS, directly and
// through the warm agent; the clone's objects are checked against the same commits pushed to a bare
// repository over file://.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { GitUser } from './helpers/git.ts';
import { useParity } from './helpers/parity.ts';
import { storedPacks } from './helpers/ref-packs.ts';

// The split is on by default (format.md); one case turns it off with KNOTLESS_PACK_SPLIT=0.
// Repositories start on their ref table (the default); the case of packs pushed before the split
// makes its repository on ref records, the layout of that time (KNOTLESS_REF_TABLE=0).
const layout: NodeJS.ProcessEnv = {};
const { t, plain, warm, other, ready, stopAgent, remotes, proxy, carriedByAgent } = useParity(layout);

/** The pack list of `ref` in repository `name` as stored (its table's entry, or its record). */
const packsOf = (name: string, ref: string) => storedPacks(t, 'alice.test', name, ref) as Promise<Pack[]>;

/** Text no delta shrinks much: each file is its own blob of about 40 KiB, so packs go to blobs. */
function noise(seed: string): string {
  let out = '';
  for (let i = 0; out.length < 40_000; i++)
    out += crypto.createHash('sha256').update(`${seed}:${i}`).digest('hex') + '\n';
  return out;
}

interface Pack {
  id: string;
  holds?: string;
}

/** The pack list of `ref` in repository `name` as its record says, read from the PDS. */
async function recordOf(name: string, ref: string): Promise<{ uri: string; value: Record<string, unknown> }> {
  const query = new URLSearchParams({
    repo: t.dids['alice.test']!,
    collection: 'dev.knotless.ref',
    limit: '100',
  });
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.listRecords?${query.toString()}`);
  const { records } = (await res.json()) as {
    records: Array<{ uri: string; value: Record<string, unknown> }>;
  };
  const record = records.find((r) => r.value['repo'] === name && r.value['ref'] === ref);
  assert.ok(record !== undefined, `no record of ${ref}`);
  return record;
}

/** The packs the helper's mirror of `name` has indexed (cache/indexed-packs.ts), in `user`'s cache. */
function mirrorPacks(user: GitUser, name: string): Set<string> {
  const did = t.dids['alice.test']!.replaceAll(':', '_');
  const file = path.join(
    user.env['KNOTLESS_CACHE_DIR']!,
    'mirrors',
    did,
    `${name}.git`,
    'knotless',
    'indexed-packs',
  );
  return new Set(fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);
}

/** Two commits of three noisy files each, pushed to both remotes; returns the knotless URL and the bare one. */
async function seeded(user: GitUser): Promise<{ url: string; bare: string; name: string }> {
  const { bare, knotless: url } = await remotes(user);
  const dir = user.dir();
  await user.ok(dir, 'init', '-q');
  for (const round of [1, 2]) {
    for (const f of ['a', 'b', 'c']) fs.writeFileSync(path.join(dir, f), noise(`${f}${round}`));
    await user.ok(dir, 'add', '.');
    await user.ok(dir, 'commit', '-q', '-m', `round ${round}`);
  }
  await user.ok(dir, 'tag', '-a', '-m', 'one', 'v1');
  for (const u of [url, bare]) await user.ok(dir, 'push', '-q', u, 'main', 'v1');
  // The reference serves filters and wants of any object its refs reach, as the helper's mirror does.
  const served = bare.slice('file://'.length);
  await user.ok(served, 'config', 'uploadpack.allowFilter', 'true');
  await user.ok(served, 'config', 'uploadpack.allowReachableSHA1InWant', 'true');
  return { url, bare, name: url.split('/').pop()! };
}

/** What a repository holds, object by object (the missing ones marked `?`), and its fsck verdict. */
async function contents(user: GitUser, dir: string): Promise<string> {
  const objects = await user.ok(dir, 'rev-list', '--objects', '--all', '--missing=print');
  await user.ok(dir, 'fsck', '--no-progress', '--connectivity-only');
  return objects.split('\n').sort().join('\n');
}

for (const [who, user] of [
  ['directly', plain],
  ['through the agent', warm],
] as const) {
  describe(`structure apart from blobs, ${who}`, () => {
    after(() => stopAgent());

    it('a push lists a structure pack and a blob pack; a blob:none clone downloads the structure only, its checkout and log -p the blobs', async () => {
      await ready(user);
      const { url, bare, name } = await seeded(user);
      const packs = await packsOf(name, 'refs/heads/main');
      const kinds = packs.map((p) => p.holds);
      assert.ok(kinds.includes('structure') && kinds.includes('blobs'), `holds: ${kinds.join(', ')}`);
      assert.ok(
        kinds.every((k) => k === 'structure' || k === 'blobs'),
        `holds: ${kinds.join(', ')}`,
      );
      const blobPacks = packs.filter((p) => p.holds === 'blobs').map((p) => p.id);

      const from = proxy().requests.length;
      const dir = user.dir();
      const bn = path.join(dir, 'bn');
      const ref = path.join(dir, 'ref');
      await user.ok(dir, 'clone', '-q', '--no-checkout', '--filter=blob:none', url, bn);
      await user.ok(dir, 'clone', '-q', '--no-checkout', '--filter=blob:none', bare, ref);
      const mirrored = mirrorPacks(user, name);
      for (const p of packs.filter((p) => p.holds === 'structure')) assert.ok(mirrored.has(p.id));
      for (const id of blobPacks)
        assert.ok(!mirrored.has(id), `blob pack ${id} was downloaded for blob:none`);
      // The same objects present and promised as a clone from the bare repository.
      assert.equal(await contents(user, bn), await contents(user, ref));
      assert.match(await contents(user, bn), /^\?[0-9a-f]{40}$/m);

      for (const d of [bn, ref]) await user.ok(d, 'checkout', '-q', 'main');
      assert.equal(fs.readFileSync(path.join(bn, 'b'), 'utf8'), noise('b2'));
      for (const id of blobPacks)
        assert.ok(mirrorPacks(user, name).has(id), `blob pack ${id} not downloaded`);
      const log = (d: string) => user.ok(d, 'log', '-p', '--format=%H %s', 'main');
      assert.equal(await log(bn), await log(ref));
      const blame = (d: string) => user.ok(d, 'blame', '-s', 'a');
      assert.equal(await blame(bn), await blame(ref));
      assert.equal(await contents(user, bn), await contents(user, ref));
      if (user === warm) carriedByAgent(proxy().requests.slice(from));
    });

    it('a push of commits alone writes one structure pack, and KNOTLESS_PACK_SPLIT=0 one pack holding anything', async () => {
      await ready(user);
      const { url, name } = await seeded(user);
      const dir = user.dir();
      await user.ok(dir, 'clone', '-q', url, 'w');
      const w = path.join(dir, 'w');
      const listed = async () => await packsOf(name, 'refs/heads/main');
      const before = await listed();
      // No new blob (an empty commit, then one that renames a file): no empty blob pack beside it.
      await user.ok(w, 'commit', '-q', '--allow-empty', '-m', 'empty');
      await user.ok(w, 'mv', 'a', 'a-renamed');
      await user.ok(w, 'commit', '-q', '-m', 'rename');
      const from = proxy().requests.length;
      await user.ok(w, 'push', '-q', 'origin', 'main');
      const after = await listed();
      assert.deepEqual(after.slice(0, before.length), before);
      assert.deepEqual(
        after.slice(before.length).map((p) => p.holds),
        ['structure'],
      );
      if (user === warm) carriedByAgent(proxy().requests.slice(from));
      // The off switch: one pack of the commit and its blob, with no holds, as before the split.
      fs.writeFileSync(path.join(w, 'd'), noise('d'));
      await user.ok(w, 'add', 'd');
      await user.ok(w, 'commit', '-q', '-m', 'unsplit');
      user.env['KNOTLESS_PACK_SPLIT'] = '0';
      try {
        await user.ok(w, 'push', '-q', 'origin', 'main');
      } finally {
        delete user.env['KNOTLESS_PACK_SPLIT'];
      }
      const last = await listed();
      assert.equal(last.length, after.length + 1);
      assert.equal(last.at(-1)!.holds, undefined);
      const again = path.join(dir, 'again');
      await user.ok(dir, 'clone', '-q', '--filter=blob:none', url, again);
      assert.equal(fs.readFileSync(path.join(again, 'd'), 'utf8'), noise('d'));
      assert.equal(fs.readFileSync(path.join(again, 'a-renamed'), 'utf8'), noise('a2'));
    });

    it('repo commit writes a structure pack and a blob pack, which a blob:none clone skips', async () => {
      await ready(user);
      const { url, name } = await seeded(user);
      const file = path.join(user.dir(), 'e');
      fs.writeFileSync(file, noise('e'));
      const res = await user.knotless('repo', 'commit', name, '-m', 'add e', '--add', `e=${file}`);
      assert.equal(res.code, 0, res.stderr);
      const packs = await packsOf(name, 'refs/heads/main');
      const made = packs.slice(-2);
      assert.deepEqual(
        made.map((p) => p.holds),
        ['structure', 'blobs'],
      );
      // Cloned on another machine: this one's mirror holds every pack, since repo commit made them there.
      const dir = other.dir();
      const bn = path.join(dir, 'bn');
      await other.ok(dir, 'clone', '-q', '--no-checkout', '--filter=blob:none', url, bn);
      assert.ok(mirrorPacks(other, name).has(made[0]!.id));
      assert.ok(!mirrorPacks(other, name).has(made[1]!.id), 'the blob pack was downloaded for blob:none');
      await other.ok(bn, 'checkout', '-q', 'main');
      assert.equal(fs.readFileSync(path.join(bn, 'e'), 'utf8'), noise('e'));
      assert.ok(mirrorPacks(other, name).has(made[1]!.id), 'the checkout did not download the blob pack');
    });

    it('a repository whose packs carry no holds (pushed before the split) still clones, whole and blob:none', async () => {
      await ready(user);
      layout['KNOTLESS_REF_TABLE'] = '0';
      let seed;
      try {
        seed = await seeded(user);
      } finally {
        delete layout['KNOTLESS_REF_TABLE'];
      }
      const { url, bare, name } = seed;
      const packs = await packsOf(name, 'refs/heads/main');
      // The record as a client before the split wrote it: the same packs, without `holds`.
      for (const ref of ['refs/heads/main', 'refs/tags/v1']) {
        const { uri, value } = await recordOf(name, ref);
        const old = (value['packs'] as Array<Record<string, unknown>>).map(
          ({ holds: _h, oid: _o, blobSize: _s, ...rest }) => rest,
        );
        await putRecord(uri, { ...value, packs: old });
      }
      const dir = user.dir();
      const bn = path.join(dir, 'bn');
      const full = path.join(dir, 'full');
      const ref = path.join(dir, 'ref');
      await user.ok(dir, 'clone', '-q', '--filter=blob:none', bare, ref);
      await user.ok(dir, 'clone', '-q', '--filter=blob:none', url, bn);
      await user.ok(dir, 'clone', '-q', url, full);
      assert.equal(await contents(user, bn), await contents(user, ref));
      assert.equal(fs.readFileSync(path.join(bn, 'c'), 'utf8'), noise('c2'));
      assert.equal(fs.readFileSync(path.join(full, 'a'), 'utf8'), noise('a2'));
      // Without holds every pack may hold anything: the blob:none clone downloaded them all. (The
      // agent's view may still have held the record as pushed when it cloned: checked directly only.)
      if (user === plain)
        for (const p of packs) assert.ok(mirrorPacks(user, name).has(p.id), `pack ${p.id} skipped`);
    });
  });
}

/** Writes a record of alice's as it is given, with her password's session. */
async function putRecord(uri: string, value: Record<string, unknown>): Promise<void> {
  const session = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: 'alice.test', password: t.password }),
  });
  const { accessJwt } = (await session.json()) as { accessJwt: string };
  const [repo, collection, rkey] = uri.slice('at://'.length).split('/');
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.putRecord`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${accessJwt}` },
    body: JSON.stringify({ repo, collection, rkey, record: value }),
  });
  assert.equal(res.status, 200, await res.text());
}
