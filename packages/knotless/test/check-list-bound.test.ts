import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { contextNames, floodChecks, protectedSite, type CheckListJson } from './helpers/check-flood.ts';
import { json, useForgeNet } from './helpers/forge.ts';

const {
  t,
  users: [alice, , carol],
} = useForgeNet(['alice.test', 'bob.test', 'carol.test', 'dave.test']);

/** How many verdicts by untrusted runners `check list` shows (knotless-core's UNTRUSTED_SHOWN). */
const UNTRUSTED_SHOWN = 50;

describe('check list with thousands of checks on one commit', () => {
  let head = '';

  it('lists every trusted verdict and at most 50 others, saying how many more and how to see them', async () => {
    await t.ready;
    const site = await protectedSite(t, alice, ['test'], ['bob.test']);
    head = site.head;
    const repo = site.repo;
    // bob, trusted: 31 contexts; carol and dave, trusted by no one: 1,000 distinct contexts each.
    await floodChecks(t, 'bob.test', repo, head, ['test', ...contextNames('trusted', 30)]);
    await floodChecks(t, 'carol.test', repo, head, contextNames('carol', 1000));
    await floodChecks(t, 'dave.test', repo, head, contextNames('dave', 1000));

    const res = await carol.knotless('check', 'list', 'alice.test/site', 'main', '--runner', 'dave.test');
    assert.equal(res.code, 0, res.stderr);
    const lines = res.stdout.trimEnd().split('\n');
    // The heading, bob's 31, 50 others, the line saying how many more, one line for each untrusted
    // account read only in part (its newest page of 100 holds more than are shown), the required
    // checks' line.
    assert.equal(lines.length, 1 + 31 + UNTRUSTED_SHOWN + 1 + 2 + 1, lines.slice(0, 5).join('\n'));
    assert.equal(lines.filter((l) => l.endsWith('bob.test (trusted)')).length, 31);
    assert.equal(lines.filter((l) => l.endsWith('(untrusted)')).length, UNTRUSTED_SHOWN);
    assert.ok(
      lines.includes('  … and at least 150 more by runners the owner does not trust (--all lists them)'),
      lines.slice(-5).join('\n'),
    );
    for (const who of ['carol.test', 'dave.test'])
      assert.ok(
        lines.includes(
          `  … only the newest 100 check records of ${who} (untrusted) were read (--all reads them all)`,
        ),
        lines.slice(-5).join('\n'),
      );
    assert.match(lines.at(-1)!, /required checks: all passed \(test\)/);

    const capped = json<CheckListJson>(
      await carol.knotless('check', 'list', 'alice.test/site', head, '--runner', 'dave.test', '--json'),
    );
    assert.equal(capped.checks.filter((c) => c.trusted).length, 31);
    assert.equal(capped.checks.filter((c) => !c.trusted).length, UNTRUSTED_SHOWN);
    assert.equal(capped.moreUntrusted, 150);
    assert.deepEqual(
      capped.partlyRead?.map((p) => [p.runner, p.read]),
      [
        ['dave.test', 100],
        ['carol.test', 100],
      ],
    );
  });

  it('--all lists every verdict', async () => {
    const all = json<CheckListJson>(
      await carol.knotless(
        'check',
        'list',
        'alice.test/site',
        'main',
        '--runner',
        'dave.test',
        '--all',
        '--json',
      ),
    );
    assert.equal(all.checks.length, 31 + 2000);
    assert.equal(all.moreUntrusted, undefined);
    assert.equal(all.partlyRead, undefined);
    assert.deepEqual(all.unmet, []);
  });
});
