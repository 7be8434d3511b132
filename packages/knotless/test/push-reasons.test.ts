import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { commitFiles, newRepo, repoMaker, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { layoutOf } from './helpers/ref-packs.ts';

// What git is told of a ref that failed comes from what the failure is (its code, the PDS's error
// name), never from words cut out of a sentence; and a PDS refusal is read by its XRPC error name.
const t = useNetwork(['alice.test']);
// Its repositories are on ref records (KNOTLESS_REF_TABLE=0), old repositories exist, and each case
// runs again on a ref table, the default layout (`layout` below): the write a case faults is the
// ref's record, or the table, a putRecord either way; a table is read again with its proof.
let layout: 'records' | 'table' = 'records';
let proxy: Proxy | undefined;
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_REF_TABLE: layout === 'table' ? '1' : '0',
  KNOTLESS_AGENT: '0',
  KNOTLESS_COMPACT: '0',
  KNOTLESS_RETRIES: '0',
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));
const makeRepo = repoMaker(alice, 'alice.test', 'reasons');
/** A new repository, checked to be on the layout its case runs on. */
async function createRepo(): Promise<string> {
  const url = await makeRepo();
  assert.equal(await layoutOf(t, 'alice.test', url.split('/').pop()!), layout);
  return url;
}
const PUT = 'com.atproto.repo.putRecord';
/**
 * How each layout reads a ref again after a refused swap, and how many such reads a push that meets
 * one makes: the ref's record once (its listing was listRecords), or the table with its proof, which
 * the push's listing read first.
 */
const REREAD = {
  records: { nsid: 'com.atproto.repo.getRecord', count: 1 },
  table: { nsid: 'com.atproto.sync.getRecord', count: 2 },
};

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl });
});
after(() => proxy?.close());

/** A repository with main pushed, and a local commit on top of it not pushed yet. */
async function ahead(): Promise<{ url: string; dir: string }> {
  const url = await createRepo();
  const dir = await newRepo(alice, url);
  await commitFiles(alice, dir, { a: '1' }, 'one');
  await alice.ok(dir, 'push', '-q', 'origin', 'main');
  await commitFiles(alice, dir, { a: '2' }, 'two');
  return { url, dir };
}

const remoteRefs = async (url: string) => alice.ok(alice.dir(), 'ls-remote', url);

for (const on of ['records', 'table'] as const)
  describe(`git's reason for a ref the PDS refused (on ${on === 'table' ? 'a ref table' : 'ref records'})`, () => {
    before(() => {
      layout = on;
    });

    it('a rate-limited write is "rate limited" to git, and the sentence says until when', async () => {
      const { url, dir } = await ahead();
      const before = await remoteRefs(url);
      // An hour: past the wait a push makes (KNOTLESS_RATE_LIMIT_WAIT), so the push fails.
      proxy!.inject({ nsid: PUT, fault: { kind: 'rate-limit', retryAfter: 3600 } });
      const res = await alice.git(dir, 'push', 'origin', 'main');
      proxy!.clearFaults();
      assert.notEqual(res.code, 0);
      // The old reason was the sentence's head: "the PDS is rate-limiting writing the refs of … until <time>".
      assert.match(res.stderr, /\[remote rejected\] +main -> main \(rate limited\)\n/);
      assert.match(res.stderr, /^knotless: The PDS is rate-limiting writing the refs of .* until \d{4}-/m);
      assert.equal(await remoteRefs(url), before);
    });

    it('a failure the PDS names in words of its own is "pds error", its words only in the sentence', async () => {
      const { url, dir } = await ahead();
      const before = await remoteRefs(url);
      proxy!.reset();
      proxy!.inject({
        nsid: PUT,
        fault: {
          kind: 'status',
          status: 400,
          error: 'Odd',
          message: 'Nope: this record key (and swap) is refused',
        },
      });
      const res = await alice.git(dir, 'push', 'origin', 'main');
      proxy!.clearFaults();
      assert.notEqual(res.code, 0);
      assert.match(res.stderr, /\[remote rejected\] +main -> main \(pds error\)\n/);
      assert.match(
        res.stderr,
        /^knotless: The PDS failed writing the refs of .*: Odd: Nope: this record key/m,
      );
      // Words of a swap or a key in a message are no swap conflict and no refused key: nothing was retried.
      assert.equal(proxy!.count(PUT), 1);
      assert.equal(await remoteRefs(url), before);
    });

    // A ref record's key is the ref's name; a table's is the repository's, which repo create wrote.
    if (on === 'records')
      it("a record key the reference PDS refuses (InvalidRequest, its one message) is written under the ref's hashed key", async () => {
        const { url, dir } = await ahead();
        await alice.ok(dir, 'push', '-q', 'origin', 'main');
        proxy!.reset();
        proxy!.inject({
          nsid: PUT,
          fault: {
            kind: 'status',
            status: 400,
            error: 'InvalidRequest',
            message: 'Unacceptable slur in record key',
          },
        });
        const res = await alice.git(dir, 'push', 'origin', 'main:refs/heads/other');
        proxy!.clearFaults();
        assert.equal(res.code, 0, res.stderr);
        assert.equal(proxy!.count(PUT), 2);
        assert.match(await remoteRefs(url), /\trefs\/heads\/other$/m);
      });

    it('a compare-and-swap the PDS refuses by name (InvalidSwap) is re-read and decided as git would', async () => {
      const { url, dir } = await ahead();
      proxy!.reset();
      // The ref did not change, so the re-read finds it as it was and the write goes through.
      proxy!.inject({
        nsid: PUT,
        fault: { kind: 'status', status: 400, error: 'InvalidSwap', message: 'x' },
      });
      const res = await alice.git(dir, 'push', 'origin', 'main');
      proxy!.clearFaults();
      assert.equal(res.code, 0, res.stderr);
      assert.equal(proxy!.count(PUT), 2);
      assert.equal(proxy!.count(REREAD[on].nsid), REREAD[on].count);
      const local = (await alice.ok(dir, 'rev-parse', 'main')).trim();
      assert.match(await remoteRefs(url), new RegExp(`^${local}\trefs/heads/main$`, 'm'));
    });
  });
