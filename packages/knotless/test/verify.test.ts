// `knotless verify` (cli.md, "Verification") against the dev network's real PDS and PLC directory:
// a repository on ref records is proved whole (the account, its PDS, its key, the signed commit, each
// ref verified, and the listing proved complete by walking the signed commit's tree over the
// repository's keys); a proxy that changes what the listing says of a ref (keeping its CID) gets that
// ref marked not verified and the command ends 21, and one that leaves a ref out of the listing gets
// the listing said not to be complete, ending 21; the tree's nodes within the repository's keys are
// built from the listing, or read with getBlocks when a push lands between the proofs, and a PDS
// that then withholds them or answers other bytes under their CIDs has the listing refused in one
// sentence; a repository with a ref table is proved whole; a table whose proof does not hold fails
// the command in one sentence.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jsonToLex } from '@atproto/lexicon';
import { BlockMap, blocksToCarFile, cidForRecord } from '@atproto/repo';
import { startProxy, type Proxy } from 'knotless-devnet';
import { atprotoSigningKey } from 'knotless-core/records/proof';
import { applyRefUpdates, layoutRefTable } from 'knotless-core/records/ref-table';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { refTableProof } from './helpers/proof.ts';

const t = useNetwork(['alice.test', 'bob.test']);
let proxy: Proxy | undefined;
let service = false;
/** Set while a test makes a repository on ref records (a new one starts on its ref table by default). */
let records = false;
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT: '0',
  ...(records ? { KNOTLESS_REF_TABLE: '0' } : {}),
  ...(service && proxy !== undefined ? { KNOTLESS_SERVICE: proxy.url } : {}),
}));

interface Verdict {
  repo: string;
  did: string;
  handle?: string;
  pds: string;
  key: string;
  layout: 'table' | 'records';
  complete: boolean;
  incomplete?: string;
  rev?: string;
  commit?: string;
  checkedAt: string;
  refs: { ref: string; target?: string; symref?: string; verified: boolean; why?: string }[];
}

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl });
});
after(() => proxy?.close());

/** The `#atproto` key alice's DID document names, read from the PLC directory, as a `did:key`. */
async function aliceKey(): Promise<string> {
  const did = t.dids['alice.test']!;
  const doc = (await (await fetch(`${t.net.plcUrl}/${did}`)).json()) as unknown;
  return atprotoSigningKey(did, doc)!;
}

async function session(handle: string): Promise<{ accessJwt: string; did: string }> {
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: handle, password: t.password }),
  });
  return (await res.json()) as { accessJwt: string; did: string };
}

async function put(collection: string, rkey: string, record: Record<string, unknown>): Promise<void> {
  const s = await session('alice.test');
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.putRecord`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${s.accessJwt}` },
    body: JSON.stringify({ repo: s.did, collection, rkey, record, validate: false }),
  });
  assert.equal(res.status, 200, await res.text());
}

describe('knotless verify', () => {
  it('proves a repository without a table whole: each ref record against its proof, and the listing complete', async () => {
    records = true;
    let head: string;
    try {
      assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
      const dir = await newRepo(alice, 'knotless://alice.test/site');
      head = await commitFiles(alice, dir, { 'a.txt': 'one\n' }, 'one');
      await alice.ok(dir, 'push', '-q', 'origin', 'main', 'main:refs/heads/other');
    } finally {
      records = false;
    }

    const res = await alice.knotless('verify', 'alice.test/site', '--json');
    assert.equal(res.code, 0, res.stderr);
    assert.equal(res.stderr, '');
    const v = JSON.parse(res.stdout) as Verdict;
    assert.equal(v.repo, 'alice.test/site');
    assert.equal(v.did, t.dids['alice.test']);
    assert.equal(v.handle, 'alice.test');
    assert.equal(v.pds, t.net.pdsUrl);
    assert.equal(v.key, await aliceKey());
    assert.equal(v.layout, 'records');
    assert.equal(v.complete, true);
    assert.equal(v.incomplete, undefined);
    assert.match(v.rev ?? '', /^[a-z2-7]{13}$/);
    assert.match(v.commit ?? '', /^bafyrei/);
    assert.ok(!Number.isNaN(Date.parse(v.checkedAt)));
    assert.deepEqual(v.refs.map((r) => [r.ref, r.target ?? `-> ${r.symref}`, r.verified]).sort(), [
      ['HEAD', '-> refs/heads/main', true],
      ['refs/heads/main', head, true],
      ['refs/heads/other', head, true],
    ]);

    const text = await alice.knotless('verify', 'alice.test/site');
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      /^ {2}layout {4}ref records \(each ref is proved, and the listing is proved complete\)$/m,
    );
    assert.match(text.stdout, new RegExp(`^ {4}verified {6}refs/heads/main  ${head}$`, 'm'));
  });

  it('marks a ref the listing changed as not verified, and ends 21', async () => {
    // The listing as the PDS gives it, with refs/heads/other pointed elsewhere under its real CID.
    const url = new URL('/xrpc/com.atproto.repo.listRecords', t.net.pdsUrl);
    url.searchParams.set('repo', t.dids['alice.test']!);
    url.searchParams.set('collection', 'dev.knotless.ref');
    url.searchParams.set('limit', '100');
    const listing = (await (await fetch(url)).json()) as {
      records: { value: { ref?: string; target?: string } }[];
    };
    const forged = 'f'.repeat(40);
    for (const r of listing.records) if (r.value.ref === 'refs/heads/other') r.value.target = forged;
    proxy!.inject({
      nsid: 'com.atproto.repo.listRecords',
      times: Infinity,
      fault: { kind: 'replace', body: Buffer.from(JSON.stringify(listing)), contentType: 'application/json' },
    });
    service = true;
    try {
      const res = await alice.knotless('verify', 'alice.test/site', '--json');
      assert.equal(res.code, 21, res.stderr);
      assert.ok(proxy!.faultsFired.length > 0);
      const v = JSON.parse(res.stdout) as Verdict;
      const other = v.refs.find((r) => r.ref === 'refs/heads/other')!;
      assert.deepEqual(other, {
        ref: 'refs/heads/other',
        target: forged,
        verified: false,
        why: 'the signed commit holds another version of its record',
      });
      assert.ok(v.refs.filter((r) => r.ref !== 'refs/heads/other').every((r) => r.verified));
      assert.equal(
        res.stderr.trim(),
        "knotless: 1 of the 3 refs of alice.test/site could not be verified against the account's signed commit (listed above); do not fetch them until its PDS serves proofs that hold, and check the PDS or the network in between.",
      );
    } finally {
      service = false;
      proxy!.clearFaults();
    }
  });

  it('says a listing that left a ref out is not complete, and ends 21', async () => {
    const url = new URL('/xrpc/com.atproto.repo.listRecords', t.net.pdsUrl);
    url.searchParams.set('repo', t.dids['alice.test']!);
    url.searchParams.set('collection', 'dev.knotless.ref');
    url.searchParams.set('limit', '100');
    const listing = (await (await fetch(url)).json()) as { records: { value: { ref?: string } }[] };
    const before = listing.records.length;
    listing.records = listing.records.filter((r) => r.value.ref !== 'refs/heads/other');
    assert.equal(listing.records.length, before - 1);
    proxy!.inject({
      nsid: 'com.atproto.repo.listRecords',
      times: Infinity,
      fault: { kind: 'replace', body: Buffer.from(JSON.stringify(listing)), contentType: 'application/json' },
    });
    service = true;
    try {
      const res = await alice.knotless('verify', 'alice.test/site', '--json');
      assert.equal(res.code, 21, res.stderr);
      assert.ok(proxy!.faultsFired.length > 0);
      const v = JSON.parse(res.stdout) as Verdict;
      assert.equal(v.complete, false);
      assert.equal(v.incomplete, "the listing leaves out a ref record the account's signed commit holds");
      // Each ref listed holds on its own: only the listing as a whole does not.
      assert.deepEqual(v.refs.map((r) => [r.ref, r.verified]).sort(), [
        ['HEAD', true],
        ['refs/heads/main', true],
      ]);
      assert.equal(
        res.stderr.trim(),
        "knotless: The listing of alice.test/site could not be proved complete (the listing leaves out a ref record the account's signed commit holds): its PDS may be hiding a ref; check the PDS or the network in between and try again.",
      );
      const text = await alice.knotless('verify', 'alice.test/site');
      assert.equal(text.code, 21, text.stderr);
      assert.match(text.stdout, /^ {2}layout {4}ref records \(the listing is NOT proved complete/m);
    } finally {
      service = false;
      proxy!.clearFaults();
    }
  });

  it("reads a listing of ref records proved by the signed tree's nodes, built from the listing or read (getBlocks), and refuses one whose nodes the PDS withholds or changes, ending 21", async () => {
    const name = 'alice.test/wide';
    records = true;
    try {
      // Enough refs that the repository's keys fill several nodes of the tree at any commit.
      assert.equal((await alice.knotless('repo', 'create', 'wide')).code, 0);
      const dir = await newRepo(alice, 'knotless://alice.test/wide');
      await commitFiles(alice, dir, { 'a.txt': 'one\n' }, 'one');
      const branches = Array.from({ length: 40 }, (_, i) => `main:refs/heads/b${i}`);
      await alice.ok(dir, 'push', '-q', 'origin', 'main', ...branches);
    } finally {
      records = false;
    }
    const noBlocks =
      "the PDS did not give the nodes of the account's signed tree that show the listing complete";
    const sentence = (why: string) =>
      `knotless: The ref table of ${name} could not be verified (${why}); nothing from it was used, so check the PDS or the network in between and try again.`;
    // A write to the account each time a proof of an end of the range is asked for, before it is
    // answered: that proof is of a newer commit than the one the listing is proved at, so the
    // nodes are read from that commit (the nodes within the range are unchanged by the write).
    let writes = 0;
    const writeFirst = {
      then: (ok: (v: unknown) => unknown, no: (e: unknown) => unknown) =>
        put('dev.knotless.test', `w${writes++}`, { writes }).then(ok, no),
    } as unknown as Promise<unknown>;
    /** The proofs after the first (the ends' proofs, and later listings'), `times` of them, each after a write. */
    const heldEnds = (times: number) =>
      proxy!.inject({
        nsid: 'com.atproto.sync.getRecord',
        nth: 2,
        times,
        fault: { kind: 'hold', until: writeFirst },
      });
    service = true;
    try {
      // As it is: one proof (that there is no table, carrying the signed commit), the proofs of the
      // ends of the repository's keys its path does not hold, side by side; every node within the
      // range is built from the listing and checked against the CID the signed tree holds. No node
      // is read, and no proof per record.
      proxy!.reset();
      const ok = await alice.knotless('repo', 'info', name, '--json');
      assert.equal(ok.code, 0, ok.stderr);
      assert.equal((JSON.parse(ok.stdout) as { refs: number }).refs, 41);
      assert.equal(proxy!.count('com.atproto.sync.getBlocks'), 0);
      const proofs = proxy!.count('com.atproto.sync.getRecord');
      assert.ok(proofs >= 2 && proofs <= 3, `${proofs} proofs`);

      // A PDS that will not give the ends' proofs (it refuses a key that long, or answers an absent
      // key with an error): their nodes are read by CID instead, and the listing holds, without
      // reading the whole repository.
      for (const error of ['InvalidRequest', 'RecordNotFound']) {
        proxy!.reset();
        proxy!.inject({
          nsid: 'com.atproto.sync.getRecord',
          nth: 2,
          times: Infinity,
          fault: { kind: 'status', status: 400, error, message: 'no' },
        });
        const refused = await alice.knotless('repo', 'info', name, '--json');
        assert.equal(refused.code, 0, refused.stderr);
        assert.equal((JSON.parse(refused.stdout) as { refs: number }).refs, 41);
        assert.ok(proxy!.faultsFired.some((f) => f.nsid === 'com.atproto.sync.getRecord'));
        assert.ok(proxy!.count('com.atproto.sync.getBlocks') > 0, 'no node of the tree was read');
        assert.equal(proxy!.count('com.atproto.sync.getRepo'), 0);
        proxy!.clearFaults();
      }

      // A push landing between the proofs: the nodes are read instead, and the listing holds.
      proxy!.reset();
      heldEnds(1);
      const raced = await alice.knotless('repo', 'info', name, '--json');
      assert.equal(raced.code, 0, raced.stderr);
      assert.equal((JSON.parse(raced.stdout) as { refs: number }).refs, 41);
      assert.ok(writes > 0);
      assert.ok(proxy!.count('com.atproto.sync.getBlocks') > 0, 'no node of the tree was read');
      proxy!.clearFaults();

      // The nodes withheld (as a PDS that dropped them answers): refused after reading them again.
      heldEnds(Infinity);
      proxy!.inject({
        nsid: 'com.atproto.sync.getBlocks',
        times: Infinity,
        fault: { kind: 'status', status: 400, error: 'InvalidRequest', message: 'Could not find cids' },
      });
      const withheld = await alice.knotless('repo', 'info', name);
      assert.equal(withheld.code, 21, withheld.stderr);
      assert.equal(withheld.stdout, '');
      assert.equal(withheld.stderr.trim(), sentence(noBlocks));
      assert.ok(
        proxy!.faultsFired.filter((f) => f.nsid === 'com.atproto.sync.getBlocks').length >= 3,
        'the nodes were not asked for again',
      );
      // knotless verify says the listing is not complete, each ref holding on its own proof.
      const v = await alice.knotless('verify', name, '--json');
      assert.equal(v.code, 21, v.stderr);
      const verdict = JSON.parse(v.stdout) as Verdict;
      assert.equal(verdict.complete, false);
      assert.equal(verdict.incomplete, noBlocks);
      assert.ok(verdict.refs.every((r) => r.verified));
      proxy!.clearFaults();

      // A node whose bytes are not those its CID names: refused at once.
      heldEnds(Infinity);
      const blocks = new BlockMap();
      blocks.set(await cidForRecord({ a: 1 }), new Uint8Array([0xa1, 0x61, 0x61, 0x02]));
      proxy!.inject({
        nsid: 'com.atproto.sync.getBlocks',
        times: Infinity,
        fault: {
          kind: 'replace',
          body: await blocksToCarFile(null, blocks),
          contentType: 'application/vnd.ipld.car',
        },
      });
      const changed = await alice.knotless('repo', 'info', name);
      assert.equal(changed.code, 21, changed.stderr);
      assert.equal(changed.stdout, '');
      assert.equal(
        changed.stderr.trim(),
        sentence("the blocks of the account's tree are not a CAR whose blocks match their CIDs"),
      );
      assert.ok(proxy!.faultsFired.some((f) => f.nsid === 'com.atproto.sync.getBlocks'));
    } finally {
      service = false;
      proxy!.clearFaults();
    }
  });

  it('proves a repository with a ref table whole, and refuses a table whose proof does not hold', async () => {
    const did = t.dids['alice.test']!;
    const target = 'c'.repeat(40);
    const table = applyRefUpdates(
      undefined,
      [{ ref: 'refs/heads/main', target, packs: [] }],
      { repo: `at://${did}/dev.knotless.repo/tabled`, head: 'refs/heads/main', maintainer: false },
      new Date(),
    );
    const writes = await layoutRefTable(table, 'tabled', async (value) =>
      (await cidForRecord(jsonToLex(value) as Parameters<typeof cidForRecord>[0])).toString(),
    );
    assert.equal((await alice.knotless('repo', 'create', 'tabled')).code, 0);
    for (const part of writes.create) await put('dev.knotless.refs.part', part.rkey, part.value);
    await put('dev.knotless.refs', 'tabled', writes.table);

    const res = await alice.knotless('verify', 'alice.test/tabled', '--json');
    assert.equal(res.code, 0, res.stderr);
    const v = JSON.parse(res.stdout) as Verdict;
    assert.equal(v.layout, 'table');
    assert.equal(v.complete, true);
    assert.deepEqual(v.refs, [
      { ref: 'HEAD', symref: 'refs/heads/main', verified: true },
      { ref: 'refs/heads/main', target, verified: true },
    ]);

    // bob's proof (of a table he does not have) for alice's: refused, in the readers' one sentence.
    const body = await refTableProof(t.net.pdsUrl, t.dids['bob.test']!, 'tabled');
    proxy!.inject({
      nsid: 'com.atproto.sync.getRecord',
      times: Infinity,
      fault: { kind: 'replace', body, contentType: 'application/vnd.ipld.car' },
    });
    service = true;
    try {
      const bad = await alice.knotless('verify', 'alice.test/tabled');
      assert.equal(bad.code, 21, bad.stderr);
      assert.equal(bad.stdout, '');
      assert.equal(
        bad.stderr.trim(),
        "knotless: The ref table of alice.test/tabled could not be verified (the proof is another account's commit); nothing from it was used, so check the PDS or the network in between and try again.",
      );
    } finally {
      service = false;
      proxy!.clearFaults();
    }
  });
});
