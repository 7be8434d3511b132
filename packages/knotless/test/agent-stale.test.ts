import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import {
  agentView,
  agentWireView,
  spawnAgent,
  startGate,
  type Gate,
  type RunningAgent,
} from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// The warm agent answers git's `list for-push` from its view at once. Here its event stream runs
// through a relay the test holds back while another machine moves a ref: the view, and the commit
// it is complete at, lag the account as on a slow stream. Whatever git decides on that view, the push
// ends as against a bare repository (git's own line), or, where git decided locally and sent nothing,
// fails with the helper's one sentence: never "up to date" with exit 0, and never a write git's rules
// refuse. And once the stream has delivered the move, git decides on a true view.
const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
let gate: Gate | undefined;
let socket = '';
let agent: RunningAgent | undefined;
// Every case runs twice: on ref records (KNOTLESS_REF_TABLE=0: the warm agent's view of them, its
// commit and the stream's record operations), then on a ref table (the default: the view is the
// table, its CID the swap; agent-table.test.ts counts its pushes).
let onTable = false;
const layout = () => (onTable ? {} : { KNOTLESS_REF_TABLE: '0' });
const warm = useGitUser(t, 'alice.test', () => ({
  ...layout(),
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT_SOCKET: socket,
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));
// Another machine of the same account, with its own cache and no agent.
const other = useGitUser(t, 'alice.test', () => ({
  ...layout(),
  KNOTLESS_AGENT: '0',
  KNOTLESS_COMPACT: '0',
}));

before(async () => {
  await t.ready;
  // The agent's connections are told apart: each push here must have been carried by the agent.
  proxy = await startProxy({ target: t.net.pdsUrl, watchPids: () => (agent ? [agent.child.pid!] : []) });
  gate = await startGate(t.net.pdsUrl);
  socket = path.join(t.tmpdir(), 'agent.sock');
});
after(() => proxy?.close());

const did = () => t.dids['alice.test']!;
const q = (repo: string) => ({ did: did(), repo, pds: gate!.url });

/**
 * Points the warm user's identity cache at the relay as alice's PDS: helpers name that PDS to the
 * agent, whose stream then runs through the relay (every other request goes to KNOTLESS_SERVICE, the
 * proxy). Done again before each command: a command that names alice by her cached handle checks it
 * afresh and writes her real PDS back (the warm user's URLs name her DID, which is not checked).
 */
function pointAtGate(): void {
  const file = path.join(warm.env['KNOTLESS_CACHE_DIR']!, 'identity.json');
  const cache = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    dids: Record<string, { value: { pds: string } }>;
  };
  cache.dids[did()]!.value.pds = gate!.url;
  fs.writeFileSync(file, JSON.stringify(cache));
}

/** The warm user's git, through the relay's stream. */
const held = {
  git: (cwd: string, ...args: string[]) => (pointAtGate(), warm.git(cwd, ...args)),
  ok: (cwd: string, ...args: string[]) => (pointAtGate(), warm.ok(cwd, ...args)),
};

/** Starts the warm user's agent once. */
async function ensureAgent(): Promise<void> {
  if (agent !== undefined) return;
  assert.equal((await warm.knotless('repo', 'list')).code, 0);
  pointAtGate();
  agent = await spawnAgent(socket, { ...warm.env, KNOTLESS_COMPACT: '0', KNOTLESS_SERVICE: proxy!.url });
}

/**
 * Waits until the agent's view of `name` answers at once with `ref` at `oid`: as long as the stream
 * takes to deliver it, which only the test's own time limit bounds (a slow machine is not a failure).
 */
async function untilAgentSees(name: string, ref: string, oid: string | undefined): Promise<void> {
  for (;;) {
    const view = await viewNow(name);
    if (view !== null && view.get(ref) === oid) return;
    // Asked again after a moment: the agent has no call that waits for a view to change.
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * The agent's view of `name` as it answers a helper at once (ref → target), or null when it gives
 * none: a view of ref records with the commit it is complete at, or a view of the table.
 */
async function viewNow(name: string): Promise<Map<string, string | undefined> | null> {
  if (onTable) {
    const view = await agentView(socket, q(name));
    return view === null ? null : new Map([...view].map(([ref, r]) => [ref, r.target]));
  }
  const view = await agentWireView(socket, q(name));
  if (view === null || view.commit === undefined) return null;
  return new Map(view.refs.map((r) => [r.record.ref, r.record.target]));
}

let n = 0;
/**
 * A repository with main at c2 (on c1) and side at c1, pushed through the agent, which sees them;
 * the other machine's clone of it.
 */
async function repository(): Promise<{
  url: string;
  name: string;
  dir: string;
  od: string;
  c1: string;
  c2: string;
}> {
  await ensureAgent();
  const name = `stale-${++n}`;
  assert.equal((await warm.knotless('repo', 'create', name)).code, 0);
  // The warm user names alice by her DID; the other machine by her handle.
  const url = `knotless://${did()}/${name}`;
  pointAtGate();
  const dir = await newRepo(warm, url);
  const c1 = await commitFiles(warm, dir, { one: 'one\n' }, 'c1');
  await held.ok(dir, 'push', '-q', 'origin', 'main', 'main:side');
  const c2 = await commitFiles(warm, dir, { two: 'two\n' }, 'c2');
  await held.ok(dir, 'push', '-q', 'origin', 'main');
  await untilAgentSees(name, 'refs/heads/main', c2);
  const od = other.dir();
  await other.ok(od, 'clone', '-q', url, 'c');
  return { url, name, dir, od: `${od}/c`, c1, c2 };
}

/**
 * Runs `push` (the warm user's git) and checks that the agent carried it: the push reached the PDS
 * (through the proxy), and only on the agent's own connections, never the helper's.
 */
async function carried<T>(push: () => Promise<T>): Promise<T> {
  const from = proxy!.requests.length;
  const res = await push();
  const sent = proxy!.requests.slice(from);
  assert.ok(sent.length > 0, 'the push sent nothing to the PDS');
  const around = sent.filter((r) => r.pid === undefined || r.pid !== agent?.child.pid);
  assert.deepEqual(
    around.map((r) => `${r.method} ${r.nsid ?? r.path}`),
    [],
    `${around.length} of ${sent.length} requests went around the agent`,
  );
  return res;
}

/** The remote's refs as the other machine lists them: ref → oid. */
async function remote(url: string): Promise<Map<string, string>> {
  const out = await other.ok(other.dir(), 'ls-remote', url);
  return new Map(
    out
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => [l.split('\t')[1]!, l.split('\t')[0]!]),
  );
}

/**
 * Holds the agent's stream back, lets the other machine `move`, checks that the agent's view still
 * has `ref` at `was`, then runs `push` (git through the agent); lets the stream go after.
 */
async function whileBehind(
  name: string,
  move: () => Promise<unknown>,
  ref: string,
  was: string | undefined,
  push: () => Promise<{ code: number | null; stdout: string; stderr: string }>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const cuts = () => (agent!.log().match(/event stream .*(cut|reconnected)/g) ?? []).length;
  const before = cuts();
  gate!.hold();
  try {
    await move();
    const view = await viewNow(name);
    assert.notEqual(view, null, 'the view answers at once');
    assert.equal(view?.get(ref), was, 'the view lags');
    return await carried(push);
  } finally {
    gate!.release();
    // The gate holds events, not the heartbeat: however long the hold, the stream was not cut (a
    // cut stream drops the views, and the push would have listed instead).
    assert.equal(cuts(), before, `the stream was cut while held\n${agent!.log()}`);
    // A refused swap wrote nothing: the view stays, and the stream brings it up to date.
    assert.doesNotMatch(agent!.log(), new RegExp(`dropped the view of [^ ]+/${name}:`));
  }
}

for (const kind of ['ref records', 'a ref table'] as const)
  describe(`a push through the agent while its stream lags another machine, on ${kind}`, () => {
    before(() => {
      onTable = kind === 'a ref table';
    });
    // Before the network's own `after`: the PDS waits for open event streams when it closes.
    if (kind === 'a ref table')
      after(async () => {
        await agent?.stop();
        await gate?.close();
      });

    // The stream alone, whatever the layout: once.
    if (kind === 'ref records')
      it("a stream held through the agent's heartbeat stays up: its events wait, its pings are answered", async () => {
        const { name, c2 } = await repository();
        const logAt = agent!.log().length;
        const lost = () => /event stream of [^\n]*: /.test(agent!.log().slice(logAt));
        gate!.hold();
        try {
          // Three of the agent's pings (one each 10 s) sent while held: a stream whose pongs were held too
          // would have been cut at the second.
          const from = gate!.pings();
          while (gate!.pings() < from + 3 && !lost()) await new Promise((r) => setTimeout(r, 200));
          assert.equal(lost(), false, `the stream was cut while held\n${agent!.log().slice(logAt)}`);
          const view = await agentWireView(socket, q(name));
          assert.notEqual(view?.commit, undefined, 'the view answers at once');
        } finally {
          gate!.release();
        }
        await untilAgentSees(name, 'refs/heads/main', c2);
      });

    it('--force-with-lease that git judges "up to date" on the stale view fails with one sentence', async () => {
      const { url, name, dir, od, c2 } = await repository();
      const c4 = await commitFiles(other, od, { four: 'four\n' }, 'c4');
      const res = await whileBehind(
        name,
        () => other.ok(od, 'push', '-q', 'origin', 'main'),
        'refs/heads/main',
        c2,
        () => held.git(dir, 'push', '--porcelain', '--force-with-lease', 'origin', 'main'),
      );
      // git's own status for a push whose helper failed, as for a refused ref: the lease step of
      // git-parity.test.ts may end so through the agent.
      assert.equal(res.code, 1, res.stderr);
      assert.match(res.stdout, /^=\trefs\/heads\/main:refs\/heads\/main\t\[up to date\]$/m);
      assert.match(
        res.stderr,
        /^knotless: .* changed while git was deciding this push \(refs\/heads\/main\)/m,
      );
      assert.equal((await remote(url)).get('refs/heads/main'), c4);
    });

    it('--force-with-lease that git sends is refused as stale info, as a bare repository refuses it', async () => {
      const { url, name, dir, od, c2 } = await repository();
      const c4 = await commitFiles(other, od, { four: 'four\n' }, 'c4');
      await commitFiles(warm, dir, { three: 'three\n' }, 'c3');
      const res = await whileBehind(
        name,
        () => other.ok(od, 'push', '-q', 'origin', 'main'),
        'refs/heads/main',
        c2,
        () => held.git(dir, 'push', '--porcelain', '--force-with-lease', 'origin', 'main'),
      );
      assert.equal(res.code, 1, res.stderr);
      assert.match(res.stdout, /^!\trefs\/heads\/main:refs\/heads\/main\t\[rejected\] \(stale info\)$/m);
      assert.equal((await remote(url)).get('refs/heads/main'), c4);
    });

    /** A push git sends (the view said its ref is behind), judged again on the account as it is. */
    const sent: Array<{
      what: string;
      ref: string;
      move: (od: string) => Promise<unknown>;
      push: (dir: string) => string[];
      code: number;
      line: RegExp;
      after: (r: { c1: string; c2: string; c3: string; c4: string }) => string | undefined;
    }> = [
      {
        what: 'a plain push no longer a fast-forward is rejected "fetch first"',
        ref: 'refs/heads/main',
        move: (od) => other.ok(od, 'push', '-q', 'origin', 'main'),
        push: () => ['push', '--porcelain', 'origin', 'main'],
        code: 1,
        line: /^!\trefs\/heads\/main:refs\/heads\/main\t\[rejected\] \(fetch first\)$/m,
        after: ({ c4 }) => c4,
      },
      {
        what: 'a force without a lease is written over the moved ref',
        ref: 'refs/heads/main',
        move: (od) => other.ok(od, 'push', '-q', 'origin', 'main'),
        push: () => ['push', '--porcelain', '--force', 'origin', 'main'],
        code: 0,
        line: /^.\trefs\/heads\/main:refs\/heads\/main\t/m,
        after: ({ c3 }) => c3,
      },
      {
        what: 'a delete of a ref another machine moved deletes it',
        ref: 'refs/heads/side',
        move: (od) => other.ok(od, 'push', '-q', 'origin', 'HEAD:side'),
        push: () => ['push', '--porcelain', 'origin', ':side'],
        code: 0,
        line: /^-\t:refs\/heads\/side\t\[deleted\]$/m,
        after: () => undefined,
      },
    ];
    for (const c of sent) {
      it(`${c.what}, as by a bare repository`, async () => {
        const { url, name, dir, od, c1, c2 } = await repository();
        const c4 = await commitFiles(other, od, { four: 'four\n' }, 'c4');
        const c3 = await commitFiles(warm, dir, { three: 'three\n' }, 'c3');
        const res = await whileBehind(
          name,
          () => c.move(od),
          c.ref,
          c.ref === 'refs/heads/main' ? c2 : c1,
          () => held.git(dir, ...c.push(dir)),
        );
        assert.equal(res.code, c.code, `${res.stdout}${res.stderr}`);
        assert.match(res.stdout, c.line);
        assert.equal((await remote(url)).get(c.ref), c.after({ c1, c2, c3, c4 }));
      });
    }

    /** What git judges "up to date" on the stale view and sends nothing for: the helper's one read. */
    const unsent: Array<
      [string, (od: string, c1: string) => Promise<unknown>, string, (c1: string) => string]
    > = [
      [
        'rewinds main',
        (od, c1) => other.ok(od, 'push', '-q', 'origin', `+${c1}:refs/heads/main`),
        'refs/heads/main',
        () => 'main',
      ],
      [
        'moves main on',
        (od) =>
          commitFiles(other, od, { four: '4\n' }, 'c4').then(() =>
            other.ok(od, 'push', '-q', 'origin', 'main'),
          ),
        'refs/heads/main',
        () => 'main',
      ],
      [
        'deletes side',
        (od) => other.ok(od, 'push', '-q', 'origin', ':side'),
        'refs/heads/side',
        (c1) => `${c1}:refs/heads/side`,
      ],
    ];
    for (const [what, move, ref, spec] of unsent) {
      it(`fails, never "up to date" with exit 0, when another machine ${what} just before`, async () => {
        const { url, name, dir, od, c1, c2 } = await repository();
        const res = await whileBehind(
          name,
          async () => {
            await move(od, c1);
            return undefined;
          },
          ref,
          ref === 'refs/heads/main' ? c2 : c1,
          async () => {
            const before = await remote(url);
            const out = await held.git(dir, 'push', '--porcelain', 'origin', spec(c1));
            // Nothing was written: the remote is as the other machine left it.
            assert.deepEqual(await remote(url), before);
            return out;
          },
        );
        assert.notEqual(res.code, 0, res.stderr);
        assert.match(res.stdout, /\[up to date\]/);
        assert.match(res.stderr, new RegExp(`changed while git was deciding this push \\(${ref}\\)`));
      });
    }

    it('after a refused swap answers no helper at once with the commit it knows is behind, until the stream delivers', async () => {
      const { name, dir, od, c2 } = await repository();
      const c4 = await commitFiles(other, od, { four: 'four\n' }, 'c4');
      await commitFiles(warm, dir, { three: 'three\n' }, 'c3');
      let meanwhile: Awaited<ReturnType<typeof viewNow>> | undefined;
      const res = await whileBehind(
        name,
        () => other.ok(od, 'push', '-q', 'origin', 'main'),
        'refs/heads/main',
        c2,
        async () => {
          const out = await held.git(dir, 'push', '--porcelain', 'origin', 'main');
          // The stream is still held: no read can show the view current, so it is not given.
          meanwhile = await viewNow(name);
          return out;
        },
      );
      assert.match(res.stdout, /\[rejected\] \(fetch first\)$/m);
      assert.equal(
        meanwhile,
        null,
        `the view was given with a commit known to be behind (c2 ${c2}, c4 ${c4})`,
      );
      // Once the stream delivers the move, the view (kept) answers at once again.
      await untilAgentSees(name, 'refs/heads/main', c4);
    });

    it("decides on a true view once the stream has delivered the move: one read, and git's own refusal", async () => {
      const { url, name, dir, od } = await repository();
      const c4 = await commitFiles(other, od, { four: 'four\n' }, 'c4');
      await other.ok(od, 'push', '-q', 'origin', 'main');
      await untilAgentSees(name, 'refs/heads/main', c4);
      proxy!.reset();
      const res = await carried(() =>
        held.git(dir, 'push', '--porcelain', '--force-with-lease', 'origin', 'main'),
      );
      assert.equal(res.code, 1, res.stderr);
      assert.match(res.stdout, /^!\trefs\/heads\/main:refs\/heads\/main\t\[rejected\] \(stale info\)$/m);
      assert.doesNotMatch(res.stderr, /changed while git was deciding/);
      // git decided locally on the view; the helper checked it with one read before exiting (on a
      // table, that read is the table's proof and the listing of ref records beside it).
      assert.deepEqual(
        proxy!.requests.map((r) => r.nsid).sort(),
        onTable
          ? ['com.atproto.repo.listRecords', 'com.atproto.sync.getRecord']
          : ['com.atproto.repo.listRecords'],
      );
      assert.equal((await remote(url)).get('refs/heads/main'), c4);
    });
  });
