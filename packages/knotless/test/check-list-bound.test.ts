import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { json, newSite, pdsOf, tipOf, useForgeNet } from './helpers/forge.ts';

const {
  t,
  users: [alice, , carol],
} = useForgeNet(['alice.test', 'bob.test', 'carol.test', 'dave.test']);

/** How many verdicts by untrusted runners `check list` shows (knotless-core's UNTRUSTED_SHOWN). */
const UNTRUSTED_SHOWN = 50;

interface ListJson {
  checks: { context: string; runner: string; trusted: boolean }[];
  moreUntrusted?: number;
  partlyRead?: { runner: string; read: number }[];
  unmet?: unknown[];
}

/** Writes a success on `commit` for each of `contexts` straight into `handle`'s account, 200 to an applyWrites. */
async function floodChecks(handle: string, repo: string, commit: string, contexts: string[]): Promise<void> {
  const pds = pdsOf(t, handle);
  const session = (await (
    await fetch(`${pds}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: handle, password: t.password }),
    })
  ).json()) as { accessJwt: string; did: string };
  for (let i = 0; i < contexts.length; i += 200) {
    const writes = contexts.slice(i, i + 200).map((context) => ({
      $type: 'com.atproto.repo.applyWrites#create',
      collection: 'dev.knotless.check',
      value: {
        $type: 'dev.knotless.check',
        repo,
        commit,
        context,
        state: 'success',
        createdAt: new Date().toISOString(),
      },
    }));
    const res = await fetch(`${pds}/xrpc/com.atproto.repo.applyWrites`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessJwt}` },
      body: JSON.stringify({ repo: session.did, writes }),
    });
    assert.equal(res.status, 200, await res.text());
  }
}

const names = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(4, '0')}`);

describe('check list with thousands of checks on one commit', () => {
  let head = '';

  it('lists every trusted verdict and at most 50 others, saying how many more and how to see them', async () => {
    await t.ready;
    await newSite(alice, 'alice.test');
    head = await tipOf(alice, 'knotless://alice.test/site', 'main');
    const protect = await alice.knotless(
      'repo',
      'protect',
      'site',
      'main',
      '--require-check',
      'test',
      '--runner',
      'bob.test',
    );
    assert.equal(protect.code, 0, protect.stderr);
    const repo = `at://${t.dids['alice.test']!}/dev.knotless.repo/site`;
    // bob, trusted: 31 contexts; carol and dave, trusted by no one: 1,000 distinct contexts each.
    await floodChecks('bob.test', repo, head, ['test', ...names('trusted', 30)]);
    await floodChecks('carol.test', repo, head, names('carol', 1000));
    await floodChecks('dave.test', repo, head, names('dave', 1000));

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

    const capped = json<ListJson>(
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
    const all = json<ListJson>(
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
