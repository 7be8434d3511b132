// The appview's backfill reads what it indexes from the account's signed repository
// (com.atproto.sync.getRepo, checked against the key of the account's DID document), never from a
// listing it would have to believe (appview.md, "Backfill"; security.md, "The appview"). Alice's DID
// document names a lying proxy as her PDS, in front of the real one, so every reader of her account
// goes through it. Told the truth, the appview indexes her repositories (one on ref records, one on
// a ref table) with one getRepo and no listRecords, and shows the revision it verified on the
// repository page and in getRepo's answer. Lied to, it refuses and logs, and indexes nothing of the
// lie: (a) a ref changed, the repository's tree rebuilt with true CIDs up to the commit, so that
// only the signature fails; (b) the repository as it was, replayed after a newer revision was
// verified; (c) another account's repository answered for hers. On SQLite and PostgreSQL (the stream,
// the page without a verified revision and the relay on SQLite). And a lying relay: a commit of hers
// with a ref operation its signed commit does not prove is refused whole, and her account read again.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Lexicons, type LexiconDoc } from '@atproto/lexicon';
import { after, before, describe, it } from 'node:test';
import { setPdsEndpoint, startRelay } from 'knotless-devnet';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import {
  forgeProof,
  startLyingProxy,
  type Lie,
  type LyingProxy,
} from '../../knotless/test/helpers/lying-proxy.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, get, waitFor } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';

const t = useNetwork(['alice.test', 'bob.test']);
let liar: LyingProxy | undefined;
let pg: PgServer | undefined;
/** Whether alice's next commands write a ref table (else ref records). */
let onTable = false;

/** Alice, on a machine of her own: her DID document names the liar before she first logs in. */
const alice = useGitUser(
  t,
  'alice.test',
  () => ({ KNOTLESS_AGENT: '0', KNOTLESS_COMPACT: '0', KNOTLESS_REF_TABLE: onTable ? '1' : '0' }),
  async (user) => {
    liar = await startLyingProxy(t.net.pdsUrl);
    await setPdsEndpoint(t.net, t.dids['alice.test']!, liar.url);
    const res = await user.knotless('login', 'alice.test', '--app-password', t.password);
    assert.equal(res.code, 0, res.stderr);
  },
);
const bob = useGitUser(t, 'bob.test', () => ({ KNOTLESS_AGENT: '0', KNOTLESS_COMPACT: '0' }));

before(async () => {
  pg = await startPostgres();
});
after(async () => {
  await liar?.close();
  await pg?.stop();
});

const aliceDid = () => t.dids['alice.test']!;
const bobDid = () => t.dids['bob.test']!;

/** Alice's two repositories: what the lies change, and what the truth shows. */
interface Row {
  layout: 'records' | 'table';
  name: string;
  c1: string;
  head: string;
}
let rows: Row[] = [];
let made: Promise<Row[]> | undefined;

/** Alice's repositories, one per layout, each with main and other (made once for the file). */
function setUp(): Promise<Row[]> {
  made ??= (async () => {
    assert.equal((await bob.knotless('repo', 'create', 'vb-bob')).code, 0);
    const bdir = await newRepo(bob, 'knotless://bob.test/vb-bob');
    await commitFiles(bob, bdir, { 'b.txt': 'bob\n' }, 'bob');
    await bob.ok(bdir, 'push', '-q', 'origin', 'main');
    const out: Row[] = [];
    for (const layout of ['records', 'table'] as const) {
      const name = `vb-${layout}`;
      onTable = layout === 'table';
      const created = await alice.knotless('repo', 'create', name);
      assert.equal(created.code, 0, created.stderr);
      const dir = await newRepo(alice, `knotless://alice.test/${name}`);
      const c1 = await commitFiles(alice, dir, { 'a.txt': 'one\n' }, 'c1');
      const pushed = await alice.git(dir, 'push', '-q', 'origin', 'main', 'main:refs/heads/other');
      assert.equal(pushed.code, 0, pushed.stderr);
      const head = await commitFiles(alice, dir, { 'a.txt': 'two\n' }, 'c2');
      await alice.ok(dir, 'push', '-q', 'origin', 'main');
      out.push({ layout, name, c1, head });
    }
    onTable = false;
    rows = out;
    return out;
  })();
  return made;
}

/** An appview of its own on `database`, with no event stream: only a backfill indexes anything. */
async function appview(database: string, logs: string[]): Promise<Appview> {
  return appviewOn(t, database, undefined, { firehoses: [] }, (line) => logs.push(line));
}

/** Backfills alice's account and waits for it (and the mirrors) to finish. */
async function backfill(app: Appview): Promise<void> {
  app.resync.recheck(aliceDid());
  await app.idle();
}

/** The newest commit of alice's repository as the real PDS itself says it (not through the liar). */
async function latestRev(): Promise<string> {
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.sync.getLatestCommit?did=${aliceDid()}`);
  assert.equal(res.status, 200);
  return ((await res.json()) as { rev: string }).rev;
}

interface RepoAnswer {
  refs: Array<{ ref: string; target?: string }>;
  verified?: { rev: string; at: string };
}

/** getRepo's lexicon (lexicons/dev/knotless/getRepo.json), with the views it names. */
function lexicons(): Lexicons {
  const dir = path.join(import.meta.dirname, '..', '..', '..', 'lexicons', 'dev', 'knotless');
  return new Lexicons(
    ['getRepo.json', 'defs.json'].map(
      (f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as LexiconDoc,
    ),
  );
}

async function getRepo(app: Appview, name: string): Promise<{ status: number; body: RepoAnswer }> {
  const q = new URLSearchParams({ actor: aliceDid(), repo: name });
  const res = await fetch(`${app.url}/xrpc/dev.knotless.getRepo?${q.toString()}`);
  return { status: res.status, body: (await res.json()) as RepoAnswer };
}

/** Every read of alice's account the liar forwards is noted (a lie that tells no lie). */
function watching(asked: Array<string | undefined>): Lie {
  return (a) => {
    if (a.params.get('did') === aliceDid() || a.params.get('repo') === aliceDid()) asked.push(a.nsid);
    return { kind: 'forward' };
  };
}

/** A whole repository with alice's main branch pointed back at `c1`, as well as a proxy can. */
function changedMain(row: Row): Lie {
  return (asked) =>
    asked.nsid === 'com.atproto.sync.getRepo'
      ? {
          kind: 'rewrite',
          rewrite: (body) =>
            forgeProof(body, (v) => {
              if (row.layout === 'records') {
                if (
                  v['$type'] !== 'dev.knotless.ref' ||
                  v['ref'] !== 'refs/heads/main' ||
                  !isOwn(v, row.name)
                )
                  return false;
                v['target'] = row.c1;
                return true;
              }
              if (v['$type'] !== 'dev.knotless.refs' || !isOwn(v, row.name)) return false;
              v['refs'] = (v['refs'] as Array<Record<string, unknown>>).map((r) =>
                r['ref'] === 'refs/heads/main' ? { ...r, target: row.c1 } : r,
              );
              return true;
            }),
        }
      : { kind: 'forward' };
}

/** Whether a decoded record names alice's repository `name`. */
function isOwn(v: Record<string, unknown>, name: string): boolean {
  const repo = v['repo'];
  return typeof repo === 'string' && (repo === name || repo.endsWith(`/dev.knotless.repo/${name}`));
}

/** The one line the appview logs for a refused backfill of alice, for the reason `why`. */
function refusal(logs: string[], why: string): void {
  const lines = logs.filter((l) => l.includes(aliceDid()) && l.includes('could not be verified'));
  assert.equal(lines.length, 1, logs.join('\n'));
  assert.ok(
    lines[0]!.includes(
      `the repository of ${aliceDid()} from ${liar!.url} could not be verified (${why}); nothing from it was indexed`,
    ),
    lines[0],
  );
  assert.doesNotMatch(lines[0]!, /\n\s+at /);
}

for (const backend of ['sqlite', 'postgres'] as const)
  describe(`the appview's backfill, verified (${backend})`, () => {
    const database = async (name: string) =>
      backend === 'sqlite' ? path.join(t.tmpdir(), `${name}.sqlite`) : pg!.createDatabase(name);

    it('indexes what the signed repository holds, with one getRepo, and shows the revision', async () => {
      const [records, table] = await setUp();
      const logs: string[] = [];
      const app = await appview(await database(`truth_${backend}`), logs);
      try {
        const asked: Array<string | undefined> = [];
        liar!.lie = watching(asked);
        try {
          await backfill(app);
        } finally {
          liar!.lie = undefined;
        }
        assert.deepEqual(
          asked.filter((n) => n?.startsWith('com.atproto.repo.') || n === 'com.atproto.sync.getRepo'),
          ['com.atproto.sync.getRepo'],
          'one getRepo, no listing',
        );
        const rev = await latestRev();
        for (const row of [records!, table!]) {
          const got = await getRepo(app, row.name);
          assert.equal(got.status, 200, JSON.stringify(got.body));
          const main = got.body.refs.find((r) => r.ref === 'refs/heads/main');
          assert.equal(main?.target, row.head, row.layout);
          assert.ok(got.body.refs.some((r) => r.ref === 'refs/heads/other'));
          assert.equal(got.body.verified?.rev, rev);
          assert.ok(Date.parse(got.body.verified?.at ?? '') > 0);
          lexicons().assertValidXrpcOutput('dev.knotless.getRepo', got.body);
          const page = await get(`${app.url}/alice.test/${row.name}`);
          assert.equal(page.status, 200);
          assert.match(
            page.text,
            new RegExp(`Verified against the owner's signing key[^<]*<code>${rev}</code>`),
          );
          assert.doesNotMatch(page.text, /Not verified/);
        }
        assert.equal(logs.filter((l) => l.includes('could not be verified')).length, 0, logs.join('\n'));
      } finally {
        await app.close();
      }
    });

    for (const layout of ['records', 'table'] as const)
      it(`refuses a repository with a changed ref, on ${layout === 'table' ? 'a ref table' : 'ref records'} (a)`, async () => {
        const row = (await setUp()).find((r) => r.layout === layout)!;
        const logs: string[] = [];
        const app = await appview(await database(`changed_${layout}_${backend}`), logs);
        try {
          liar!.lies = 0;
          liar!.lie = changedMain(row);
          try {
            await backfill(app);
          } finally {
            liar!.lie = undefined;
          }
          assert.ok(liar!.lies > 0, 'the proxy told no lie');
          refusal(logs, "the commit's signature does not match the account's key");
          // Nothing of the lie, nor of the rest of the account, was indexed.
          assert.equal((await getRepo(app, row.name)).status, 400);
          assert.equal(await app.index.repo(aliceDid(), row.name), undefined);
          assert.equal(await app.index.verified(aliceDid()), undefined);
        } finally {
          await app.close();
        }
      });
  });

for (const backend of ['sqlite', 'postgres'] as const)
  describe(`the appview's backfill, verified: replays and other accounts (${backend})`, () => {
    const database = async (name: string) =>
      backend === 'sqlite' ? path.join(t.tmpdir(), `${name}.sqlite`) : pg!.createDatabase(name);

    it("refuses another account's repository answered for alice's (c)", async () => {
      await setUp();
      const logs: string[] = [];
      const app = await appview(await database(`other_${backend}`), logs);
      try {
        liar!.lies = 0;
        liar!.lie = (asked) =>
          asked.nsid === 'com.atproto.sync.getRepo' && asked.params.get('did') === aliceDid()
            ? { kind: 'instead', path: `/xrpc/com.atproto.sync.getRepo?did=${encodeURIComponent(bobDid())}` }
            : { kind: 'forward' };
        try {
          await backfill(app);
        } finally {
          liar!.lie = undefined;
        }
        assert.ok(liar!.lies > 0, 'the proxy told no lie');
        refusal(logs, "the repository is another account's");
        for (const row of rows) assert.equal(await app.index.repo(aliceDid(), row.name), undefined);
        assert.equal(await app.index.repo(aliceDid(), 'vb-bob'), undefined);
        assert.equal(await app.index.verified(aliceDid()), undefined);
      } finally {
        await app.close();
      }
    });

    it('refuses the repository as it was, replayed after a newer revision was verified (b)', async () => {
      const [records] = await setUp();
      const logs: string[] = [];
      const app = await appview(await database(`replay_${backend}`), logs);
      try {
        // The account as it is now, as the liar records it: what it replays later.
        liar!.answers.clear();
        liar!.recording = true;
        try {
          await backfill(app);
        } finally {
          liar!.recording = false;
        }
        const old = (await app.index.verified(aliceDid()))!.rev;
        // A push, then a truthful backfill: the appview has verified a newer revision.
        const dir = await newRepo(alice, `knotless://alice.test/${records!.name}`);
        await alice.ok(dir, 'fetch', '-q', 'origin');
        await alice.ok(dir, 'reset', '-q', '--hard', 'origin/main');
        const c3 = await commitFiles(alice, dir, { 'a.txt': `three, ${backend}\n` }, 'c3');
        await alice.ok(dir, 'push', '-q', 'origin', 'HEAD:main');
        await backfill(app);
        const now = (await app.index.verified(aliceDid()))!.rev;
        assert.ok(now > old, `${now} > ${old}`);
        assert.equal(now, await latestRev());
        const fresh = (await getRepo(app, records!.name)).body.refs.find((r) => r.ref === 'refs/heads/main');
        assert.equal(fresh?.target, c3);

        liar!.lies = 0;
        liar!.lie = (asked, answers) => {
          const kept = answers.get(asked.path);
          return asked.nsid === 'com.atproto.sync.getRepo' && kept !== undefined
            ? { kind: 'answer', body: kept, contentType: 'application/vnd.ipld.car' }
            : { kind: 'forward' };
        };
        try {
          await backfill(app);
        } finally {
          liar!.lie = undefined;
        }
        assert.ok(liar!.lies > 0, 'the proxy told no lie');
        refusal(logs, `the repository is at revision ${old}, older than ${now} already verified`);
        // The index keeps the newer state, and the revision it verified.
        const kept = (await getRepo(app, records!.name)).body;
        assert.equal(kept.refs.find((r) => r.ref === 'refs/heads/main')?.target, c3);
        assert.equal(kept.verified?.rev, now);
      } finally {
        await app.close();
      }
    });
  });

describe("the appview's verified revision: the stream and the page (sqlite)", () => {
  it("moves the verified revision on with each of the event stream's commits it checks", async () => {
    const [records] = await setUp();
    const logs: string[] = [];
    const app = await appviewOn(t, path.join(t.tmpdir(), 'stream.sqlite'), undefined, {}, (l) =>
      logs.push(l),
    );
    try {
      // The account read whole once, then only the stream.
      await backfill(app);
      const before = (await app.index.verified(aliceDid()))!.rev;
      const reads = app.resync.accountsRead;
      const dir = await newRepo(alice, `knotless://alice.test/${records!.name}`);
      await alice.ok(dir, 'fetch', '-q', 'origin');
      await alice.ok(dir, 'reset', '-q', '--hard', 'origin/main');
      const tip = await commitFiles(alice, dir, { 'a.txt': 'streamed\n' }, 'streamed');
      await alice.ok(dir, 'push', '-q', 'origin', 'HEAD:main');
      const rev = await latestRev();
      // The push's commit, checked on the stream (no backfill asked for), is the revision verified.
      await waitFor('the pushed commit verified on the stream', async () =>
        (await app.index.verified(aliceDid()))?.rev === rev ? true : undefined,
      );
      assert.ok(rev > before);
      assert.equal(app.resync.accountsRead, reads, 'the account was read whole again');
      const got = await getRepo(app, records!.name);
      assert.equal(got.body.refs.find((r) => r.ref === 'refs/heads/main')?.target, tip);
      assert.equal(got.body.verified?.rev, rev);
      assert.equal(
        logs.filter((l) => l.includes('not proved') || l.includes('could not be verified')).length,
        0,
      );
    } finally {
      await app.close();
    }
  });

  it('says plainly on the page when it verified nothing of the owner', async () => {
    const [records] = await setUp();
    const app = await appview(path.join(t.tmpdir(), 'never.sqlite'), []);
    try {
      // The repository known, its account never verified (as an index from before verification).
      await app.index.putOwner(aliceDid(), 'alice.test', liar!.url);
      await app.index.applyRepo({
        did: aliceDid(),
        name: records!.name,
        rev: '2222222222222',
        record: { name: records!.name } as never,
        time: new Date().toISOString(),
      });
      const page = await get(`${app.url}/alice.test/${records!.name}`);
      assert.equal(page.status, 200, page.text);
      assert.match(page.text, /Not verified: this appview has not checked the owner's signed repository/);
      const got = await getRepo(app, records!.name);
      assert.equal(got.status, 200);
      assert.equal(got.body.verified, undefined);
      lexicons().assertValidXrpcOutput('dev.knotless.getRepo', got.body);
    } finally {
      await app.close();
    }
  });
});

describe('a lying relay (sqlite)', () => {
  it('refuses a commit whose operation its signed commit does not prove, and reads the account again', async () => {
    const [records] = await setUp();
    let lied = 0;
    // The first commit of alice's that writes a ref record: that operation's CID changed (to the
    // commit's own), as a relay would change what a record is said to be.
    const relay = await startRelay({
      pdses: t.net.pdses.map((p) => p.url),
      rewrite: (type, body) => {
        const ops = body['ops'];
        if (type !== '#commit' || body['repo'] !== aliceDid() || lied > 0 || !Array.isArray(ops)) return body;
        const own = (op: { path?: unknown }) =>
          typeof op.path === 'string' && op.path.startsWith('dev.knotless.ref/');
        if (!ops.some(own)) return body;
        lied += 1;
        return {
          ...body,
          ops: ops.map((op: { path?: unknown }) => (own(op) ? { ...op, cid: body['commit'] } : op)),
        };
      },
    });
    const logs: string[] = [];
    const app = await appviewOn(
      t,
      path.join(t.tmpdir(), 'relay.sqlite'),
      undefined,
      { firehoses: [], relays: [relay.url] },
      (l) => logs.push(l),
    );
    try {
      await waitFor('the first pass through the relay', async () =>
        (await app.index.repo(aliceDid(), records!.name)) !== undefined ? true : undefined,
      );
      await app.idle();
      const dir = await newRepo(alice, `knotless://alice.test/${records!.name}`);
      await alice.ok(dir, 'fetch', '-q', 'origin');
      await alice.ok(dir, 'reset', '-q', '--hard', 'origin/main');
      const tip = await commitFiles(alice, dir, { 'a.txt': 'relayed\n' }, 'relayed');
      await alice.ok(dir, 'push', '-q', 'origin', 'HEAD:main');
      // Refused whole, in one line, rather than indexed without the operation.
      const line = await waitFor('the altered commit refused', () =>
        Promise.resolve(
          logs.find((l) => l.includes(aliceDid()) && l.includes('not proved by its signed commit')),
        ),
      );
      assert.equal(lied, 1);
      assert.match(line, /\d+ of its \d+ knotless operations are not proved by its signed commit/);
      // The account read again whole, verified: the index holds the truth.
      const rev = await latestRev();
      await waitFor('the account read again', async () =>
        (await app.index.verified(aliceDid()))?.rev === rev ? true : undefined,
      );
      const got = await getRepo(app, records!.name);
      assert.equal(got.body.refs.find((r) => r.ref === 'refs/heads/main')?.target, tip);
    } finally {
      await app.close();
      await relay.close();
    }
  });
});
