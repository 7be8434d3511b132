import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { KNOTLESS_BIN, runProcess } from './helpers/cli.ts';
import { NO_CLONE, json, newSite, openPr, tipOf, uploadRaw, useForgeNet, writeRaw } from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';

const {
  t,
  users: [alice, bob],
  env,
} = useForgeNet(['alice.test', 'bob.test']);

let bobClone = NO_CLONE;
let idsPr = '';
let aliceDid = '';

/**
 * A pull request bob writes by hand into alice's site: one round whose pack holds exactly `objects`
 * of bob's clone (pack-objects without --revs), as a hostile client could make it.
 */
async function handMadePr(
  title: string,
  head: string,
  base: string,
  objects: string[],
  rkey?: string,
): Promise<string> {
  const pack = execFileSync('git', ['pack-objects', '--stdout', '-q'], {
    cwd: bobClone,
    input: `${objects.join('\n')}\n`,
  });
  const blob = await uploadRaw(t, 'bob.test', pack);
  const now = new Date().toISOString();
  const site = `at://${aliceDid}/dev.knotless.repo/site`;
  const uri = await writeRaw(
    t,
    'bob.test',
    'dev.knotless.pull',
    {
      repo: site,
      base: 'main',
      head: { repo: site, branch: 'main' },
      title,
      rounds: [{ head, base, pack: blob, createdAt: now }],
      createdAt: now,
    },
    rkey,
  );
  return uri;
}

describe('hostile pull requests written by hand', () => {
  it('alice has a repository, bob a clone of it', async () => {
    await newSite(alice, 'alice.test');
    aliceDid = json<{ did: string }>(await alice.knotless('whoami', '--json')).did;
    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', 'knotless://alice.test/site', 'c');
    bobClone = `${dir}/c`;
  });

  it("a round whose pack holds its commit but not the commit's tree: checkout and merge refuse, nothing moves", async () => {
    const base = (await bob.ok(bobClone, 'rev-parse', 'HEAD')).trim();
    const head = await commitFiles(bob, bobClone, { 'hidden.txt': 'not in the pack\n' }, 'tree left out');
    const uri = await handMadePr('Partial pack', head, base, [head]);
    const id = uri.replace(/^at:\/\//, '').replace('/dev.knotless.pull/', '/');

    const clone = alice.dir();
    await alice.ok(clone, 'clone', '-q', 'knotless://alice.test/site', 'c');
    const co = await runProcess(process.execPath, [KNOTLESS_BIN, 'pr', 'checkout', 'alice.test/site', id], {
      env: { ...alice.env, ...env() },
      cwd: `${clone}/c`,
    });
    assert.equal(co.code, 12, co.stderr);
    assert.match(co.stderr, /The round's pack and this clone lack objects its commit/);
    assert.equal(
      (await alice.git(`${clone}/c`, 'rev-parse', '-q', '--verify', `refs/heads/pr/${id.split('/')[1]!}`))
        .code,
      1,
    );
    await alice.ok(`${clone}/c`, 'fsck', '--connectivity-only');
    const merged = await alice.knotless('pr', 'merge', 'alice.test/site', id);
    assert.match(
      merged.stderr,
      /The round's pack and main of alice\.test\/site lack objects .*knotless pr update/,
    );
    assert.equal(merged.code, 12, merged.stderr);
    assert.equal(merged.stderr.trim().split('\n').length, 1, merged.stderr);
    assert.equal(await tipOf(alice, 'knotless://alice.test/site', 'main'), base);
  });

  it('checks out a pull request whose record key git would not take in a branch name, or is too long for a file name', async () => {
    const base = (await bob.ok(bobClone, 'rev-parse', 'HEAD~1')).trim();
    await bob.ok(bobClone, 'reset', '-q', '--hard', base);
    const head = await commitFiles(bob, bobClone, { 'odd.txt': 'odd key\n' }, 'odd key');
    const objects = (await bob.ok(bobClone, 'rev-list', '--objects', head, '--not', base))
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split(' ')[0]!);
    // What git refuses becomes -, and the key's hash follows: fix:1 and fix~1 stay two branches.
    const hash = (k: string) => createHash('sha256').update(k).digest('hex').slice(0, 8);
    const expected: Record<string, string> = {
      'fix:1': `pr/fix-1-${hash('fix:1')}`,
      'fix~1': `pr/fix-1-${hash('fix~1')}`,
      'a..b': `pr/a-b-${hash('a..b')}`,
      'x.lock': `pr/x-lock-${hash('x.lock')}`,
      '.dot.': `pr/-dot--${hash('.dot.')}`,
      // A key too long for a file name: cut, its hash following.
      [`${'k'.repeat(299)}:`]: `pr/${'k'.repeat(60)}-${hash(`${'k'.repeat(299)}:`)}`,
      [`${'a.'.repeat(150)}`]: `pr/${'a.'.repeat(30).replace(/\.$/, '-')}-${hash('a.'.repeat(150))}`,
    };
    for (const [rkey, branch] of Object.entries(expected)) {
      const uri = await handMadePr(`Key ${rkey.slice(0, 20)}`, head, base, objects, rkey);
      const id = uri.replace(/^at:\/\//, '').replace('/dev.knotless.pull/', '/');
      const dir = alice.dir();
      await alice.ok(dir, 'clone', '-q', 'knotless://alice.test/site', 'c');
      const co = await runProcess(process.execPath, [KNOTLESS_BIN, 'pr', 'checkout', 'alice.test/site', id], {
        env: { ...alice.env, ...env() },
        cwd: `${dir}/c`,
      });
      assert.equal(co.code, 0, co.stderr);
      assert.equal(co.stdout.trim(), branch);
      assert.equal((await alice.ok(`${dir}/c`, 'rev-parse', 'HEAD')).trim(), head);
      assert.equal((await alice.ok(`${dir}/c`, 'symbolic-ref', '--short', 'HEAD')).trim(), branch);
    }
  });

  it('pr view says what the rounds were checked against, and marks a head not on the named branch', async () => {
    const a = alice.dir();
    await alice.ok(a, 'clone', '-q', 'knotless://alice.test/site', 'c');
    await commitFiles(alice, `${a}/c`, { 'alice.txt': 'alice\n' }, 'alice on main');
    await alice.ok(`${a}/c`, 'push', '-q', 'origin', 'main');
    await bob.ok(bobClone, 'fetch', '-q', 'origin');
    const base = (await bob.ok(bobClone, 'rev-parse', 'origin/main')).trim();
    const parent = (await bob.ok(bobClone, 'rev-parse', 'origin/main~1')).trim();
    await bob.ok(bobClone, 'checkout', '-q', '-B', 'spoof', base);
    const own = await commitFiles(bob, bobClone, { 'spoof.txt': "not alice's\n" }, 'bob only');
    const objectsOf = async (tip: string, not: string) =>
      (await bob.ok(bobClone, 'rev-list', '--objects', tip, '--not', not))
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' ')[0]!);
    const idOf = (uri: string) => uri.replace(/^at:\/\//, '').replace('/dev.knotless.pull/', '/');
    // Both claim to come from alice.test/site main; only the second's commit is on it.
    const spoofed = idOf(await handMadePr('Spoofed', own, base, await objectsOf(own, base)));
    const genuine = idOf(await handMadePr('Genuine', base, parent, await objectsOf(base, parent)));
    const view = await alice.knotless('pr', 'view', 'alice.test/site', spoofed);
    assert.equal(view.code, 0, view.stderr);
    assert.match(view.stdout, new RegExp(`checked  against alice\\.test/site main at ${base.slice(0, 12)}`));
    assert.match(view.stdout, new RegExp(`0 {2}${own} {2}on .* {2}NOT on alice\\.test/site main`));
    const data = json<{
      rounds: { onBranch?: boolean }[];
      checkedAgainst: { repo: string; commit?: string };
    }>(await alice.knotless('pr', 'view', 'alice.test/site', spoofed, '--json'));
    assert.deepEqual(
      data.rounds.map((r) => r.onBranch),
      [false],
    );
    assert.deepEqual(data.checkedAgainst, { repo: 'alice.test/site', branch: 'main', commit: base });
    const fine = await alice.knotless('pr', 'view', 'alice.test/site', genuine);
    assert.equal(fine.code, 0, fine.stderr);
    assert.match(fine.stdout, /checked {2}against alice\.test\/site main/);
    assert.doesNotMatch(fine.stdout, /NOT on/);
  });

  it('takes back every id form, an at-uri by DID or by handle; a wrong one is one sentence', async () => {
    const base = (await bob.ok(bobClone, 'rev-parse', 'HEAD')).trim();
    const objects = (await bob.ok(bobClone, 'rev-list', '--objects', base, '--not', `${base}~1`))
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split(' ')[0]!);
    const parent = (await bob.ok(bobClone, 'rev-parse', 'HEAD~1')).trim();
    const uri = await handMadePr(
      'Ids \u001b]8;;http://x\u0007click\u001b]8;;\u0007 \u202eevil',
      base,
      parent,
      objects,
    );
    idsPr = uri;
    const [did, , rkey] = uri.replace(/^at:\/\//, '').split('/') as [string, string, string];
    for (const id of [uri, `at://bob.test/dev.knotless.pull/${rkey}`, `bob.test/${rkey}`, `${did}/${rkey}`]) {
      const view = await bob.knotless('pr', 'view', 'alice.test/site', id, '--json');
      assert.equal(json<{ id: string }>(view).id, `${did}/${rkey}`, id);
    }
    const text = await bob.knotless('pr', 'view', 'alice.test/site', uri);
    for (const raw of ['\u001b', '\u0007', '\u202e']) assert.ok(!text.stdout.includes(raw), text.stdout);
    for (const [id, code] of [
      [`at://${did}/dev.knotless.issue/${rkey}`, 2],
      [`at://${did}/dev.knotless.pull/${rkey}/more`, 2],
      [`at://${did}/dev.knotless.pull`, 2],
      [`${did}/nope`, 17],
      [`nobody.test/${rkey}`, 3],
    ] as const) {
      const res = await bob.knotless('pr', 'view', 'alice.test/site', id);
      assert.equal(res.code, code, `${id}: ${res.stderr}`);
      assert.equal(res.stderr.trim().split('\n').length, 1, res.stderr);
      if (code === 17) assert.match(res.stderr, /There is no pull request .* in alice\.test\/site; /);
    }
  });

  it('--round takes a round number in decimal digits, nothing Number() would also read as one', async () => {
    for (const round of ['', ' 0', '0x0', '0e0', '-0', '1']) {
      const res = await bob.knotless(
        'pr',
        'comment',
        'alice.test/site',
        idsPr,
        '--body',
        'hi',
        '--round',
        round,
      );
      assert.equal(res.code, 2, `--round ${JSON.stringify(round)}: ${res.stderr}`);
      assert.match(res.stderr, /--round must be one of the pull request's rounds, 0 to 0\./);
    }
    const ok = await bob.knotless('pr', 'comment', 'alice.test/site', idsPr, '--body', 'hi', '--round', '0');
    assert.equal(ok.code, 0, ok.stderr);
  });

  it('pr checkout again while on pr/<key> brings the work tree to the new round, not only the branch', async () => {
    assert.equal((await bob.knotless('repo', 'fork', 'alice.test/site')).code, 0);
    const main = await tipOf(alice, 'knotless://alice.test/site', 'main');
    await bob.ok(bobClone, 'switch', '-q', '-C', 'again', main);
    await commitFiles(bob, bobClone, { 'again.txt': 'round 0\n' }, 'round 0');
    await bob.ok(bobClone, 'push', '-q', 'knotless://bob.test/site', 'again');
    const pr = await openPr(bob, 'alice.test/site', 'site:again', 'Again');

    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', 'knotless://alice.test/site', 'c');
    const clone = `${dir}/c`;
    const checkout = () =>
      runProcess(process.execPath, [KNOTLESS_BIN, 'pr', 'checkout', 'alice.test/site', pr.id], {
        env: { ...alice.env, ...env() },
        cwd: clone,
      });
    assert.equal((await checkout()).code, 0);
    assert.equal(fs.readFileSync(`${clone}/again.txt`, 'utf8'), 'round 0\n');

    const head = await commitFiles(bob, bobClone, { 'again.txt': 'round 1\n' }, 'round 1');
    await bob.ok(bobClone, 'push', '-q', 'knotless://bob.test/site', 'again');
    assert.equal((await bob.knotless('pr', 'update', 'alice.test/site', pr.id)).code, 0);
    const again = await checkout();
    assert.equal(again.code, 0, again.stderr);
    assert.equal((await alice.ok(clone, 'rev-parse', 'HEAD')).trim(), head);
    assert.equal(fs.readFileSync(`${clone}/again.txt`, 'utf8'), 'round 1\n');
    assert.equal((await alice.ok(clone, 'status', '--porcelain')).trim(), '');

    // Local changes the next round would overwrite: refused in one sentence, nothing moved.
    fs.writeFileSync(`${clone}/again.txt`, 'mine\n');
    await commitFiles(bob, bobClone, { 'again.txt': 'round 2\n' }, 'round 2');
    await bob.ok(bobClone, 'push', '-q', 'knotless://bob.test/site', 'again');
    assert.equal((await bob.knotless('pr', 'update', 'alice.test/site', pr.id)).code, 0);
    const refused = await checkout();
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /commit or stash your changes first/);
    assert.equal((await alice.ok(clone, 'rev-parse', 'HEAD')).trim(), head);
    assert.equal(fs.readFileSync(`${clone}/again.txt`, 'utf8'), 'mine\n');
  });
});
