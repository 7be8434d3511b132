import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy, type ProxyRequest } from 'knotless-devnet';
import { LFS_PARALLEL } from 'knotless-core/ops/lfs';
import { cidForBlob } from 'knotless-core/records/cid';
import { spawnAgent } from './helpers/agent.ts';
import { KNOTLESS_BIN, runProcess } from './helpers/cli.ts';
import { commitFiles, newRepo, repoMaker, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

/** A small blob limit, so that an object of a few MiB splits into several blobs. */
const BLOB_LIMIT = 1024 * 1024;
const t = useNetwork(['alice.test'], { blobUploadLimit: BLOB_LIMIT });
let proxy: Proxy | undefined;
let crashAt: string | undefined;
let agentSocket: string | undefined;
let agentPid = 0;
/** Told of each request before the proxy forwards it (and awaited: it may hold the request). */
let onRequest: ((req: ProxyRequest) => Promise<void> | void) | undefined;
// Every process (git, the helper, git-lfs's transfer agent) reaches the PDS through the counting proxy.
const alice = useGitUser(t, 'alice.test', () => ({
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
  ...(crashAt === undefined ? {} : { KNOTLESS_CRASH_AT: crashAt }),
  ...(agentSocket === undefined ? {} : { KNOTLESS_AGENT_SOCKET: agentSocket }),
}));

before(async () => {
  await t.ready;
  // The agent's requests are told apart from the others' by the process holding the connection.
  proxy = await startProxy({
    target: t.net.pdsUrl,
    watchPids: () => (agentPid === 0 ? [] : [agentPid]),
    onRequest: async (req) => onRequest?.(req),
  });
});
after(() => proxy?.close());
const createRepo = repoMaker(alice, 'alice.test', 'lfs');
const oidOf = (b: Uint8Array) => crypto.createHash('sha256').update(b).digest('hex');

/** The account's dev.knotless.lfs records, as its PDS lists them. */
async function lfsRecords(handle: string): Promise<Array<{ uri: string; value: Record<string, unknown> }>> {
  const q = new URLSearchParams({ repo: t.dids[handle]!, collection: 'dev.knotless.lfs', limit: '100' });
  const res = await fetch(`${t.pdsOf[handle]}/xrpc/com.atproto.repo.listRecords?${q}`);
  assert.equal(res.status, 200);
  return ((await res.json()) as { records: Array<{ uri: string; value: Record<string, unknown> }> }).records;
}

/** The blobs noted as landed on alice's machine, by index, of each upload not finished (ops/lfs.ts). */
function landedNotes(): Array<Record<string, { ref: { ref: { $link: string }; size: number } }>> {
  const dir = path.join(alice.env['KNOTLESS_CACHE_DIR']!, 'lfs-landed');
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => (JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as { blobs: never }).blobs);
}

/** `knotless` run in `cwd` as `user`. */
const knotlessIn = (user: GitUser, cwd: string, ...args: string[]) =>
  runProcess(process.execPath, [KNOTLESS_BIN, ...args], {
    env: { ...user.env, KNOTLESS_SERVICE: proxy!.url },
    cwd,
  });

/** A repository with git-lfs set up for knotless, tracking *.bin. */
async function lfsRepo(user: GitUser, url: string): Promise<string> {
  const dir = await newRepo(user, url);
  // git-lfs's own set-up, once per user (its filters and hooks), as with any LFS server.
  await user.ok(dir, 'lfs', 'install');
  const installed = await knotlessIn(user, dir, 'lfs', 'install');
  assert.equal(installed.code, 0, installed.stderr);
  await user.ok(dir, 'lfs', 'track', '*.bin');
  return dir;
}

describe('Git LFS objects stored in the PDS', () => {
  it('pushes LFS files and clones them back: the files, not their pointers, and git lfs fsck is clean', async () => {
    const url = await createRepo();
    const dir = await lfsRepo(alice, url);
    const big = crypto.randomBytes(3 * BLOB_LIMIT + 4321);
    const small = crypto.randomBytes(1000);
    await commitFiles(alice, dir, { 'big.bin': big, 'small.bin': small, 'readme.txt': 'hi\n' }, 'lfs files');
    const push = await runProcess('git', ['push', 'origin', 'main'], {
      env: { ...alice.env, KNOTLESS_SERVICE: proxy!.url, GIT_TRACE: '1' },
      cwd: dir,
    });
    assert.equal(push.code, 0, push.stderr);
    // git-lfs asked no LFS server anything (no ssh, no HTTP): the transfer agent did it all.
    assert.doesNotMatch(push.stderr, /exec: ssh|HTTP: /);
    assert.match(push.stderr, /starting transfer adapter "knotless"/);
    // big.bin went up in four blobs (three of the limit and the rest), small.bin in one.
    const records = await lfsRecords('alice.test');
    const bigRecord = records.find((r) => r.value['oid'] === oidOf(big));
    assert.deepEqual(
      (bigRecord?.value['blobs'] as Array<{ size: number }>).map((b) => b.size),
      [BLOB_LIMIT, BLOB_LIMIT, BLOB_LIMIT, 4321],
    );
    assert.equal(
      (records.find((r) => r.value['oid'] === oidOf(small))?.value['blobs'] as unknown[]).length,
      1,
    );

    const out = alice.dir();
    const clone = await alice.git(out, 'clone', url, 'c');
    assert.equal(clone.code, 0, clone.stderr);
    const c = path.join(out, 'c');
    assert.ok(fs.readFileSync(path.join(c, 'big.bin')).equals(big));
    assert.ok(fs.readFileSync(path.join(c, 'small.bin')).equals(small));
    const files = await alice.ok(c, 'lfs', 'ls-files', '--long');
    assert.match(files, /\* big\.bin/);
    assert.match(files, /\* small\.bin/);
    assert.equal((await alice.git(c, 'lfs', 'fsck')).code, 0);
    await alice.ok(c, 'lfs', 'fetch', '--all', 'origin');
    await alice.ok(c, 'lfs', 'pull');

    // A clone whose user named an LFS server of their own keeps it: nothing of theirs is replaced.
    const own = await runProcess(
      'git',
      ['clone', '-q', '-c', 'lfs.url=https://lfs.example.test/own', url, 'own'],
      { env: { ...alice.env, GIT_LFS_SKIP_SMUDGE: '1' }, cwd: out },
    );
    assert.equal(own.code, 0, own.stderr);
    assert.equal(
      (await alice.ok(path.join(out, 'own'), 'config', 'lfs.url')).trim(),
      'https://lfs.example.test/own',
    );
    assert.equal((await alice.git(path.join(out, 'own'), 'config', 'lfs.standalonetransferagent')).code, 1);

    // A shallow clone goes through upload-pack (stateless-connect), and sets git-lfs up as well.
    const shallow = await alice.git(out, 'clone', '--depth', '1', url, 's');
    assert.equal(shallow.code, 0, shallow.stderr);
    assert.ok(fs.readFileSync(path.join(out, 's', 'big.bin')).equals(big));
  });

  it('resumes an interrupted upload: the blobs its record lists are not sent again', async () => {
    const url = await createRepo();
    const dir = await lfsRepo(alice, url);
    const big = crypto.randomBytes(6 * BLOB_LIMIT - 999);
    await commitFiles(alice, dir, { 'big.bin': big }, 'big');
    // Killed (as a power cut would) right after its third blob was listed.
    crashAt = 'lfs:blob-listed:3';
    const first = await alice.git(dir, 'push', 'origin', 'main');
    crashAt = undefined;
    assert.notEqual(first.code, 0, 'the push went on after its transfer agent was killed');
    const record = (await lfsRecords('alice.test')).find((r) => r.value['oid'] === oidOf(big));
    assert.equal((record?.value['blobs'] as unknown[]).length, 3);
    // Blobs after those three that landed side by side before the kill, noted on this machine.
    const [notes] = landedNotes();
    const after3 = Object.keys(notes ?? {}).filter((i) => Number(i) >= 3).length;

    proxy!.reset();
    await alice.ok(dir, 'push', 'origin', 'main');
    // The three blobs the record listed stayed where they were, and so did those that landed after
    // them: only the rest went up (the commit's pack, a few hundred bytes of pointers, travels
    // inside its ref record).
    assert.equal(proxy!.count('com.atproto.repo.uploadBlob'), 3 - after3);
    assert.deepEqual(landedNotes(), [], 'a finished upload leaves no notes behind');
    const done = (await lfsRecords('alice.test')).find((r) => r.value['oid'] === oidOf(big));
    assert.equal((done?.value['blobs'] as unknown[]).length, 6);
    assert.deepEqual(
      (done?.value['blobs'] as unknown[]).slice(0, 3),
      (record?.value['blobs'] as unknown[]).slice(0, 3),
    );

    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', url, 'c');
    assert.ok(fs.readFileSync(path.join(out, 'c', 'big.bin')).equals(big));
    assert.equal((await alice.git(path.join(out, 'c'), 'lfs', 'fsck')).code, 0);
    // A push with nothing new sends no blob: the complete record is read, the object is not sent.
    proxy!.reset();
    await alice.ok(dir, 'lfs', 'push', '--all', 'origin');
    assert.equal(proxy!.count('com.atproto.repo.uploadBlob'), 0);
  });

  it('a resumed upload sends none of the blobs that landed unlisted behind a slower one', async () => {
    const url = await createRepo();
    const dir = await lfsRepo(alice, url);
    const big = crypto.randomBytes(6 * BLOB_LIMIT - 777);
    await commitFiles(alice, dir, { 'big.bin': big }, 'big');
    // The first blob upload to arrive is held; the other five land (the record, listing blobs in
    // order, can list none after the held one), and the transfer agent is killed as the fifth's
    // answer is noted.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let holding = false;
    onRequest = async (req) => {
      if (req.nsid !== 'com.atproto.repo.uploadBlob' || holding) return;
      holding = true;
      await held;
    };
    crashAt = 'lfs:blob-landed:5';
    let first;
    try {
      first = await alice.git(dir, 'push', 'origin', 'main');
    } finally {
      crashAt = undefined;
      onRequest = undefined;
      release();
    }
    assert.notEqual(first.code, 0, 'the push went on after its transfer agent was killed');
    const listed = ((await lfsRecords('alice.test')).find((r) => r.value['oid'] === oidOf(big))?.value[
      'blobs'
    ] ?? []) as unknown[];
    assert.ok(listed.length < 5, `the record lists ${listed.length} blobs behind the held one`);
    assert.equal(Object.keys(landedNotes()[0] ?? {}).length, 5);

    proxy!.reset();
    await alice.ok(dir, 'push', 'origin', 'main');
    // The held blob alone goes up; the five that landed are listed from the notes.
    assert.equal(proxy!.count('com.atproto.repo.uploadBlob'), 1);
    const done = (await lfsRecords('alice.test')).find((r) => r.value['oid'] === oidOf(big));
    assert.equal((done?.value['blobs'] as unknown[]).length, 6);
    assert.deepEqual(landedNotes(), []);
    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', url, 'c');
    assert.ok(fs.readFileSync(path.join(out, 'c', 'big.bin')).equals(big));
  });

  it('a noted blob the PDS no longer holds is sent again, and the object still lands whole', async () => {
    const url = await createRepo();
    const dir = await lfsRepo(alice, url);
    const big = crypto.randomBytes(4 * BLOB_LIMIT - 555);
    await commitFiles(alice, dir, { 'big.bin': big }, 'big');
    // Killed as the first blob's answer is noted: before any record write was sent.
    crashAt = 'lfs:blob-landed:1';
    const first = await alice.git(dir, 'push', 'origin', 'main');
    crashAt = undefined;
    assert.notEqual(first.code, 0, 'the push went on after its transfer agent was killed');
    assert.equal(
      (await lfsRecords('alice.test')).find((r) => r.value['oid'] === oidOf(big)),
      undefined,
    );
    // The note names a blob the PDS never had, as after it dropped one no record listed.
    const folder = path.join(alice.env['KNOTLESS_CACHE_DIR']!, 'lfs-landed');
    const [name] = fs.readdirSync(folder);
    const file = path.join(folder, name!);
    const notes = JSON.parse(fs.readFileSync(file, 'utf8')) as {
      blobs: Record<string, { ref: { ref: { $link: string } } }>;
    };
    assert.equal(Object.keys(notes.blobs).length, 1);
    for (const note of Object.values(notes.blobs)) note.ref.ref.$link = cidForBlob(crypto.randomBytes(64));
    fs.writeFileSync(file, JSON.stringify(notes));

    proxy!.reset();
    await alice.ok(dir, 'push', 'origin', 'main');
    assert.equal(proxy!.count('com.atproto.repo.uploadBlob'), 4);
    const done = (await lfsRecords('alice.test')).find((r) => r.value['oid'] === oidOf(big));
    assert.equal((done?.value['blobs'] as unknown[]).length, 4);
    assert.deepEqual(landedNotes(), []);
    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', url, 'c');
    assert.ok(fs.readFileSync(path.join(out, 'c', 'big.bin')).equals(big));
  });

  it('uploads the blobs of one object side by side, at most a few at a time', async () => {
    const url = await createRepo();
    const dir = await lfsRepo(alice, url);
    // Two blobs of different sizes: the first blob upload to arrive is held until the other one
    // arrives too, which only an upload that sends them side by side does (a retry of the held
    // one has its own size, and does not let it go).
    const two = crypto.randomBytes(BLOB_LIMIT + 1000);
    await commitFiles(alice, dir, { 'two.bin': two }, 'two');
    let release!: () => void;
    const other = new Promise<void>((resolve) => (release = resolve));
    let held: number | undefined;
    onRequest = async (req) => {
      if (req.nsid !== 'com.atproto.repo.uploadBlob') return;
      if (held === undefined) {
        held = req.length;
        await other;
      } else if (req.length !== held) release();
    };
    try {
      await alice.ok(dir, 'push', 'origin', 'main');
    } finally {
      onRequest = undefined;
    }
    const record = (await lfsRecords('alice.test')).find((r) => r.value['oid'] === oidOf(two));
    assert.equal((record?.value['blobs'] as unknown[]).length, 2);

    // Eight blobs, nothing held: the proxy never has more than the bound of them under way.
    const eight = crypto.randomBytes(8 * BLOB_LIMIT);
    await commitFiles(alice, dir, { 'eight.bin': eight }, 'eight');
    let most = 0;
    onRequest = (req) => {
      if (req.nsid !== 'com.atproto.repo.uploadBlob') return;
      // Itself included: the proxy logs a request before it asks this hook.
      const open = proxy!.requests.filter((r) => r.nsid === req.nsid && r.status === 0).length;
      most = Math.max(most, open);
    };
    proxy!.reset();
    try {
      await alice.ok(dir, 'push', 'origin', 'main');
    } finally {
      onRequest = undefined;
    }
    assert.equal(proxy!.count('com.atproto.repo.uploadBlob'), 8);
    assert.ok(most <= LFS_PARALLEL, `${most} blob uploads were under way at once`);
    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', url, 'c');
    assert.ok(fs.readFileSync(path.join(out, 'c', 'two.bin')).equals(two));
    assert.ok(fs.readFileSync(path.join(out, 'c', 'eight.bin')).equals(eight));
  });

  it("stores a private repository's LFS objects encrypted, and clones them for its owner", async () => {
    const made = await alice.knotless('repo', 'create', 'lfs-private', '--private');
    assert.equal(made.code, 0, made.stderr);
    const url = 'knotless://alice.test/lfs-private';
    const dir = await lfsRepo(alice, url);
    const secret = Buffer.concat([
      Buffer.from('secret LFS contents '.repeat(1000)),
      crypto.randomBytes(BLOB_LIMIT),
    ]);
    await commitFiles(alice, dir, { 'secret.bin': secret }, 'secret');
    await alice.ok(dir, 'push', 'origin', 'main');

    const records = (await lfsRecords('alice.test')).filter((r) => r.value['repo'] === 'lfs-private');
    assert.equal(records.length, 1);
    const value = records[0]!.value;
    // The record names neither the object nor, in its key, anything of it.
    assert.equal(value['oid'], undefined);
    assert.ok(!records[0]!.uri.includes(oidOf(secret)));
    assert.equal(typeof value['epoch'], 'number');
    for (const blob of value['blobs'] as Array<{ ref: { $link: string } }>) {
      const q = new URLSearchParams({ did: t.dids['alice.test']!, cid: blob.ref.$link });
      const res = await fetch(`${t.pdsOf['alice.test']}/xrpc/com.atproto.sync.getBlob?${q}`);
      assert.equal(res.status, 200);
      const stored = Buffer.from(await res.arrayBuffer());
      assert.ok(!stored.includes(Buffer.from('secret LFS contents')), 'a blob holds the plain contents');
      assert.ok(!stored.includes(secret.subarray(secret.length - 4096)), 'a blob holds the plain contents');
    }

    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', url, 'c');
    assert.ok(fs.readFileSync(path.join(out, 'c', 'secret.bin')).equals(secret));
    assert.equal((await alice.git(path.join(out, 'c'), 'lfs', 'fsck')).code, 0);
  });

  it('a rate limit past the retry bound fails the object in one sentence naming when to retry, its record listing only what landed', async () => {
    const url = await createRepo();
    const dir = await lfsRepo(alice, url);
    const big = crypto.randomBytes(3 * BLOB_LIMIT);
    await commitFiles(alice, dir, { 'big.bin': big }, 'big');
    // The second blob upload is refused for an hour, well past the 30 seconds a request is retried for.
    proxy!.inject({
      nsid: 'com.atproto.repo.uploadBlob',
      nth: 2,
      fault: { kind: 'rate-limit', retryAfter: 3600 },
    });
    const push = await alice.git(dir, 'push', 'origin', 'main');
    proxy!.clearFaults();
    assert.notEqual(push.code, 0);
    assert.match(
      push.stderr,
      /knotless: The PDS is rate-limiting uploading LFS object [0-9a-f]{64} until \d{4}-\d\d-\d\dT[\d:.]+Z; try again then, in \d+ s\./,
    );
    assert.doesNotMatch(push.stderr, /^\s+at /m, 'a stack was printed');
    // The blobs go up side by side, so the refused one is whichever reached the PDS second: the
    // record lists the blobs before it, each of which landed, and none after it.
    const record = (await lfsRecords('alice.test')).find((r) => r.value['oid'] === oidOf(big));
    const listed = ((record?.value['blobs'] as unknown[] | undefined) ?? []).length;
    assert.ok(listed < 3, `${listed} blobs listed`);
    // Blobs after the refused one that landed are noted on this machine, not listed.
    const [notes] = landedNotes();
    const notedAfter = Object.keys(notes ?? {}).filter((i) => Number(i) >= listed).length;
    // Once the limit is over, the push goes on from there: only what neither the record lists nor
    // the notes hold goes up.
    proxy!.reset();
    await alice.ok(dir, 'push', 'origin', 'main');
    assert.equal(proxy!.count('com.atproto.repo.uploadBlob'), 3 - listed - notedAfter);
    assert.deepEqual(landedNotes(), []);
  });

  it('moves LFS objects through the warm agent when one runs: the agent sends their blobs', async () => {
    const socket = path.join(t.tmpdir(), 'agent.sock');
    const agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_SERVICE: proxy!.url });
    agentPid = agent.child.pid!;
    agentSocket = socket;
    try {
      const url = await createRepo();
      const dir = await lfsRepo(alice, url);
      const big = crypto.randomBytes(2 * BLOB_LIMIT + 5);
      await commitFiles(alice, dir, { 'big.bin': big }, 'big');
      proxy!.reset();
      await alice.ok(dir, 'push', 'origin', 'main');
      const uploads = proxy!.requests.filter((r) => r.nsid === 'com.atproto.repo.uploadBlob');
      assert.equal(uploads.length, 3);
      assert.ok(
        uploads.every((r) => r.pid === agentPid),
        'a blob upload did not go through the agent',
      );

      fs.rmSync(path.join(alice.env['KNOTLESS_CACHE_DIR']!, 'blobs'), { recursive: true, force: true });
      proxy!.reset();
      const out = alice.dir();
      await alice.ok(out, 'clone', '-q', url, 'c');
      assert.ok(fs.readFileSync(path.join(out, 'c', 'big.bin')).equals(big));
      const downloads = proxy!.requests.filter((r) => r.nsid === 'com.atproto.sync.getBlob');
      assert.equal(downloads.length, 3);
      assert.ok(
        downloads.every((r) => r.pid === agentPid),
        'a blob download did not go through the agent',
      );
    } finally {
      agentSocket = undefined;
      await agent.stop();
      agentPid = 0;
    }
  });

  it('refuses an object whose blobs are not its bytes: its SHA-256 is checked before git-lfs sees it', async () => {
    const url = await createRepo();
    const dir = await lfsRepo(alice, url);
    const a = crypto.randomBytes(BLOB_LIMIT + 10);
    const b = crypto.randomBytes(BLOB_LIMIT + 10);
    await commitFiles(alice, dir, { 'a.bin': a, 'b.bin': b }, 'two');
    await alice.ok(dir, 'push', 'origin', 'main');
    // The record of a.bin made to list b.bin's blobs (same size): every blob is a good blob of the
    // PDS, and only the object's hash can tell.
    const records = await lfsRecords('alice.test');
    const recA = records.find((r) => r.value['oid'] === oidOf(a))!;
    const recB = records.find((r) => r.value['oid'] === oidOf(b))!;
    const session = await fetch(`${t.pdsOf['alice.test']}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: 'alice.test', password: t.password }),
    });
    const { accessJwt } = (await session.json()) as { accessJwt: string };
    const put = await fetch(`${t.pdsOf['alice.test']}/xrpc/com.atproto.repo.putRecord`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${accessJwt}` },
      body: JSON.stringify({
        repo: t.dids['alice.test'],
        collection: 'dev.knotless.lfs',
        rkey: recA.uri.split('/').pop(),
        record: { ...recA.value, blobs: recB.value['blobs'] },
      }),
    });
    assert.equal(put.status, 200, await put.text());

    const out = alice.dir();
    const clone = await alice.git(out, 'clone', url, 'c');
    assert.notEqual(clone.code, 0);
    assert.match(
      clone.stderr,
      new RegExp(
        `LFS object ${oidOf(a)} from alice\\.test/lfs-\\d+ does not match its SHA-256; nothing was written\\.`,
      ),
    );
    assert.doesNotMatch(clone.stderr, /^\s+at /m, 'a stack was printed');
  });
});
