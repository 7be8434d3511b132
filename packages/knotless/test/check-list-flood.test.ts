import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { knotless } from './helpers/cli.ts';
import { contextNames, floodChecks, protectedSite, type CheckListJson } from './helpers/check-flood.ts';
import { json, proxyFor, useForgeNet } from './helpers/forge.ts';

// bob is a runner alice does not trust who writes thousands of checks on her commit: `check list
// --runner bob.test` reads a bounded part of his account (newest first), shows at most 50 of his
// checks, and says what it left out; alice's own checks and what her branch waits for are intact.
const {
  t,
  users: [alice, bob],
  env,
} = useForgeNet(['alice.test', 'bob.test']);

/** How many checks bob writes: as many as the brief's hostile account, in 200-record commits. */
const FLOOD = 10_000;

let head = '';

describe('check list against an account that writes thousands of checks', () => {
  it(`alice checks her head and protects main; bob writes ${FLOOD} checks on it, then one on lint`, async () => {
    await t.ready;
    const site = await protectedSite(t, alice, ['test', 'lint']);
    head = site.head;
    const mine = await alice.knotless(
      'check',
      'set',
      'site',
      head,
      '--context',
      'test',
      '--state',
      'success',
    );
    assert.equal(mine.code, 0, mine.stderr);
    await floodChecks(t, 'bob.test', site.repo, head, contextNames('flood', FLOOD, 5));
    const lint = await bob.knotless(
      'check',
      'set',
      'alice.test/site',
      head,
      '--context',
      'lint',
      '--state',
      'success',
    );
    assert.equal(lint.code, 0, lint.stderr);
  });

  it("reads at most a few pages of bob's checks, shows 50 of them and says more were left out", async () => {
    const proxy = await proxyFor(t, 'alice.test');
    try {
      const run = (...args: string[]) =>
        knotless(['check', 'list', 'alice.test/site', ...args], {
          env: { ...alice.env, ...env(), KNOTLESS_SERVICE: proxy.url },
        });
      const bobsPages = () =>
        proxy.requests.filter((r) => {
          const q = new URL(r.path, proxy.url).searchParams;
          return (
            r.nsid === 'com.atproto.repo.listRecords' &&
            q.get('repo') === t.dids['bob.test'] &&
            q.get('collection') === 'dev.knotless.check'
          );
        }).length;

      const listed = json<CheckListJson>(await run('main', '--runner', 'bob.test', '--json'));
      // One page of 100 holds more than the 50 shown: reading stops there, not after 100 pages.
      assert.equal(bobsPages(), 1);
      const trusted = listed.checks.filter((c) => c.trusted);
      const others = listed.checks.filter((c) => !c.trusted);
      assert.deepEqual(
        trusted.map((c) => [c.context, c.state, c.runner]),
        [['test', 'success', 'alice.test']],
      );
      assert.equal(others.length, 50);
      assert.ok(others.every((c) => c.runner === 'bob.test'));
      // The newest page holds lint and flood-09901 … 09999; the first 50 by context are shown.
      assert.deepEqual(
        others.map((c) => c.context),
        Array.from({ length: 50 }, (_, i) => `flood-${String(9901 + i).padStart(5, '0')}`),
      );
      assert.equal(listed.moreUntrusted, 50);
      assert.deepEqual(listed.partlyRead, [{ runner: 'bob.test', runnerDid: t.dids['bob.test'], read: 100 }]);
      // What the merge waits for keeps its meaning: bob's lint is untrusted, alice's test passed.
      assert.deepEqual(
        listed.unmet?.map((u) => [u.context, u.kind]),
        [['lint', 'untrusted']],
      );

      proxy.reset();
      const text = await run(head, '--runner', 'bob.test');
      assert.equal(text.code, 0, text.stderr);
      assert.equal(bobsPages(), 1);
      const lines = text.stdout.trimEnd().split('\n');
      assert.equal(lines.filter((l) => l.endsWith('bob.test (untrusted)')).length, 50);
      assert.ok(
        lines.includes('  … and at least 50 more by runners the owner does not trust (--all lists them)'),
        text.stdout,
      );
      assert.ok(
        lines.includes(
          '  … only the newest 100 check records of bob.test (untrusted) were read (--all reads them all)',
        ),
        text.stdout,
      );

      // Without bob named, nothing of his is read, as before.
      proxy.reset();
      const plain = json<CheckListJson>(await run('main', '--json'));
      assert.equal(bobsPages(), 0);
      assert.deepEqual(
        plain.checks.map((c) => [c.context, c.runner]),
        [['test', 'alice.test']],
      );
      assert.equal(plain.moreUntrusted, undefined);
      assert.equal(plain.partlyRead, undefined);

      // --all asks for every one: bob's whole account is read, and every verdict listed.
      proxy.reset();
      const whole = json<CheckListJson>(await run('main', '--runner', 'bob.test', '--all', '--json'));
      assert.equal(bobsPages(), FLOOD / 100 + 1);
      assert.equal(whole.checks.length, 1 + FLOOD + 1);
      assert.equal(whole.partlyRead, undefined);
      assert.deepEqual(
        whole.unmet?.map((u) => [u.context, u.kind]),
        [['lint', 'untrusted']],
      );
    } finally {
      await proxy.close();
    }
  });
});
