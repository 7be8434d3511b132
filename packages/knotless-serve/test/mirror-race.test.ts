// The appview's mirror while a compaction lands: a mirror sync downloading blobs that
// a compaction frees reads the index again and ends at the compacted state without logging damage.
// The owner's PDS is pointed at a devnet proxy, which holds every blob download until the
// compaction is written and indexed, so the race happens every run.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runGit } from 'knotless-core';
import { startProxy, type Proxy } from 'knotless-devnet';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { noise } from '../../knotless/test/faults/checks.ts';
import { startAppview, type Appview } from '../src/appview.ts';
import { defaultConfig } from '../src/config.ts';
import { waitFor } from './helpers.ts';

const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0' }));
const BLOB = 'com.atproto.sync.getBlob';
let proxy: Proxy;
let app: Appview;
const logs: string[] = [];

async function mainOf(repo: string): Promise<{ target: string | null; packs: number } | undefined> {
  const row = (await app.index.refs(t.dids['alice.test']!, repo)).find((r) => r.ref === 'refs/heads/main');
  return row === undefined ? undefined : { target: row.target, packs: (JSON.parse(row.packs) as []).length };
}

async function mirrorMain(repo: string): Promise<string | undefined> {
  const dir = app.mirror.gitDir(t.dids['alice.test']!, repo);
  if (!fs.existsSync(dir)) return undefined;
  const out = await runGit(['rev-parse', '--verify', '--quiet', 'refs/heads/main'], {
    gitDir: dir,
    okCodes: [1],
  });
  return out.stdout.toString('utf8').trim() || undefined;
}

describe("the appview's mirror during a compaction", () => {
  // Inside the suite, so the appview stops before the network does.
  before(async () => {
    await t.ready;
    proxy = await startProxy({ target: t.net.pdsUrl });
    const dir = t.tmpdir();
    app = await startAppview(
      {
        ...defaultConfig(dir),
        database: path.join(dir, 'index.sqlite'),
        port: 0,
        plcUrl: t.net.plcUrl,
        firehoses: [t.net.pdsUrl.replace(/^http/, 'ws')],
        dev: true,
      },
      (line) => logs.push(line),
    );
  });
  after(async () => {
    await app?.close();
    await proxy?.close();
  });

  it('reads the index again when a blob vanishes mid-download, and logs no damage', async () => {
    const did = t.dids['alice.test']!;
    const repo = 'race';
    const url = `knotless://alice.test/${repo}`;
    assert.equal((await alice.knotless('repo', 'create', repo)).code, 0);
    const dir = await newRepo(alice, url);
    const first = await commitFiles(alice, dir, { 'a.txt': 'one\n' }, 'one');
    await alice.ok(dir, 'push', '-q', 'origin', 'main');
    await waitFor('the first push mirrored', async () =>
      (await mirrorMain(repo)) === first ? true : undefined,
    );
    await app.idle();
    // From here on the mirror downloads through the proxy.
    await app.index.putOwner(did, 'alice.test', proxy.url);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    proxy.inject({ nsid: BLOB, times: Infinity, fault: { kind: 'hold', until: gate } });
    let tip = '';
    try {
      for (let i = 0; i < 3; i++) {
        tip = await commitFiles(alice, dir, { [`big${i}.bin`]: noise(40_000, 50 + i) }, `big ${i}`);
        await alice.ok(dir, 'push', '-q', 'origin', 'main');
      }
      await waitFor('a held blob download', () => Promise.resolve(proxy.count(BLOB) > 0 ? true : undefined));
      await waitFor('the pushes indexed', async () =>
        (await mainOf(repo))?.target === tip ? true : undefined,
      );
      const compact = await alice.knotless('repo', 'compact', repo);
      assert.equal(compact.code, 0, compact.stderr);
      // Four pushes, each a structure pack and a blob pack, become one pack of each kind.
      assert.match(compact.stderr, /refs\/heads\/main: 8 packs → 2/);
      await waitFor('the compaction indexed', async () =>
        (await mainOf(repo))?.packs === 2 ? true : undefined,
      );
    } finally {
      release();
    }
    await waitFor('the mirror at the tip', async () => ((await mirrorMain(repo)) === tip ? true : undefined));
    await app.idle();
    assert.ok(
      proxy.requests.some((r) => r.nsid === BLOB && r.status >= 400),
      'no blob download failed: the compaction did not land mid-download',
    );
    assert.deepEqual(
      logs.filter((l) => l.startsWith('mirror ')),
      [],
    );
    const fsck = await runGit(['fsck', '--full'], { gitDir: app.mirror.gitDir(did, repo), okCodes: [] });
    assert.equal(fsck.code, 0);
  });
});
