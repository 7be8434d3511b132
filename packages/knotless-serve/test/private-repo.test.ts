// A private repository seen by the appview: its name and that it is private, nothing more. Its ref
// records are sealed and never parse as refs: no ref is indexed, no mirror is made, no page shows
// its contents.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, get, waitFor, xrpc } from './helpers.ts';

const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0' }));
const MARK = `MARKserve${crypto.randomBytes(6).toString('hex')}`;
describe('the appview and a private repository', () => {
  // In the suite: the appview closes before the network it follows.
  let app: Appview;
  before(async () => {
    await t.ready;
    const dir = t.tmpdir();
    app = await appviewOn(t, path.join(dir, 'index.sqlite'), dir);
  });
  after(async () => {
    await app?.close();
  });

  it('shows its name and that it is private, and never its contents', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'hidden', '--private')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/hidden');
    await commitFiles(alice, work, { [`${MARK}.txt`]: `${MARK}\n` }, `commit ${MARK}`);
    await alice.ok(work, 'push', '-q', 'origin', 'main', `main:${MARK}`);
    // A public repository pushed after it: once the appview shows it, it has read every event before.
    assert.equal((await alice.knotless('repo', 'create', 'shown')).code, 0);
    const pub = await newRepo(alice, 'knotless://alice.test/shown');
    await commitFiles(alice, pub, { 'a.txt': 'a\n' }, 'public');
    await alice.ok(pub, 'push', '-q', 'origin', 'main');
    await waitFor('the public repository', async () => {
      const view = await xrpc<{ refs: unknown[] }>(app, 'dev.knotless.getRepo', {
        actor: 'alice.test',
        repo: 'shown',
      });
      return view.refs.length > 0 ? true : undefined;
    });

    const view = await xrpc<{ refs: unknown[] }>(app, 'dev.knotless.getRepo', {
      actor: 'alice.test',
      repo: 'hidden',
    });
    assert.deepEqual(view.refs, []);
    assert.equal(fs.existsSync(app.mirror.gitDir(t.dids['alice.test']!, 'hidden')), false, 'no mirror');
    const account = await get(`${app.url}/alice.test`);
    assert.match(account.text, /hidden<\/strong><\/a>\s*<span class="muted">private<\/span>/);
    const page = await get(`${app.url}/alice.test/hidden`);
    assert.equal(page.status, 200);
    assert.match(page.text, /A private repository: its contents are encrypted for its members/);
    for (const p of ['', '/branches', '/commits', `/tree/${MARK}`])
      assert.equal((await get(`${app.url}/alice.test/hidden${p}`)).text.includes(MARK), false, p);
  });
});
