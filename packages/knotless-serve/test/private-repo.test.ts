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
  let dir: string;
  before(async () => {
    await t.ready;
    dir = t.tmpdir();
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

  it('a plain-HTTP clone is told it is private and how a member clones it, before and after the appview indexed it', async () => {
    // The index knows alice (the test above); an appview that stops following never learns of
    // the repository made next.
    await app.close();
    app = await appviewOn(t, path.join(dir, 'index.sqlite'), dir, { firehoses: [] });
    assert.equal((await alice.knotless('repo', 'create', 'sealed', '--private')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/sealed');
    await commitFiles(alice, work, { 'a.txt': 'a\n' }, 'first');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    const said =
      'alice.test/sealed is private (encrypted for its members), so this appview cannot serve it; a member clones it with git clone knotless://alice.test/sealed';
    const refused = async (when: string) => {
      const res = await fetch(`${app.url}/alice.test/sealed/info/refs?service=git-upload-pack`);
      assert.equal(res.status, 403, when);
      assert.match(res.headers.get('content-type') ?? '', /^text\/plain/, when);
      assert.equal(await res.text(), `${said}\n`, when);
      const into = t.tmpdir();
      const clone = await alice.git(into, 'clone', `${app.url}/alice.test/sealed`, 'sealed');
      assert.notEqual(clone.code, 0, when);
      // git shows the answer's text to its user.
      assert.ok(clone.stderr.includes(`remote: ${said}`), `${when}: ${clone.stderr}`);
      assert.ok(!fs.existsSync(path.join(into, 'sealed')), `${when}: git leaves no clone behind`);
    };
    await refused('before the appview indexed it');
    await app.close();
    app = await appviewOn(t, path.join(dir, 'index.sqlite'), dir);
    await waitFor('the repository indexed as private', async () => {
      const page = await get(`${app.url}/alice.test/sealed`);
      return page.status === 200 && page.text.includes('A private repository') ? true : undefined;
    });
    await refused('after the appview indexed it');
  });
});
