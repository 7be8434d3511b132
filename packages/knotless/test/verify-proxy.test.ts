// A proxy between the reader and the PDS that lies (format.md, "Verified"; security.md, "Records"),
// in five ways: (a) it changes a ref's target (a ref record's, or the ref table's entry, with
// the table's proof rebuilt as well as a proxy can), (b) it serves the repository as it was before
// (answers recorded earlier, replayed after this machine verified a newer commit), (c) it serves
// another account's records (bob's repository of the same name), (d) it leaves a ref out (a ref
// record from the listing, or an entry from the table), (e) it changes a pack blob's bytes. For each,
// on a public repository on ref records, a private one (on sealed ref records) and one on a ref table, `git fetch`, `git clone`, `git push` and
// `knotless repo info` are run, without the agent and through a warm agent the reader's git hands
// its helper protocol to. Each cell says what must happen:
// the command fails with the sentence for the case (and git's refs, the clone's directory, the
// remote are left as they were), or, where the lie cannot touch what the command reads, why, and
// what it does instead. A listing of ref records, plain or sealed, is proved whole
// (records/proved-listing.ts), so (a) and (d) fail there as on a table. Through the agent, every request must reach the proxy from the agent's
// process (the agent carried them all), and, asked while the lie is told, the agent must hold no
// view built from it.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { agentView, spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, refsOf, useGitUser } from './helpers/git.ts';
import { forgeProof, startLyingProxy, type Lie, type LyingProxy } from './helpers/lying-proxy.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test', 'bob.test']);
let liar: LyingProxy | undefined;
let counter: Proxy | undefined;
let agent: RunningAgent | undefined;
let socket = '';
let layout: Layout = 'records';
let viaAgent = false;

type Layout = 'records' | 'private' | 'table';
type Case = 'a' | 'b' | 'c' | 'd' | 'e';

const writerEnv = () => ({
  KNOTLESS_AGENT: '0',
  KNOTLESS_COMPACT: '0',
  KNOTLESS_REF_TABLE: layout === 'table' ? '1' : '0',
});
/** The owner on a machine of its own, straight to the PDS. */
const writer = useGitUser(t, 'alice.test', writerEnv);
/** Bob, whose repository of the same name the proxy serves as alice's in (c). */
const bob = useGitUser(t, 'bob.test', writerEnv);
/** Records what the PDS answered before the later pushes, for (b). */
const recorder = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_AGENT: '0',
  ...(counter === undefined ? {} : { KNOTLESS_SERVICE: counter.url }),
}));
/** The machine the lies are told to: every request through the counting proxy, then the liar. */
const reader = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  KNOTLESS_REF_TABLE: layout === 'table' ? '1' : '0',
  ...(counter === undefined ? {} : { KNOTLESS_SERVICE: counter.url }),
  ...(viaAgent ? { KNOTLESS_AGENT_SOCKET: socket } : { KNOTLESS_AGENT: '0' }),
}));

before(async () => {
  await t.ready;
  liar = await startLyingProxy(t.net.pdsUrl);
  counter = await startProxy({
    target: liar.url,
    watchPids: () => (agent === undefined ? [] : [agent.child.pid!]),
  });
  socket = path.join(t.tmpdir(), 'agent.sock');
});
after(async () => {
  await agent?.stop();
  await counter?.close();
  await liar?.close();
});

const aliceDid = () => t.dids['alice.test']!;
const bobDid = () => t.dids['bob.test']!;

/** A repository set up for one row: what the lies and the checks need of it. */
interface Row {
  name: string;
  url: string;
  /** main as first pushed (where (a) points it back to), and as it is now. */
  c1: string;
  head: string;
  /** The reader's clone, made before the lie, one push behind. */
  dir: string;
}

/** The sentence a refused listing of `name` is said in, for the reason `why` (a regexp's source). */
const tableSentence = (name: string, why: string) =>
  new RegExp(
    `^knotless: The ref table of alice\\.test/${name} could not be verified \\(${why}\\); nothing from it was used, so check the PDS or the network in between and try again\\.$`,
    'm',
  );
const OLDER =
  "the PDS answered with the account's commit [a-z2-7]{13}, older than [a-z2-7]{13} already verified on this machine";
const ANOTHER = "the proof is another account's commit";
const SIGNATURE = "the commit's signature does not match the account's key";
const CHANGED = "a ref record listed is not the one the account's signed commit holds";
const LEFT_OUT = "the listing leaves out a ref record the account's signed commit holds";
/** Every command fails with the sentence for `why`, and the agent builds no view of it. */
const refused = (why: string) => ({
  fetch: { fails: (n: string) => tableSentence(n, why) },
  clone: { fails: (n: string) => tableSentence(n, why) },
  info: { fails: (n: string) => tableSentence(n, why) },
  push: { fails: (n: string) => tableSentence(n, why) },
  loadRefused: true,
});

/** What one command must do under one lie. */
type Expect =
  | { fails: (name: string) => RegExp }
  /** The lie cannot touch what the command reads (`why`); `check` says what it does instead. */
  | { passes: string; check?: (row: Row, out: { stdout: string; dir?: string }) => Promise<void> | void };

interface Cell {
  lie: (row: Row) => Lie;
  fetch: Expect;
  clone: Expect;
  info: Expect;
  push: Expect;
  /** Whether the agent's own cold load of the repository is refused by this lie. */
  loadRefused: boolean;
}

const isRead = (nsid: string | undefined) =>
  nsid === 'com.atproto.repo.listRecords' ||
  nsid === 'com.atproto.sync.getRecord' ||
  nsid === 'com.atproto.repo.getRecord';

/** JSON of a listRecords answer, changed by `change`. */
function relist(change: (records: Array<{ uri: string; value: Record<string, unknown> }>) => unknown[]) {
  return (body: Buffer): Buffer => {
    const page = JSON.parse(body.toString('utf8')) as {
      records: Array<{ uri: string; value: Record<string, unknown> }>;
    };
    return Buffer.from(JSON.stringify({ ...page, records: change(page.records) }));
  };
}

/** The owner's ref records listed: the lie's target. */
const ownRefListing = (asked: { nsid: string | undefined; params: URLSearchParams }) =>
  asked.nsid === 'com.atproto.repo.listRecords' &&
  asked.params.get('repo') === aliceDid() &&
  asked.params.get('collection') === 'dev.knotless.ref';
/** Whether a listed record is one of repository `name`'s (its key under the repository's prefix). */
const ownRecord = (r: { uri?: unknown }, name: string) =>
  typeof r.uri === 'string' && r.uri.slice(r.uri.lastIndexOf('/') + 1).startsWith(`${name}~`);
/** The proof of the owner's table of `name`. */
const ownTableProof = (asked: { nsid: string | undefined; params: URLSearchParams }, name: string) =>
  asked.nsid === 'com.atproto.sync.getRecord' &&
  asked.params.get('did') === aliceDid() &&
  asked.params.get('collection') === 'dev.knotless.refs' &&
  asked.params.get('rkey') === name;

/** The table record's entries, in a proof's decoded block. */
type TableBlock = Record<string, unknown> & { refs: Array<Record<string, unknown>> };
const isTable = (v: Record<string, unknown>): v is TableBlock => v['$type'] === 'dev.knotless.refs';

/** Every read naming alice asked of bob instead. */
const asBob: Lie = (asked) => {
  if (asked.params.get('repo') !== aliceDid() && asked.params.get('did') !== aliceDid())
    return { kind: 'forward' };
  const params = new URLSearchParams(asked.params);
  for (const k of ['repo', 'did']) if (params.get(k) === aliceDid()) params.set(k, bobDid());
  return { kind: 'instead', path: `${asked.path.split('?')[0]}?${params.toString()}` };
};
/** Every read recorded before is answered as it was then. */
const replay: Lie = (asked, answers) => {
  const old = answers.get(asked.path);
  if (!isRead(asked.nsid) || old === undefined) return { kind: 'forward' };
  const json = asked.nsid !== 'com.atproto.sync.getRecord';
  return { kind: 'answer', body: old, contentType: json ? 'application/json' : 'application/vnd.ipld.car' };
};
/** Every pack blob with one byte changed in its middle. */
const flipBlob: Lie = (asked) =>
  asked.nsid !== 'com.atproto.sync.getBlob'
    ? { kind: 'forward' }
    : {
        kind: 'rewrite',
        rewrite: (body) => {
          const out = Buffer.from(body);
          out[out.length >> 1] = out[out.length >> 1]! ^ 0xff;
          return out;
        },
      };

const blobSentence = () =>
  /^knotless: A blob of .* does not match its CID [a-z0-9]+; nothing was written\.$/m;
const blobUnread = {
  passes: 'it reads no pack blob: a push builds its pack from the local objects, and repo info counts refs',
};

const CELLS: Record<Layout, Partial<Record<Case, Cell>>> = {
  records: {
    // main pointed back at c1 in the listing, under its record's own CID.
    a: {
      lie: (row) => (asked) =>
        ownRefListing(asked)
          ? {
              kind: 'rewrite',
              rewrite: relist((records) =>
                records.map((r) =>
                  r.value['ref'] === 'refs/heads/main' ? { ...r, value: { ...r.value, target: row.c1 } } : r,
                ),
              ),
            }
          : { kind: 'forward' },
      ...refused(CHANGED),
    },
    // The proof that there is no ref table is the first proof read, and the first refused.
    b: {
      lie: () => replay,
      fetch: { fails: (n) => tableSentence(n, OLDER) },
      clone: { fails: (n) => tableSentence(n, OLDER) },
      info: { fails: (n) => tableSentence(n, OLDER) },
      push: { fails: (n) => tableSentence(n, OLDER) },
      loadRefused: true,
    },
    c: {
      lie: () => asBob,
      fetch: { fails: (n) => tableSentence(n, ANOTHER) },
      clone: { fails: (n) => tableSentence(n, ANOTHER) },
      info: { fails: (n) => tableSentence(n, ANOTHER) },
      push: { fails: (n) => tableSentence(n, ANOTHER) },
      loadRefused: true,
    },
    // One record per ref: the listing is proved whole by walking the signed commit's tree over the
    // repository's keys (records/proved-listing.ts), which finds the record left out.
    d: {
      lie: () => (asked) =>
        ownRefListing(asked)
          ? {
              kind: 'rewrite',
              rewrite: relist((records) => records.filter((r) => r.value['ref'] !== 'refs/heads/other')),
            }
          : { kind: 'forward' },
      ...refused(LEFT_OUT),
    },
    e: {
      lie: () => flipBlob,
      fetch: { fails: blobSentence },
      clone: { fails: blobSentence },
      info: blobUnread,
      push: blobUnread,
      loadRefused: false,
    },
  },
  // A private repository stays on its sealed ref records: a proxy cannot read them, but it can
  // swap them around, replay them, serve another account's or leave one out.
  private: {
    // Each record listed carries its neighbour's sealed value, under its own CID: a changed target
    // as far as a proxy without the keys can change one.
    a: {
      lie: (row) => (asked) =>
        ownRefListing(asked)
          ? {
              kind: 'rewrite',
              rewrite: relist((records) => {
                const mine = records.filter((r) => ownRecord(r, row.name));
                return records.map((r) =>
                  ownRecord(r, row.name)
                    ? { ...r, value: mine[(mine.indexOf(r) + 1) % mine.length]!.value }
                    : r,
                );
              }),
            }
          : { kind: 'forward' },
      ...refused(CHANGED),
    },
    b: { lie: () => replay, ...refused(OLDER) },
    c: { lie: () => asBob, ...refused(ANOTHER) },
    // Sealed records name no ref: the repository's last one listed is left out.
    d: {
      lie: (row) => (asked) =>
        ownRefListing(asked)
          ? {
              kind: 'rewrite',
              rewrite: relist((records) => {
                const last = records.filter((r) => ownRecord(r, row.name)).at(-1);
                return records.filter((r) => r !== last);
              }),
            }
          : { kind: 'forward' },
      ...refused(LEFT_OUT),
    },
  },
  table: {
    a: {
      lie: (row) => (asked) =>
        ownTableProof(asked, row.name)
          ? {
              kind: 'rewrite',
              rewrite: (body) =>
                forgeProof(body, (v) => {
                  if (!isTable(v)) return false;
                  v.refs = v.refs.map((r) => (r['ref'] === 'refs/heads/main' ? { ...r, target: row.c1 } : r));
                  return true;
                }),
            }
          : { kind: 'forward' },
      fetch: { fails: (n) => tableSentence(n, SIGNATURE) },
      clone: { fails: (n) => tableSentence(n, SIGNATURE) },
      info: { fails: (n) => tableSentence(n, SIGNATURE) },
      push: { fails: (n) => tableSentence(n, SIGNATURE) },
      loadRefused: true,
    },
    b: {
      lie: () => replay,
      fetch: { fails: (n) => tableSentence(n, OLDER) },
      clone: { fails: (n) => tableSentence(n, OLDER) },
      info: { fails: (n) => tableSentence(n, OLDER) },
      push: { fails: (n) => tableSentence(n, OLDER) },
      loadRefused: true,
    },
    c: {
      lie: () => asBob,
      fetch: { fails: (n) => tableSentence(n, ANOTHER) },
      clone: { fails: (n) => tableSentence(n, ANOTHER) },
      info: { fails: (n) => tableSentence(n, ANOTHER) },
      push: { fails: (n) => tableSentence(n, ANOTHER) },
      loadRefused: true,
    },
    d: {
      lie: (row) => (asked) =>
        ownTableProof(asked, row.name)
          ? {
              kind: 'rewrite',
              rewrite: (body) =>
                forgeProof(body, (v) => {
                  if (!isTable(v)) return false;
                  v.refs = v.refs.filter((r) => r['ref'] !== 'refs/heads/other');
                  return true;
                }),
            }
          : { kind: 'forward' },
      fetch: { fails: (n) => tableSentence(n, SIGNATURE) },
      clone: { fails: (n) => tableSentence(n, SIGNATURE) },
      info: { fails: (n) => tableSentence(n, SIGNATURE) },
      push: { fails: (n) => tableSentence(n, SIGNATURE) },
      loadRefused: true,
    },
    e: {
      lie: () => flipBlob,
      fetch: { fails: blobSentence },
      clone: { fails: blobSentence },
      info: blobUnread,
      push: blobUnread,
      loadRefused: false,
    },
  },
};

let rows = 0;

/** A repository of alice in the current layout, the reader's clone of it, and (for (c)) bob's twin. */
async function setUp(c: Case): Promise<Row> {
  const name = `vp-${layout}-${c}-${viaAgent ? 'agent' : 'direct'}-${++rows}`;
  const url = `knotless://alice.test/${name}`;
  if (layout === 'private') {
    // The reader's (and the recorder's) device key, published before the repository is made: the
    // repository's keys are then wrapped to it, and that machine opens it as the owner's own.
    for (const machine of [reader, recorder]) {
      const keys = await machine.knotless('key', 'list');
      assert.equal(keys.code, 0, keys.stderr);
    }
  }
  const made = await writer.knotless('repo', 'create', name, ...(layout === 'private' ? ['--private'] : []));
  assert.equal(made.code, 0, made.stderr);
  const wdir = await newRepo(writer, url);
  const c1 = await commitFiles(writer, wdir, { 'a.txt': 'one\n' }, 'c1');
  await writer.ok(wdir, 'push', '-q', 'origin', 'main', 'main:refs/heads/other');
  if (c === 'c') {
    assert.equal((await bob.knotless('repo', 'create', name)).code, 0);
    const bdir = await newRepo(bob, `knotless://bob.test/${name}`);
    await commitFiles(bob, bdir, { 'b.txt': 'bob\n' }, 'bob');
    await bob.ok(bdir, 'push', '-q', 'origin', 'main', 'main:refs/heads/other');
  }
  if (c === 'b') {
    // The repository as it is now, as a reader reads it: what the proxy replays later.
    liar!.answers.clear();
    liar!.recording = true;
    const seen = await recorder.knotless('verify', `alice.test/${name}`);
    liar!.recording = false;
    assert.equal(seen.code, 0, seen.stderr);
  }
  await commitFiles(writer, wdir, { 'a.txt': 'two\n' }, 'c2');
  await writer.ok(wdir, 'push', '-q', 'origin', 'main');
  // The reader's clone, without the agent (the agent has never read this repository).
  const dir = reader.dir();
  const wasAgent = viaAgent;
  viaAgent = false;
  try {
    await reader.ok(dir, 'clone', '-q', url, 'r');
  } finally {
    viaAgent = wasAgent;
  }
  // One more push, with a blob too large to be kept inline: a fetch must download its pack.
  const head = await commitFiles(writer, wdir, { 'big.bin': crypto.randomBytes(40 * 1024) }, 'c3');
  await writer.ok(wdir, 'push', '-q', 'origin', 'main');
  return { name, url, c1, head, dir: path.join(dir, 'r') };
}

/** The refs as the PDS holds them, read by the owner's own machine, straight. */
async function truth(row: Row): Promise<string> {
  return writer.ok(writer.dir(), 'ls-remote', row.url);
}

/** Asserts a failure: the sentence once, nothing else from knotless, no stack. */
function failed(res: { code: number | null; stderr: string }, sentence: RegExp, code: number): void {
  assert.equal(res.code, code, res.stderr);
  assert.match(res.stderr, sentence);
  const ours = res.stderr.split('\n').filter((l) => l.startsWith('knotless:'));
  assert.equal(ours.length, 1, res.stderr);
  assert.doesNotMatch(res.stderr, /\n\s+at .*:\d+:\d+/);
}

async function runCell(c: Case): Promise<void> {
  const cell = CELLS[layout][c]!;
  const row = await setUp(c);
  const before = await truth(row);
  const local = await refsOf(reader, row.dir);
  liar!.lies = 0;
  counter!.reset();
  liar!.lie = cell.lie(row);
  try {
    // git fetch: git's refs stay as they were.
    const fetched = await reader.git(row.dir, 'fetch', 'origin');
    if ('fails' in cell.fetch) {
      failed(fetched, cell.fetch.fails(row.name), 128);
      assert.equal(await refsOf(reader, row.dir), local, 'git fetch wrote refs');
    } else {
      assert.equal(fetched.code, 0, fetched.stderr);
      await cell.fetch.check?.(row, { stdout: fetched.stdout });
    }

    // git clone: no directory is left.
    const parent = reader.dir();
    const cloned = await reader.git(parent, 'clone', '-q', row.url, 'c');
    if ('fails' in cell.clone) {
      failed(cloned, cell.clone.fails(row.name), 128);
      assert.equal(fs.existsSync(path.join(parent, 'c')), false, 'git clone left a directory');
    } else {
      assert.equal(cloned.code, 0, cloned.stderr);
      await cell.clone.check?.(row, { stdout: cloned.stdout, dir: path.join(parent, 'c') });
    }

    // knotless repo info: its own exit code.
    const info = await reader.knotless('repo', 'info', `alice.test/${row.name}`);
    if ('fails' in cell.info) {
      assert.equal(info.stdout, '');
      failed(info, cell.info.fails(row.name), 21);
    } else {
      assert.equal(info.code, 0, info.stderr);
      await cell.info.check?.(row, { stdout: info.stdout });
    }

    // git push of a new branch: nothing written to the PDS, git's refs as they were.
    const pushedLocal = await refsOf(reader, row.dir);
    const pushed = await reader.git(row.dir, 'push', 'origin', `HEAD:refs/heads/new-${c}`);
    if ('fails' in cell.push) {
      failed(pushed, cell.push.fails(row.name), 128);
      assert.equal(await refsOf(reader, row.dir), pushedLocal, 'git push wrote refs');
    } else {
      assert.equal(pushed.code, 0, pushed.stderr);
      await cell.push.check?.(row, { stdout: pushed.stdout });
    }
    assert.ok(liar!.lies > 0, 'the proxy told no lie');

    if (viaAgent && cell.loadRefused)
      // The agent holds no view built from the lie: asked while the lie is still told (asked after,
      // it would start a load of the truth). A view the lie had built would be given here.
      assert.equal(
        await agentView(socket, { did: aliceDid(), repo: row.name, pds: t.net.pdsUrl }),
        null,
        agent!.log(),
      );
  } finally {
    liar!.lie = undefined;
  }
  const after = await truth(row);
  if ('fails' in cell.push) assert.equal(after, before, 'the PDS was written');
  else assert.match(after, new RegExp(`refs/heads/new-${c}$`, 'm'));

  if (viaAgent) {
    // Every request came from the agent's process: it carried them.
    assert.ok(counter!.requests.length > 0);
    const strays = counter!.requests.filter((r) => r.pid !== agent!.child.pid);
    assert.deepEqual(
      strays.map((r) => `${r.method} ${r.path}`),
      [],
      'requests the agent did not carry',
    );
  }
}

for (const mode of ['direct', 'agent'] as const)
  describe(`a lying proxy, ${mode === 'agent' ? 'through the agent' : 'without the agent'}`, () => {
    before(async () => {
      viaAgent = false;
      if (mode !== 'agent') return;
      // The reader's agent, on the reader's own cache (so it keeps the same newest commits).
      assert.equal((await reader.knotless('repo', 'list')).code, 0);
      agent = await spawnAgent(socket, {
        ...reader.env,
        KNOTLESS_AGENT_SOCKET: socket,
        KNOTLESS_COMPACT: '0',
        KNOTLESS_SERVICE: counter!.url,
      });
    });
    after(async () => {
      viaAgent = false;
      await agent?.stop();
      agent = undefined;
    });
    for (const l of ['records', 'private', 'table'] as const)
      for (const c of ['a', 'b', 'c', 'd', 'e'] as const)
        if (CELLS[l][c] !== undefined)
          it(`${l === 'table' ? 'a ref table' : l === 'private' ? 'a private repository' : 'ref records'}, (${c})`, async () => {
            layout = l;
            viaAgent = mode === 'agent';
            try {
              await runCell(c);
            } finally {
              viaAgent = false;
            }
          });
  });
