// Plain git over smart HTTP from the appview: a clone equals a clone through the helper; pushes are
// refused; the compare link the helper prints after pushing a new branch opens on the appview.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { generateRepo, SMALL } from '../../knotless/test/helpers/gen-repo.ts';
import { commitFiles, refsOf, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, get, waitFor, xrpc } from './helpers.ts';

const t = useNetwork(['alice.test']);
let app: Appview;
const alice = useGitUser(t, 'alice.test', () => (app === undefined ? {} : { KNOTLESS_APPVIEW: app.url }));
describe('plain git clones from the appview', () => {
  // Closed inside the suite, before the network: the PDS waits for open event streams to end.
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
  });
  after(async () => {
    await app?.close();
  });
  let src: string;

  it('clones over smart HTTP exactly what a clone through the helper gets', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'gen')).code, 0);
    src = alice.dir();
    await generateRepo(src, SMALL);
    await alice.ok(src, 'remote', 'add', 'origin', 'knotless://alice.test/gen');
    await alice.ok(src, 'push', '-q', '--mirror', 'origin');
    // What was pushed: every ref but the remote-tracking ones the push itself made.
    const want =
      (await refsOf(alice, src))
        .split('\n')
        .filter((l) => l !== '' && !l.includes(' refs/remotes/'))
        .join('\n') + '\n';
    const count = want.split('\n').filter(Boolean).length;
    await waitFor('the mirror to hold every ref', async () => {
      const r = await xrpc<{ refs: unknown[] }>(app, 'dev.knotless.getRepo', {
        actor: 'alice.test',
        repo: 'gen',
      });
      return r.refs.length === count ? true : undefined;
    });
    await app.idle();

    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', '--mirror', 'knotless://alice.test/gen', 'helper.git');
    for (const version of ['2', '0']) {
      const name = `plain-v${version}.git`;
      const res = await alice.git(
        dir,
        '-c',
        `protocol.version=${version}`,
        'clone',
        '--mirror',
        `${app.url}/alice.test/gen`,
        name,
      );
      assert.equal(res.code, 0, res.stderr);
      assert.equal(await refsOf(alice, `${dir}/${name}`), await refsOf(alice, `${dir}/helper.git`));
      assert.equal(await refsOf(alice, `${dir}/${name}`), want);
      assert.equal((await alice.ok(`${dir}/${name}`, 'fsck', '--full', '--no-dangling')).trim(), '');
    }
    // A work-tree clone by the URL the repository page shows, with .git appended, works too.
    await alice.ok(dir, 'clone', '-q', `${app.url}/alice.test/gen.git`, 'work');
    assert.equal(
      (await alice.ok(`${dir}/work`, 'rev-parse', 'HEAD')).trim(),
      (await alice.ok(src, 'rev-parse', 'main')).trim(),
    );
  });

  it("gives shallow and partial clones, as git's own server does", async () => {
    const dir = alice.dir();
    const tip = (await alice.ok(src, 'rev-parse', 'main')).trim();
    // --depth 1: the one commit, marked shallow, whole in its tree.
    await alice.ok(
      dir,
      'clone',
      '-q',
      '--depth',
      '1',
      '--no-single-branch',
      `${app.url}/alice.test/gen`,
      'shallow',
    );
    assert.equal((await alice.ok(`${dir}/shallow`, 'rev-parse', 'HEAD')).trim(), tip);
    assert.equal((await alice.ok(`${dir}/shallow`, 'rev-list', '--count', 'HEAD')).trim(), '1');
    assert.equal((await alice.ok(`${dir}/shallow`, 'rev-parse', '--is-shallow-repository')).trim(), 'true');
    await alice.ok(`${dir}/shallow`, 'fetch', '-q', '--deepen', '5');
    assert.equal(
      (await alice.ok(`${dir}/shallow`, 'rev-list', '--count', '--first-parent', 'HEAD')).trim(),
      '6',
    );
    // --filter=blob:none: history whole, the blobs of old commits left on the server until asked for.
    await alice.ok(dir, 'clone', '-q', '--filter=blob:none', `${app.url}/alice.test/gen`, 'blobless');
    const missing = (await alice.ok(`${dir}/blobless`, 'rev-list', '--objects', '--all', '--missing=print'))
      .split('\n')
      .filter((l) => l.startsWith('?'));
    assert.ok(missing.length > 0, 'a blobless clone left no blob on the server');
    assert.equal((await alice.ok(`${dir}/blobless`, 'config', 'remote.origin.promisor')).trim(), 'true');
    // Checking out an old commit fetches the blobs its tree lacks, in one request.
    const old = (await alice.ok(`${dir}/blobless`, 'rev-parse', 'HEAD~20')).trim();
    await alice.ok(`${dir}/blobless`, 'checkout', '-q', old);
    assert.equal((await alice.ok(`${dir}/blobless`, 'status', '--porcelain')).trim(), '');
    await alice.ok(`${dir}/blobless`, 'fsck', '--no-dangling');
    await alice.ok(`${dir}/blobless`, 'checkout', '-q', 'main');
    assert.equal((await alice.ok(`${dir}/blobless`, 'rev-parse', 'HEAD')).trim(), tip);
  });

  it('refuses pushes over HTTP', async () => {
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', `${app.url}/alice.test/gen`, 'c');
    await commitFiles(alice, `${dir}/c`, { 'x.txt': 'x' }, 'nope');
    const push = await alice.git(`${dir}/c`, 'push', 'origin', 'HEAD:refs/heads/nope');
    assert.notEqual(push.code, 0);
    const res = await fetch(`${app.url}/alice.test/gen/info/refs?service=git-receive-pack`);
    assert.equal(res.status, 403);
  });

  it('serves the compare link the helper prints after pushing a new branch', async () => {
    await alice.ok(src, 'checkout', '-q', '-b', 'topic/new#1', 'main');
    const sha = await commitFiles(alice, src, { 'topic.txt': 'topic work\n' }, 'topic work');
    const push = await alice.git(src, 'push', 'origin', 'topic/new#1');
    assert.equal(push.code, 0, push.stderr);
    const link = /knotless: +(http\S+\/compare\/\S+)/.exec(push.stderr)?.[1];
    assert.ok(link !== undefined, push.stderr);
    assert.equal(link, `${app.url}/alice.test/gen/compare/main...topic/new%231`);
    const page = await waitFor('the compare page', async () => {
      const r = await get(link);
      return r.status === 200 ? r : undefined;
    });
    assert.match(page.text, /topic work/);
    assert.match(page.text, new RegExp(sha.slice(0, 8)));
    assert.match(page.text, /1 commit on topic\/new#1/);
  });
});
