// Pushes that meet an account move: every push the old PDS acknowledged before it stopped taking
// writes reaches the new PDS, and a push that arrives once it has stopped fails in one sentence,
// with git told nothing landed. The moments are made certain by holding the move's own requests at
// a proxy in front of the old PDS while pushes run, not by timing.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy, type ProxyRequest } from 'knotless-devnet';
import { migrateAccount } from '../../knotless-devnet/src/migrate.ts';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import type { Run } from './helpers/cli.ts';
import { commitFiles, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// alice moves from the first PDS with knotless's order; bob from the second with the guide's loss;
// carol's move fails half-way.
const t = useNetwork(['alice.test', 'bob.test', 'carol.test'], { pdses: 2 });
/** Where alice's pushes go: the old PDS, through a proxy that tells the agent's connections apart. */
let pushProxy: Proxy | undefined;
let agent: RunningAgent | undefined;
let socket = '';
const via = () => ({ KNOTLESS_COMPACT: '0', ...(pushProxy ? { KNOTLESS_SERVICE: pushProxy.url } : {}) });
const plain = useGitUser(t, 'alice.test', () => ({ KNOTLESS_AGENT: '0', ...via() }));
const warm = useGitUser(t, 'alice.test', () => ({ KNOTLESS_AGENT_SOCKET: socket, ...via() }));
/** A reader that follows the account wherever its DID document says it lives. */
const reader = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0', KNOTLESS_AGENT: '0' }));
const bob = useGitUser(t, 'bob.test', () => ({ KNOTLESS_COMPACT: '0', KNOTLESS_AGENT: '0' }));
const carol = useGitUser(t, 'carol.test', () => ({ KNOTLESS_COMPACT: '0', KNOTLESS_AGENT: '0' }));

const WRITES = new Set(['com.atproto.repo.putRecord', 'com.atproto.repo.applyWrites']);
const URL_ = 'knotless://alice.test/site';

/** One push of a new commit (with a file big enough to travel as a blob) on `branch`. */
interface Pushed {
  commit: string;
  run: Run;
  /** Record writes it sent, and how many of them came on the agent's connections. */
  writes: number;
  byAgent: number;
  /** Every request it sent, and the agent's: `nsid status agent|helper`. */
  sent: string[];
}

async function push(user: GitUser, dir: string, branch: string, name: string): Promise<Pushed> {
  const commit = await commitFiles(user, dir, { [`${name}.bin`]: crypto.randomBytes(40_000) }, name);
  const from = pushProxy!.requests.length;
  const run = await user.git(dir, 'push', '-q', 'origin', `HEAD:refs/heads/${branch}`);
  const all = pushProxy!.requests.slice(from);
  const writes = all.filter((r) => WRITES.has(r.nsid ?? ''));
  const pid = agent?.child.pid;
  return {
    commit,
    run,
    writes: writes.length,
    byAgent: writes.filter((r) => r.pid === pid).length,
    sent: all.map((r) => `${r.nsid ?? r.path} ${r.status} ${r.pid === pid ? 'agent' : 'helper'}`),
  };
}

/** The refs of an account's repository (alice's site by default) as one PDS holds them, read straight from it: ref → target. */
async function refsOn(
  pds: string,
  handle = 'alice.test',
  repo = handle === 'alice.test' ? 'site' : 'notes',
): Promise<Map<string, string | undefined>> {
  // The repository's ref table (where repo create starts it), else its ref records.
  const table = await fetch(
    `${pds}/xrpc/com.atproto.repo.getRecord?${new URLSearchParams({ repo: t.dids[handle]!, collection: 'dev.knotless.refs', rkey: repo }).toString()}`,
  );
  if (table.status === 200) {
    const { value } = (await table.json()) as { value: { refs: Array<{ ref: string; target?: string }> } };
    return new Map(value.refs.map((r) => [r.ref, r.target]));
  }
  const q = new URLSearchParams({
    repo: t.dids[handle]!,
    collection: 'dev.knotless.ref',
    limit: '100',
  });
  const res = await fetch(`${pds}/xrpc/com.atproto.repo.listRecords?${q.toString()}`);
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { records: Array<{ value: { ref: string; target?: string } }> };
  return new Map(body.records.map((r) => [r.value.ref, r.value.target]));
}

describe('pushes while the account moves to another PDS', () => {
  let plainDir = '';
  let warmDir = '';
  /** Acknowledged while the old PDS was about to stop taking writes (its deactivation held). */
  const beforeStop: Record<string, Pushed> = {};
  /** Sent while the old account's repository was being exported (after it stopped taking writes). */
  const duringCopy: Record<string, Pushed> = {};
  const steps: string[] = [];

  before(async () => {
    await t.ready;
    pushProxy = await startProxy({
      target: t.net.pdses[0]!.url,
      watchPids: () => (agent ? [agent.child.pid!] : []),
    });
    socket = path.join(t.tmpdir(), 'agent.sock');
  });
  after(async () => {
    await agent?.stop();
    await pushProxy?.close();
  });

  it('pushes acknowledged up to the old PDS stopping are all on the new PDS; later ones fail in one sentence', async () => {
    assert.equal((await plain.knotless('repo', 'create', 'site')).code, 0);
    plainDir = plain.dir();
    await plain.ok(plainDir, 'init', '-q');
    await commitFiles(plain, plainDir, { 'README.md': 'hello\n' }, 'first');
    await plain.ok(plainDir, 'remote', 'add', 'origin', URL_);
    await plain.ok(plainDir, 'push', '-q', 'origin', 'main');
    warmDir = warm.dir();
    await warm.ok(warmDir, 'clone', '-q', URL_, '.');
    agent = await spawnAgent(socket, { ...warm.env, ...via() });

    // The move's requests to the old PDS pass a proxy of their own, which runs pushes at two
    // moments: when the deactivation arrives (held until the pushes are answered, so they land
    // while the old PDS still takes writes) and when the export of the repository arrives.
    const held = new Set<string>();
    const moveProxy = await startProxy({
      target: t.net.pdses[0]!.url,
      onRequest: async (req: ProxyRequest) => {
        const moment =
          req.nsid === 'com.atproto.server.deactivateAccount'
            ? beforeStop
            : req.nsid === 'com.atproto.sync.getRepo'
              ? duringCopy
              : undefined;
        if (moment === undefined || held.has(req.nsid!)) return;
        held.add(req.nsid!);
        moment['direct'] = await push(plain, plainDir, 'direct', `${req.nsid!}-direct`);
        moment['agent'] = await push(warm, warmDir, 'agent', `${req.nsid!}-agent`);
      },
    });
    try {
      await migrateAccount({
        plcUrl: t.net.plcUrl,
        from: { ...t.net.pdses[0]!, url: moveProxy.url },
        to: t.net.pdses[1]!,
        account: 'alice.test',
        password: t.password,
        step: (line) => steps.push(line),
      });
    } finally {
      await moveProxy.close();
    }
    assert.equal((await t.net.pdsOf(t.dids['alice.test']!)).url, t.net.pdses[1]!.url);
    assert.deepEqual([...held].sort(), ['com.atproto.server.deactivateAccount', 'com.atproto.sync.getRepo']);

    // Both pushes before the stop were acknowledged, the agent's on the agent's own connections.
    for (const [who, p] of Object.entries(beforeStop)) assert.equal(p.run.code, 0, `${who}: ${p.run.stderr}`);
    assert.ok(
      beforeStop['agent']!.writes > 0 && beforeStop['agent']!.byAgent === beforeStop['agent']!.writes,
    );
    assert.equal(beforeStop['direct']!.byAgent, 0);

    // Every acknowledged push is on the new PDS, read there directly.
    const moved = await refsOn(t.net.pdses[1]!.url);
    for (const [who, p] of [...Object.entries(beforeStop), ...Object.entries(duringCopy)]) {
      if (p.run.code === 0)
        assert.equal(moved.get(`refs/heads/${who}`), p.commit, `${who}'s push was acknowledged`);
    }
    assert.equal(moved.get('refs/heads/direct'), beforeStop['direct']!.commit);
    assert.equal(moved.get('refs/heads/agent'), beforeStop['agent']!.commit);
  });

  it('a push during the copy is refused in one sentence and git is not told it landed', () => {
    const sentence =
      'knotless: The account alice.test is deactivated; its repositories are unavailable until its owner activates it again.';
    for (const [who, p] of Object.entries(duringCopy)) {
      assert.notEqual(p.run.code, 0, `${who}'s push during the copy was acknowledged`);
      assert.equal(p.run.stderr.trim(), sentence, who);
    }
    // The direct push was refused by the old PDS itself; the agent's helper sent nothing of its own:
    // the agent answered it.
    assert.ok(
      duringCopy['direct']!.sent.some((r) => / 400 helper$/.test(r)),
      duringCopy['direct']!.sent.join(', '),
    );
    assert.deepEqual(
      duringCopy['agent']!.sent.filter((r) => r.endsWith(' helper')),
      [],
    );
  });

  it('git in each clone holds as pushed only what landed, and a clone from the new PDS has it all', async () => {
    assert.equal(
      (await plain.ok(plainDir, 'rev-parse', 'origin/direct')).trim(),
      beforeStop['direct']!.commit,
    );
    assert.equal((await warm.ok(warmDir, 'rev-parse', 'origin/agent')).trim(), beforeStop['agent']!.commit);
    // The blobs came along: a clone from the new PDS has both pushes' files, and fsck is clean.
    const fresh = reader.dir();
    await reader.ok(fresh, 'clone', '-q', '--no-checkout', URL_, '.');
    await reader.ok(fresh, 'fsck', '--strict');
    for (const who of ['direct', 'agent'])
      assert.equal((await reader.ok(fresh, 'rev-parse', `origin/${who}`)).trim(), beforeStop[who]!.commit);
    // The move said so, in that order.
    const at = (start: string) => steps.findIndex((s) => s.startsWith(start));
    assert.ok(at('deactivating') >= 0 && at('deactivating') < at('importing'), steps.join('\n'));
  });
});

describe('what the PDS an account left still serves of it', () => {
  it('its repository and blobs to the owner alone; listings to no one', async () => {
    const old = t.net.pdses[0]!.url;
    const did = t.dids['alice.test']!;
    const q = (p: Record<string, string>) => new URLSearchParams(p).toString();
    const refused = async (res: Response) => ({
      status: res.status,
      error: ((await res.json()) as { error?: string }).error,
    });
    assert.deepEqual(await refused(await fetch(`${old}/xrpc/com.atproto.sync.getRepo?${q({ did })}`)), {
      status: 400,
      error: 'RepoDeactivated',
    });
    const listing = await fetch(
      `${old}/xrpc/com.atproto.repo.listRecords?${q({ repo: did, collection: 'dev.knotless.ref' })}`,
    );
    assert.equal(listing.status, 400, await listing.text());
    // The owner may still log in there (a deactivated account may) and read the repository whole.
    const login = await fetch(`${old}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: did, password: t.password }),
    });
    assert.equal(login.status, 200);
    const { accessJwt } = (await login.json()) as { accessJwt: string };
    const auth = { authorization: `Bearer ${accessJwt}` };
    const car = await fetch(`${old}/xrpc/com.atproto.sync.getRepo?${q({ did })}`, { headers: auth });
    assert.equal(car.status, 200);
    assert.equal(car.headers.get('content-type'), 'application/vnd.ipld.car');
    const blobs = (await (
      await fetch(`${old}/xrpc/com.atproto.sync.listBlobs?${q({ did })}`, { headers: auth })
    ).json()) as { cids: string[] };
    assert.ok(blobs.cids.length > 0);
    const blob = await fetch(`${old}/xrpc/com.atproto.sync.getBlob?${q({ did, cid: blobs.cids[0]! })}`, {
      headers: auth,
    });
    assert.equal(blob.status, 200);
  });
});

describe('a push a move in the guide order left behind, pushed again from the clone that made it', () => {
  it('git fetch shows the branch going back, and pushing the value before the fetch puts it back', async () => {
    const [from, to] = [t.net.pdses[1]!, t.net.pdses[0]!];
    const did = t.dids['bob.test']!;
    const url = 'knotless://bob.test/notes';
    assert.equal((await bob.knotless('repo', 'create', 'notes')).code, 0);
    const dir = bob.dir();
    await bob.ok(dir, 'init', '-q');
    const first = await commitFiles(bob, dir, { 'a.txt': 'a\n' }, 'first');
    await bob.ok(dir, 'remote', 'add', 'origin', url);
    await bob.ok(dir, 'push', '-q', 'origin', 'main');
    // The export the guide's order makes while the account still takes writes…
    const login = await fetch(`${from.url}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: did, password: t.password }),
    });
    const { accessJwt } = (await login.json()) as { accessJwt: string };
    const early = await fetch(`${from.url}/xrpc/com.atproto.sync.getRepo?did=${did}`, {
      headers: { authorization: `Bearer ${accessJwt}` },
    });
    assert.equal(early.status, 200);
    const car = new Uint8Array(await early.arrayBuffer());
    // …then a push the old PDS acknowledges before it is deactivated…
    const lost = await commitFiles(
      bob,
      dir,
      { 'b.bin': crypto.randomBytes(40_000) },
      'acknowledged, then lost',
    );
    await bob.ok(dir, 'push', '-q', 'origin', 'main');
    // …and the move carries that early export: the new PDS gets the repository without it.
    const moveProxy = await startProxy({
      target: from.url,
      faults: [
        {
          nsid: 'com.atproto.sync.getRepo',
          fault: { kind: 'replace', body: car, contentType: 'application/vnd.ipld.car' },
        },
      ],
    });
    try {
      await migrateAccount({
        plcUrl: t.net.plcUrl,
        from: { ...from, url: moveProxy.url },
        to,
        account: 'bob.test',
        password: t.password,
        step: () => {},
      });
    } finally {
      await moveProxy.close();
    }
    assert.equal((await refsOn(to.url, 'bob.test')).get('refs/heads/main'), first);

    // What configuration.md tells the user to do: log in again on the new PDS, fetch, and push the
    // branch's value from before the fetch.
    const again = await bob.knotless('login', 'bob.test', '--app-password', t.password);
    assert.equal(again.code, 0, again.stderr);
    const fetched = await bob.git(dir, 'fetch', 'origin');
    assert.equal(fetched.code, 0, fetched.stderr);
    assert.match(fetched.stderr, /\(forced update\)/);
    assert.equal((await bob.ok(dir, 'rev-parse', 'origin/main@{1}')).trim(), lost);
    const pushed = await bob.git(dir, 'push', 'origin', 'origin/main@{1}:refs/heads/main');
    assert.equal(pushed.code, 0, pushed.stderr);
    assert.equal((await refsOn(to.url, 'bob.test')).get('refs/heads/main'), lost);
    const fresh = bob.dir();
    await bob.ok(fresh, 'clone', '-q', url, '.');
    await bob.ok(fresh, 'fsck', '--strict');
    assert.equal((await bob.ok(fresh, 'rev-parse', 'HEAD')).trim(), lost);
  });
});

describe('a move that fails after the old account stopped taking writes', () => {
  it('activates the old account again, so that it stays where it was and takes pushes', async () => {
    const [from, to] = [t.net.pdses[0]!, t.net.pdses[1]!];
    const did = t.dids['carol.test']!;
    assert.equal((await carol.knotless('repo', 'create', 'notes')).code, 0);
    const dir = carol.dir();
    await carol.ok(dir, 'init', '-q');
    await commitFiles(carol, dir, { 'a.txt': 'a\n' }, 'first');
    await carol.ok(dir, 'remote', 'add', 'origin', 'knotless://carol.test/notes');
    await carol.ok(dir, 'push', '-q', 'origin', 'main');
    // The new PDS refuses the import.
    const toProxy = await startProxy({
      target: to.url,
      faults: [{ nsid: 'com.atproto.repo.importRepo', fault: { kind: 'status', status: 500 } }],
    });
    const steps: string[] = [];
    try {
      await assert.rejects(
        migrateAccount({
          plcUrl: t.net.plcUrl,
          from,
          to: { ...to, url: toProxy.url },
          account: 'carol.test',
          password: t.password,
          step: (line) => steps.push(line),
        }),
        /com\.atproto\.repo\.importRepo on .* failed: 500/,
      );
    } finally {
      await toProxy.close();
    }
    assert.ok(
      steps.some((s) => s.startsWith('deactivating carol.test')),
      steps.join('\n'),
    );
    assert.equal(
      steps.at(-1),
      `the move stopped before the PLC operation: activating carol.test on ${from.url} again`,
    );
    const status = (await (
      await fetch(`${from.url}/xrpc/com.atproto.sync.getRepoStatus?did=${did}`)
    ).json()) as { active: boolean };
    assert.equal(status.active, true);
    assert.equal((await t.net.pdsOf(did)).url, from.url);
    const next = await commitFiles(carol, dir, { 'b.txt': 'b\n' }, 'after the failed move');
    await carol.ok(dir, 'push', '-q', 'origin', 'main');
    assert.equal((await refsOn(from.url, 'carol.test')).get('refs/heads/main'), next);
  });
});

describe('a write the old PDS commits after the copy was read', () => {
  it('is caught by the commit read before and after the copy, and the copy is made again', async () => {
    // A write the old PDS let in just before its deactivation can still commit during the copy;
    // the old PDS's answer after the first copy names another revision, as it would then.
    const [from, to] = [t.net.pdses[0]!, t.net.pdses[1]!];
    const moved = JSON.stringify({
      cid: 'bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy',
      rev: '3zzzzzzzzzzzz',
    });
    const moveProxy = await startProxy({
      target: from.url,
      faults: [
        {
          nsid: 'com.atproto.sync.getLatestCommit',
          nth: 2,
          fault: { kind: 'replace', body: Buffer.from(moved), contentType: 'application/json' },
        },
      ],
    });
    const steps: string[] = [];
    try {
      await migrateAccount({
        plcUrl: t.net.plcUrl,
        from: { ...from, url: moveProxy.url },
        to,
        account: 'carol.test',
        password: t.password,
        step: (line) => steps.push(line),
      });
    } finally {
      await moveProxy.close();
    }
    assert.equal(steps.filter((s) => s.startsWith('importing the repository')).length, 2, steps.join('\n'));
    assert.ok(steps.includes(`${moveProxy.url} committed a write after the copy was read: copying again`));
    assert.equal((await t.net.pdsOf(t.dids['carol.test']!)).url, to.url);
    assert.ok((await refsOn(to.url, 'carol.test')).get('refs/heads/main'));
  });
});
