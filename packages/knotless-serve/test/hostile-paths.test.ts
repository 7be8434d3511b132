// Addresses a hostile reader types, against the appview's repository pages: a NUL, `.` and `..`
// in a file's path, and control characters in what a repository holds (commit messages).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, get, waitFor } from './helpers.ts';

const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test');
let app: Appview;
const repo = '/alice.test/site';

describe('hostile paths and text on the repository pages', () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/site');
    await commitFiles(
      alice,
      work,
      { 'README.md': '# Site\n', 'dir/a.txt': 'a\n', 'lines.txt': 'x\n'.repeat(120_000) },
      'start \u001b]8;;http://evil\u0007link\u001b]8;;\u0007 \u001b[2J\u007fend',
    );
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    await alice.ok(work, 'push', '-q', 'origin', 'main:refs/heads/fix/ünï', 'main:refs/heads/a<b>"c');
    await waitFor('the mirror', async () =>
      (await get(`${app.url}${repo}/raw/main/README.md`)).status === 200 ? true : undefined,
    );
  });
  after(async () => {
    await app?.close();
  });

  it('a path with a NUL, or a . or .. segment, is no file: 404, never another file nor a 500', async () => {
    for (const tail of [
      'raw/main/README.md%00',
      'raw/main/README.md%00.png',
      'blob/main/README.md%00',
      'blob/main/%00',
      'tree/main/%00',
      'blame/main/README.md%00',
      'history/main/README.md%00',
      'raw/main/dir%2F..%2FREADME.md',
      'raw/main/..%2F..%2Fetc%2Fpasswd',
      'blob/main/.%2FREADME.md',
      'blame/main/..%2F..%2Fetc',
      'blame/main/dir%2F..%2Fdir%2Fa.txt',
      'tree/main/dir%2F..',
      'history/main/..%2Fx',
    ]) {
      const res = await get(`${app.url}${repo}/${tail}`);
      assert.equal(res.status, 404, `${tail}: ${res.text.slice(0, 300)}`);
      assert.doesNotMatch(res.text, /# Site/, tail);
      assert.ok(!res.text.includes('\u0000'), `${tail}: a raw NUL in the page`);
    }
  });

  it('control characters of a commit message reach no page raw', async () => {
    for (const tail of [
      '',
      '/commits/main',
      '/blame/main/README.md',
      '/history/main/README.md',
      '/branches',
    ]) {
      const res = await get(`${app.url}${repo}${tail}`);
      assert.equal(res.status, 200, tail);
      assert.match(res.text, /start /, tail);
      // eslint-disable-next-line no-control-regex -- exactly what must not be there
      assert.doesNotMatch(res.text, /[\u0000-\u0008\u000b\u000e-\u001f\u007f]/, tail);
    }
  });

  it("names an archive from its ref: ASCII in filename, the ref's own letters in filename*", async () => {
    await waitFor('the branches', async () =>
      (await get(`${app.url}${repo}/archive/fix/%C3%BCn%C3%AF.zip`)).status === 200 ? true : undefined,
    );
    for (const [tail, ascii, utf8] of [
      ['fix/%C3%BCn%C3%AF.zip', 'site-fix-n-.zip', 'site-fix-%C3%BCn%C3%AF.zip'],
      ['a%3Cb%3E%22c.tar.gz', 'site-a-b-c.tar.gz', 'site-a-b-c.tar.gz'],
      ['main.tar.gz', 'site-main.tar.gz', 'site-main.tar.gz'],
    ] as const) {
      const res = await fetch(`${app.url}${repo}/archive/${tail}`);
      assert.equal(res.status, 200, tail);
      assert.equal(
        res.headers.get('content-disposition'),
        `attachment; filename="${ascii}"; filename*=UTF-8''${utf8}`,
        tail,
      );
      assert.equal(
        res.headers.get('content-type'),
        tail.endsWith('.zip') ? 'application/zip' : 'application/gzip',
      );
      await res.arrayBuffer();
    }
  });

  it('a file of very many short lines is not rendered a line at a time: the page stays small', async () => {
    // 240 KB of source: under the byte limits, but 120,000 lines of markup would be megabytes.
    for (const tail of ['/blob/main/lines.txt', '/blame/main/lines.txt']) {
      const res = await get(`${app.url}${repo}${tail}`);
      assert.equal(res.status, 200, tail);
      assert.ok(res.text.length < 64 * 1024, `${tail}: ${res.text.length} bytes`);
      assert.match(res.text, /too (many|large)/, tail);
    }
    const raw = await get(`${app.url}${repo}/raw/main/lines.txt`);
    assert.equal(raw.text.length, 240_000);
    // A file under the limit still shows its lines.
    const small = await get(`${app.url}${repo}/blob/main/dir/a.txt`);
    assert.match(small.text, /id="L1"/);
  });
});
