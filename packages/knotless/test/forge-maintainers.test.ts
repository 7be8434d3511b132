// A repository's maintainers decide as its owner does (format.md, "The authority rule"): the owner's
// ref table lists them, and their close, reopen and labels count, read from their own accounts;
// a record in anyone else's account counts for nothing, and a maintainer removed from the list
// decides nothing any more. On the dev network's two PDSes, read directly (no appview).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readConfig } from 'knotless-core/config/env';
import { activeSession } from '../src/auth/login.ts';
import { Context } from '../src/context.ts';
import { holdDecisions } from '../src/forge/hold.ts';
import { reader } from '../src/forge/subjects.ts';
import { commitFiles } from './helpers/git.ts';
import { json, newSite, openPr, useForgeNet, writeRaw, type ItemJson } from './helpers/forge.ts';
import { tableHands } from './helpers/ref-table.ts';

const {
  t,
  users: [alice, bob, carol, dave],
} = useForgeNet(['alice.test', 'bob.test', 'carol.test', 'dave.test'], undefined, {
  // Alice's site starts on ref records: its table is written by hand from them, naming bob.
  KNOTLESS_REF_TABLE: '0',
});

const REPO = 'alice.test/site';
let issue: ItemJson;
let pull: ItemJson;

/** The item as `user` reads it from the PDSes (no appview): its state and labels. */
async function seen(user: typeof alice, word: 'issue' | 'pr', id: string) {
  const v = json<ItemJson & { labels: string[] }>(await user.knotless(word, 'view', REPO, id, '--json'));
  return { state: v.state, labels: v.labels };
}

/** A maintainer whose DID no PLC directory knows. */
const GHOST = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa';

/** Alice's table of `site` written again with `maintainers` (handles, or DIDs; its refs kept as they are). */
async function maintainedBy(...handles: string[]): Promise<void> {
  const hands = tableHands(t, 'alice.test');
  const stored = await hands.readTable('site');
  assert.ok(stored !== undefined, "alice's site is on a ref table");
  await hands.writeTable(
    'site',
    [],
    handles.map((h) => t.dids[h] ?? h),
    stored.value,
  );
}

describe("maintainers' decisions count as the owner's", () => {
  it("alice's site moves onto a table listing bob; carol opens an issue and a pull request", async () => {
    await t.ready;
    await newSite(alice, 'alice.test');
    const hands = tableHands(t, 'alice.test');
    const main = (await hands.refRecords('site')).get('refs/heads/main')!;
    await hands.writeTable(
      'site',
      [{ ref: 'refs/heads/main', target: main.target!, packs: main.packs }],
      [t.dids['bob.test']!],
    );
    assert.deepEqual(
      (await hands.readTable('site'))?.value.maintainers?.map((m) => m.did),
      [t.dids['bob.test']],
    );
    issue = json<ItemJson>(await carol.knotless('issue', 'create', REPO, '--title', 'It breaks', '--json'));
    assert.equal((await carol.knotless('repo', 'fork', REPO)).code, 0);
    const dir = carol.dir();
    await carol.ok(dir, 'clone', '-q', 'knotless://carol.test/site', 'c');
    await carol.ok(`${dir}/c`, 'switch', '-q', '-c', 'fix');
    await commitFiles(carol, `${dir}/c`, { 'b.txt': 'from carol\n' }, 'carol adds b');
    await carol.ok(`${dir}/c`, 'push', '-q', 'origin', 'fix');
    pull = await openPr(carol, REPO, 'site:fix', 'Add b');
    assert.equal(pull.state, 'open');
  });

  it('bob closes the issue; its author cannot reopen over him; alice can; bob labels it', async () => {
    const closed = await bob.knotless('issue', 'close', REPO, issue.id);
    assert.equal(closed.code, 0, closed.stderr);
    assert.deepEqual(await seen(dave, 'issue', issue.id), { state: 'closed', labels: [] });
    const over = await carol.knotless('issue', 'reopen', REPO, issue.id);
    assert.equal(over.code, 5, over.stderr);
    assert.equal(
      over.stderr,
      `knotless: A maintainer of alice.test/site closed ${issue.id}; only its owner or maintainers can reopen it.\n`,
    );
    assert.equal((await alice.knotless('issue', 'reopen', REPO, issue.id)).code, 0);
    assert.deepEqual(await seen(dave, 'issue', issue.id), { state: 'open', labels: [] });
    const labelled = await bob.knotless('issue', 'label', REPO, issue.id, '--add', 'triaged', '--add', '<b>');
    assert.equal(labelled.code, 0, labelled.stderr);
    assert.deepEqual(await seen(carol, 'issue', issue.id), { state: 'open', labels: ['triaged', '<b>'] });
    // The owner's close keeps the labels the maintainer gave: the team decides as one.
    assert.equal((await alice.knotless('issue', 'close', REPO, issue.id)).code, 0);
    assert.deepEqual(await seen(carol, 'issue', issue.id), { state: 'closed', labels: ['triaged', '<b>'] });
    assert.equal((await bob.knotless('issue', 'reopen', REPO, issue.id)).code, 0);
    assert.deepEqual(await seen(carol, 'issue', issue.id), { state: 'open', labels: ['triaged', '<b>'] });
  });

  it('dave, who maintains nothing, is refused, and his records count for nothing whatever their keys', async () => {
    const close = await dave.knotless('issue', 'close', REPO, issue.id);
    assert.equal(close.code, 5);
    assert.equal(
      close.stderr,
      "knotless: Only alice.test/site's owner or maintainers or the issue's author can close it; you are dave.test.\n",
    );
    const label = await dave.knotless('issue', 'label', REPO, issue.id, '--add', 'spam');
    assert.equal(label.code, 5);
    assert.equal(
      label.stderr,
      "knotless: Only alice.test/site's owner or maintainers can label its issues; you are dave.test.\n",
    );
    const merge = await dave.knotless('pr', 'merge', REPO, pull.id);
    assert.equal(merge.code, 5);
    assert.equal(
      merge.stderr,
      "knotless: Only alice.test/site's owner or maintainers can merge it; you are dave.test.\n",
    );
    // Written by hand into his own account, keyed after everyone's and dated far ahead.
    const later = tidAt(Date.now() + 3_600_000);
    await writeRaw(
      t,
      'dave.test',
      'dev.knotless.issue.state',
      { issue: issue.uri, state: 'closed', labels: ['spam'], createdAt: '2099-01-01T00:00:00.000Z' },
      later,
    );
    assert.deepEqual(await seen(carol, 'issue', issue.id), { state: 'open', labels: ['triaged', '<b>'] });
  });

  it("a maintainer's clock ahead of the owner's does not make the owner's next decision count for nothing", async () => {
    // Bob's close keyed an hour ahead: the team's latest decision.
    await writeRaw(
      t,
      'bob.test',
      'dev.knotless.issue.state',
      { issue: issue.uri, state: 'closed', createdAt: new Date().toISOString() },
      tidAt(Date.now() + 3_600_000),
    );
    assert.equal((await seen(carol, 'issue', issue.id)).state, 'closed');
    const reopened = await alice.knotless('issue', 'reopen', REPO, issue.id);
    assert.equal(reopened.code, 0, reopened.stderr);
    assert.equal((await seen(carol, 'issue', issue.id)).state, 'open');
  });

  it('bob closes and reopens the pull request', async () => {
    assert.equal((await bob.knotless('pr', 'close', REPO, pull.id)).code, 0);
    assert.equal((await seen(dave, 'pr', pull.id)).state, 'closed');
    const author = await carol.knotless('pr', 'reopen', REPO, pull.id);
    assert.equal(author.code, 5, author.stderr);
    assert.equal((await bob.knotless('pr', 'reopen', REPO, pull.id)).code, 0);
    assert.equal((await seen(dave, 'pr', pull.id)).state, 'open');
  });

  it("once alice's table no longer lists bob, his decisions count for nothing, and he is refused", async () => {
    assert.equal((await bob.knotless('issue', 'close', REPO, issue.id)).code, 0);
    assert.equal((await seen(dave, 'issue', issue.id)).state, 'closed');
    // Bob off the list; a maintainer listed whose DID resolves to nothing is left out, said once.
    await maintainedBy(GHOST);
    const view = await dave.knotless('issue', 'view', REPO, issue.id, '--json');
    assert.equal(view.code, 0, view.stderr);
    assert.equal(
      view.stderr
        .split('\n')
        .filter((l) => l.includes(`the decisions of maintainer ${GHOST} could not be read`)).length,
      1,
      view.stderr,
    );
    // Alice's reopen is her latest; bob's later close and his labels no longer count.
    assert.deepEqual(await seen(dave, 'issue', issue.id), { state: 'open', labels: [] });
    const refused = await bob.knotless('issue', 'close', REPO, issue.id);
    assert.equal(refused.code, 5);
    assert.equal(
      refused.stderr.split('\n').at(-2),
      "knotless: Only alice.test/site's owner or maintainers or the issue's author can close it; you are bob.test.",
    );
    // With nobody listed, the sentence names the owner alone.
    await maintainedBy();
    const alone = await bob.knotless('issue', 'close', REPO, issue.id);
    assert.equal(alone.code, 5);
    assert.equal(
      alone.stderr,
      "knotless: Only alice.test/site's owner or the issue's author can close it; you are bob.test.\n",
    );
    // Listed again, his close counts again (it is the team's latest).
    await maintainedBy('bob.test');
    assert.deepEqual(await seen(dave, 'issue', issue.id), { state: 'closed', labels: [] });
  });

  it('before a removal, the owner copies the decisions the maintainer made last, and nothing moves', async () => {
    assert.equal((await bob.knotless('issue', 'label', REPO, issue.id, '--add', 'kept')).code, 0);
    assert.deepEqual(await seen(dave, 'issue', issue.id), { state: 'closed', labels: ['kept'] });
    // Bob's reopen of the pull request is the team's latest too; alice's earlier records are not.
    assert.equal((await seen(dave, 'pr', pull.id)).state, 'open');
    const ctx = new Context(readConfig({ ...alice.env }), { agent: false });
    try {
      const notes: string[] = [];
      const r = reader(ctx, (m) => notes.push(m));
      const auth = await activeSession(ctx);
      const owner = await ctx.resolver.resolve('alice.test');
      const repo = `at://${owner.did}/dev.knotless.repo/site`;
      const bobDid = t.dids['bob.test']!;
      assert.equal(await holdDecisions(r, auth, owner, repo, REPO, bobDid), 2);
      assert.equal(notes.length, 0, notes.join('; '));
      await maintainedBy();
      assert.deepEqual(await seen(dave, 'issue', issue.id), { state: 'closed', labels: ['kept'] });
      assert.equal((await seen(dave, 'pr', pull.id)).state, 'open');
      // No longer a maintainer: nothing of his is copied again.
      const again = reader(ctx, (m) => notes.push(m));
      assert.equal(await holdDecisions(again, auth, owner, repo, REPO, bobDid), 0);
    } finally {
      ctx.close();
    }
    // What alice wrote is hers: carol still cannot reopen it, bob cannot either.
    assert.equal((await carol.knotless('issue', 'reopen', REPO, issue.id)).code, 5);
    assert.equal((await bob.knotless('issue', 'reopen', REPO, issue.id)).code, 5);
  });
});

/** A TID made at `ms` (as a clock that far ahead would make it), built by hand as a client would. */
function tidAt(ms: number): string {
  const B32 = '234567abcdefghijklmnopqrstuvwxyz';
  let n = (BigInt(ms * 1000) << 10n) | 7n;
  let s = '';
  for (let i = 0; i < 13; i++) {
    s = B32[Number(n & 31n)]! + s;
    n >>= 5n;
  }
  return s;
}
