// Short ids of issues, to say aloud, and times with their zone: the CLI lists and accepts the same
// short id the appview's pages show (one rule, knotless-core's forge/short-id.ts), lengthened where
// two record keys would give the same one; times are shown in UTC, named, whatever offset a record
// was written with.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Appview } from '../../knotless-serve/src/appview.ts';
import { appviewOn, get, waitFor } from '../../knotless-serve/test/helpers.ts';
import { json, useForgeNet, writeRaw, type ItemJson } from './helpers/forge.ts';

let app: Appview | undefined;
const {
  t,
  users: [alice, bob],
} = useForgeNet(['alice.test', 'bob.test'], () => app?.url);

// Two keys whose last four characters of time are the same ("bcde"): each needs a fifth.
const A = '3kaaaa2bcde22';
const B = '3kaaab3bcde22';

describe('short ids and time zones of issues', () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
  });
  after(async () => {
    await app?.close();
  });

  it('the CLI lists, accepts and the pages show the same short ids, times in UTC', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'proj')).code, 0);
    const repo = `at://${t.dids['alice.test']}/dev.knotless.repo/proj`;
    const made = json<ItemJson>(
      await bob.knotless('issue', 'create', 'alice.test/proj', '--title', 'Made by the CLI', '--json'),
    );
    const rkey = made.id.slice(made.id.lastIndexOf('/') + 1);
    await writeRaw(
      t,
      'bob.test',
      'dev.knotless.issue',
      { repo, title: 'First of a pair', createdAt: '2026-01-02T03:04:05+02:00' },
      A,
    );
    await writeRaw(
      t,
      'bob.test',
      'dev.knotless.issue',
      { repo, title: 'Second of a pair', createdAt: '2026-01-02T03:04:06Z' },
      B,
    );
    const listed = await waitFor('the appview to index the three issues', async () => {
      const l = json<(ItemJson & { short: string })[]>(
        await alice.knotless('issue', 'list', 'alice.test/proj', '--json'),
      );
      return l.length === 3 ? l : undefined;
    });
    const shorts = new Map(listed.map((i) => [i.title, i.short]));
    assert.deepEqual(Object.fromEntries(shorts), {
      'Made by the CLI': rkey.slice(7, 11),
      'First of a pair': '2bcde',
      'Second of a pair': '3bcde',
    });

    // The text listing: short id first, the time in UTC last.
    const text = await alice.knotless('issue', 'list', 'alice.test/proj');
    assert.equal(text.code, 0, text.stderr);
    const line = text.stdout.split('\n').find((l) => l.includes('First of a pair'));
    assert.match(
      line ?? '',
      /^2bcde {2}\S+ {2}open {4}First of a pair {2}\(bob\.test\) {2}2026-01-02 01:04:05 UTC$/,
    );

    // The short id names the issue wherever an id does; a shorter one that names two is refused.
    const view = await alice.knotless('issue', 'view', 'alice.test/proj', '2bcde');
    assert.equal(view.code, 0, view.stderr);
    assert.match(view.stdout, /^First of a pair$/m);
    assert.match(view.stdout, /^ {2}opened {3}2026-01-02 01:04:05 UTC$/m);
    const mine = await alice.knotless('issue', 'view', 'alice.test/proj', rkey.slice(7, 11));
    assert.equal(mine.code, 0, mine.stderr);
    assert.match(mine.stdout, /^Made by the CLI$/m);
    const both = await alice.knotless('issue', 'view', 'alice.test/proj', 'bcde');
    assert.equal(both.code, 2, both.stderr);
    assert.match(both.stderr, /bcde names 2 issues/);

    // The pages: the same short ids, and the time with its zone named.
    const page = await get(`${app!.url}/alice.test/proj/issues?state=all`);
    assert.equal(page.status, 200);
    for (const short of shorts.values()) assert.ok(page.text.includes(`#${short}<`), short);
    assert.ok(
      page.text.includes('<time datetime="2026-01-02T01:04:05.000Z">2026-01-02 01:04:05 UTC</time>'),
      page.text,
    );
    const one = await get(`${app!.url}/alice.test/proj/issues/${t.dids['bob.test']}/${B}`);
    assert.equal(one.status, 200);
    assert.ok(one.text.includes('#3bcde<'));
  });
});
