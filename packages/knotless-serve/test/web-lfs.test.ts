// Git LFS files on the appview: a file page shows the object's size, not the pointer's text, and the
// raw download is the object itself, read from the owner's PDS.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { KNOTLESS_BIN, runProcess } from '../../knotless/test/helpers/cli.ts';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, get, waitFor, xrpc } from './helpers.ts';

const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test');
const object = crypto.randomBytes(3 * 1024 * 1024 + 17);

/** Pushes a repository whose `big.bin` is an LFS file holding `object`. */
async function pushLfs(name: string): Promise<void> {
  assert.equal((await alice.knotless('repo', 'create', name)).code, 0);
  const dir = await newRepo(alice, `knotless://alice.test/${name}`);
  await alice.ok(dir, 'lfs', 'install');
  const installed = await runProcess(process.execPath, [KNOTLESS_BIN, 'lfs', 'install'], {
    env: alice.env,
    cwd: dir,
  });
  assert.equal(installed.code, 0, installed.stderr);
  await alice.ok(dir, 'lfs', 'track', '*.bin');
  await commitFiles(alice, dir, { 'big.bin': object, 'README.md': '# art\n' }, 'lfs');
  await alice.ok(dir, 'push', '-q', 'origin', 'main');
}

describe('Git LFS files on the appview', () => {
  let app: Appview;
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
    await pushLfs('art');
    await waitFor('the mirror', async () => {
      const r = await xrpc<{ refs: unknown[] }>(app, 'dev.knotless.getRepo', {
        actor: 'alice.test',
        repo: 'art',
      });
      return r.refs.length > 0 ? true : undefined;
    });
    await app.idle();
  });
  after(() => app?.close());

  it("shows an LFS file's size and says it is stored with Git LFS, not the pointer's text", async () => {
    const page = await get(`${app.url}/alice.test/art/blob/main/big.bin`);
    assert.equal(page.status, 200);
    assert.match(page.text, /Stored with Git LFS \(3\.0 MiB\)/);
    assert.match(page.text, /3\.0 MiB \(Git LFS\)/);
    assert.doesNotMatch(page.text, /git-lfs\.github\.com\/spec|oid sha256:/);
  });

  it('serves the object itself as the raw file, read from the PDS', async () => {
    const res = await fetch(`${app.url}/alice.test/art/raw/main/big.bin`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/octet-stream');
    assert.ok(Buffer.from(await res.arrayBuffer()).equals(object));
  });
});
