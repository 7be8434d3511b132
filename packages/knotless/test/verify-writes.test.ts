// What a push reads again before it writes, on a repository of ref records, is held to the same
// proof as what it first listed (format.md, "Verified"; security.md, "Records"): a PDS or a proxy
// that hides another machine's push from that second read, between git's decision and the write,
// would have the push judge a fast-forward on a value the ref no longer has and replace the other
// machine's acknowledged commit. Two such reads: an atomic push's listing of the account's refs
// before its one commit (swapped on the account's commit, not on each record), and the one record a
// plain push reads again after its compare-and-swap was refused. Here the proxy lets the first
// listing through, lets another machine push, and then answers the second read with the ref's old
// value: the push must fail with the sentence, and the other machine's commit must stay. The plain
// push's case runs again through the warm agent, which carries the write and the read again (told
// apart by the agent's process at the proxy).
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { startLyingProxy, type Lie, type LyingProxy } from './helpers/lying-proxy.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test']);
let liar: LyingProxy | undefined;
let front: Proxy | undefined;
/** Called once for a request of the reader's, before it is forwarded (the other machine pushes). */
let hook: ((req: { method: string; nsid: string | undefined; path: string }) => Promise<void>) | undefined;

const onRecords = () => ({ KNOTLESS_AGENT: '0', KNOTLESS_COMPACT: '0', KNOTLESS_REF_TABLE: '0' });
/** The other machine: straight to the PDS. */
const other = useGitUser(t, 'alice.test', onRecords);
/** The machine the lie is told to, through the hook's proxy and the liar. */
const reader = useGitUser(t, 'alice.test', () => ({
  ...onRecords(),
  ...(front === undefined ? {} : { KNOTLESS_SERVICE: front.url }),
}));

/** The reader's warm agent, for the cases through it; its requests are told apart by the front proxy. */
let agent: RunningAgent | undefined;
let socket = '';
/** The same machine as `reader`, its helpers asking its agent. */
const warm = useGitUser(t, 'alice.test', () => {
  const { KNOTLESS_AGENT: off, ...env } = onRecords();
  void off;
  return {
    ...env,
    KNOTLESS_AGENT_SOCKET: socket,
    ...(front === undefined ? {} : { KNOTLESS_SERVICE: front.url }),
  };
});

before(async () => {
  await t.ready;
  socket = path.join(t.tmpdir(), 'agent.sock');
  liar = await startLyingProxy(t.net.pdsUrl);
  front = await startProxy({
    watchPids: () => (agent?.child.pid === undefined ? [] : [agent.child.pid]),
    target: liar.url,
    onRequest: async (req) => {
      const h = hook;
      if (h !== undefined) await h(req);
    },
  });
});
after(async () => {
  await front?.close();
  await liar?.close();
});

const SENTENCE = (name: string, why: string) =>
  new RegExp(
    `^knotless: The ref table of alice\\.test/${name} could not be verified \\(${why}\\); nothing from it was used, so check the PDS or the network in between and try again\\.$`,
    'm',
  );

/** The owner's ref records of the repository listed. */
const refListing = (req: { nsid: string | undefined; path: string }) =>
  req.nsid === 'com.atproto.repo.listRecords' &&
  new URLSearchParams(req.path.split('?')[1] ?? '').get('collection') === 'dev.knotless.ref';

/** A repository on ref records at c1, the reader's clone of it with a commit on top (not pushed). */
async function setUp(name: string, machine = reader) {
  const url = `knotless://alice.test/${name}`;
  const made = await other.knotless('repo', 'create', name);
  assert.equal(made.code, 0, made.stderr);
  const odir = await newRepo(other, url);
  const c1 = await commitFiles(other, odir, { 'a.txt': 'one\n' }, 'c1');
  await other.ok(odir, 'push', '-q', 'origin', 'main');
  const parent = machine.dir();
  await machine.ok(parent, 'clone', '-q', url, 'r');
  const rdir = `${parent}/r`;
  const mine = await commitFiles(machine, rdir, { 'b.txt': 'reader\n' }, 'reader');
  return { url, odir, rdir, c1, mine };
}

/** main as the PDS holds it, read straight. */
async function mainOf(url: string): Promise<string> {
  const out = await other.ok(other.dir(), 'ls-remote', url, 'refs/heads/main');
  return out.split('\t')[0]!;
}

/** The other machine pushes a commit of its own onto main, straight to the PDS: what must stay. */
async function otherPushes(odir: string): Promise<string> {
  const theirs = await commitFiles(other, odir, { 'c.txt': 'other\n' }, 'other');
  await other.ok(odir, 'push', '-q', 'origin', 'main');
  return theirs;
}

/**
 * `machine`'s plain push of main, its first write raced: the other machine pushes just before it
 * lands, so the swap is refused and main's record is read again, which the liar answers with main's
 * old value under its new CID. The push must fail with the sentence, the other machine's commit kept.
 */
async function plainRace(name: string, machine: typeof reader): Promise<void> {
  const s = await setUp(name, machine);
  liar!.lies = 0;
  let theirs = '';
  let wrote = false;
  hook = async (req) => {
    if (wrote || req.method !== 'POST') return;
    if (req.nsid !== 'com.atproto.repo.putRecord' && req.nsid !== 'com.atproto.repo.applyWrites') return;
    wrote = true;
    theirs = await otherPushes(s.odir);
    liar!.lie = oldValue(s.c1);
  };
  try {
    const pushed = await machine.git(s.rdir, 'push', 'origin', 'main');
    assert.notEqual(pushed.code, 0, pushed.stderr);
    assert.match(pushed.stderr, SENTENCE(name, 'a ref record read is not the block its CID names'));
    assert.doesNotMatch(pushed.stderr, /\n\s+at .*:\d+:\d+/);
  } finally {
    hook = undefined;
    liar!.lie = undefined;
  }
  assert.ok(wrote, 'the push wrote nothing');
  assert.ok(liar!.lies > 0, 'the proxy told no lie');
  assert.equal(await mainOf(s.url), theirs, "the other machine's push was replaced");
}

describe('a push reads again only what is proved', () => {
  it('an atomic push on ref records: a listing that hides a push landed meanwhile is refused', async () => {
    const name = 'vw-atomic';
    const s = await setUp(name);
    liar!.lies = 0;
    let listings = 0;
    let theirs = '';
    let recorded = '';
    hook = async (req) => {
      if (!refListing(req)) return;
      listings++;
      // The first listing is git's (list for-push), told the truth and kept; before the second
      // (the atomic write's own), the other machine pushes, and the liar answers with the first.
      if (listings === 1) recorded = req.path;
      if (listings === 2) {
        theirs = await otherPushes(s.odir);
        liar!.lie = replayListing(recorded);
      }
    };
    liar!.recording = true;
    try {
      const pushed = await reader.git(s.rdir, 'push', '--atomic', 'origin', 'main');
      assert.notEqual(pushed.code, 0, pushed.stderr);
      assert.match(
        pushed.stderr,
        SENTENCE(name, "a ref record listed is not the one the account's signed commit holds"),
      );
      assert.doesNotMatch(pushed.stderr, /\n\s+at .*:\d+:\d+/);
    } finally {
      hook = undefined;
      liar!.lie = undefined;
      liar!.recording = false;
    }
    assert.ok(listings >= 2, `the push listed ${listings} time(s)`);
    assert.ok(liar!.lies > 0, 'the proxy told no lie');
    assert.equal(await mainOf(s.url), theirs, "the other machine's push was replaced");
  });

  it("a plain push on ref records: the record read again after a refused swap must be its CID's", async () => {
    await plainRace('vw-plain', reader);
  });
});

/** Every listing of the owner's refs answered with the one kept at `path` (the truth of its time). */
function replayListing(path: string): Lie {
  return (asked, answers) => {
    if (!refListing(asked)) return { kind: 'forward' };
    const old = answers.get(path);
    return old === undefined
      ? { kind: 'forward' }
      : { kind: 'answer', body: old, contentType: 'application/json' };
  };
}

/** A read of one ref record answered with its value's target put back to `target`, its CID kept. */
function oldValue(target: string): Lie {
  return (asked) => {
    if (asked.nsid !== 'com.atproto.repo.getRecord' || asked.params.get('collection') !== 'dev.knotless.ref')
      return { kind: 'forward' };
    return {
      kind: 'rewrite',
      rewrite: (body) => {
        const got = JSON.parse(body.toString('utf8')) as { value?: Record<string, unknown> };
        if (got.value?.['ref'] !== 'refs/heads/main') return body;
        return Buffer.from(JSON.stringify({ ...got, value: { ...got.value, target } }));
      },
    };
  };
}

describe('a push through the warm agent reads again only what is proved', () => {
  before(async () => {
    await warm.ready;
    agent = await spawnAgent(socket, warm.env);
  });
  // Before the network's own `after`: the PDS waits for the agent's open event stream when it closes.
  after(() => agent?.stop());

  it("a plain push on ref records: the agent's read after a refused swap must be its CID's", async () => {
    front!.reset();
    await plainRace('vw-agent-plain', warm);
    // The agent carried the write and the read the lie was told to.
    const writes = front!.requests.filter(
      (r) => r.nsid === 'com.atproto.repo.putRecord' || r.nsid === 'com.atproto.repo.applyWrites',
    );
    assert.ok(writes.length > 0 && writes.every((r) => r.pid === agent!.child.pid), agent!.log());
    const reads = front!.requests.filter((r) => r.nsid === 'com.atproto.repo.getRecord');
    assert.ok(
      reads.some((r) => r.pid === agent!.child.pid),
      agent!.log(),
    );
  });
});
