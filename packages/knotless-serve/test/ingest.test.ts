// Ingestion end to end: real git pushes through the helper to a real PDS, seen by the appview on the
// PDS's event stream, for both index backends (SQLite and a real PostgreSQL server).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runGit } from 'knotless-core';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, get, waitFor, xrpc } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';

const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test');
let pg: PgServer;
before(async () => {
  pg = await startPostgres();
});
after(async () => {
  await pg?.stop();
});

interface RepoView {
  refs: { ref: string; target?: string }[];
  defaultBranch?: string;
}

async function refsOf(app: Appview, repo: string): Promise<Record<string, string>> {
  const view = await xrpc<RepoView>(app, 'dev.knotless.getRepo', { actor: 'alice.test', repo });
  return Object.fromEntries(view.refs.map((r) => [r.ref, r.target ?? '']));
}

async function mirrorRefs(app: Appview, repo: string): Promise<Record<string, string>> {
  const dir = app.mirror.gitDir(t.dids['alice.test']!, repo);
  if (!fs.existsSync(dir)) return {};
  const out = await runGit(['for-each-ref', '--format=%(refname) %(objectname)'], { gitDir: dir });
  return Object.fromEntries(
    out.stdout
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split(' ') as [string, string]),
  );
}

/** Waits until both the index and the mirror show exactly `want`. */
async function converged(app: Appview, repo: string, want: Record<string, string>): Promise<void> {
  await waitFor(`${repo} to show ${JSON.stringify(want)}`, async () => {
    const [idx, mir] = [await refsOf(app, repo), await mirrorRefs(app, repo)];
    return JSON.stringify(idx) === JSON.stringify(want) && JSON.stringify(mir) === JSON.stringify(want)
      ? true
      : undefined;
  });
}

function backendSuite(backend: 'sqlite' | 'postgres'): void {
  describe(`appview ingestion (${backend})`, () => {
    let app: Appview;
    let dataDir: string;
    let database: string;
    let work: string;
    const repo = `ingest-${backend}`;

    before(async () => {
      await t.ready;
      dataDir = t.tmpdir();
      database =
        backend === 'sqlite' ? path.join(dataDir, 'index.sqlite') : await pg.createDatabase(`kl_${backend}`);
      app = await appviewOn(t, database, dataDir);
    });
    after(async () => {
      await app?.close();
    });

    it('shows a push through the helper: repository, commit and branch', async () => {
      assert.equal(
        (await alice.knotless('repo', 'create', repo, '--description', 'seen by the appview')).code,
        0,
      );
      work = await newRepo(alice, `knotless://alice.test/${repo}`);
      await commitFiles(alice, work, { 'README.md': '# hello\n' }, 'first commit');
      const sha = await commitFiles(alice, work, { 'src/a.ts': 'export const a = 1;\n' }, 'second commit');
      await alice.ok(work, 'push', '-q', 'origin', 'main');
      const pushed = Date.now();
      await converged(app, repo, { 'refs/heads/main': sha });
      const page = await waitFor('the repository page', async () => {
        const r = await get(`${app.url}/alice.test/${repo}`);
        return r.text.includes('second commit') ? r : undefined;
      });
      // How fast is the bench's business (bench/appview.ts); here only that it arrives.
      const seconds = (Date.now() - pushed) / 1000;
      assert.match(page.text, /seen by the appview/);
      assert.match(page.text, />main</);
      const commit = await get(`${app.url}/alice.test/${repo}/commit/${sha}`);
      assert.equal(commit.status, 200);
      assert.match(commit.text, /export const a = 1;/);
      const home = await get(`${app.url}/`);
      assert.match(home.text, new RegExp(`/alice.test/${repo}/commit/${sha}`));
      const repos = await xrpc<{ repos: { name: string }[] }>(app, 'dev.knotless.listRepos', {
        actor: 'alice.test',
      });
      assert.ok(repos.repos.some((r) => r.name === repo));
      console.log(
        `# ${backend}: push visible on the appview ${seconds.toFixed(2)} s after git push returned`,
      );
    });

    it('reflects a forced push and a deleted branch', async () => {
      await alice.ok(work, 'checkout', '-q', '-b', 'feature');
      const feature = await commitFiles(alice, work, { 'f.txt': 'feature\n' }, 'feature work');
      await alice.ok(work, 'push', '-q', 'origin', 'feature');
      await alice.ok(work, 'checkout', '-q', 'main');
      await alice.ok(work, 'commit', '-q', '--amend', '-m', 'second commit, rewritten');
      const amended = (await alice.ok(work, 'rev-parse', 'HEAD')).trim();
      await converged(app, repo, {
        'refs/heads/feature': feature,
        'refs/heads/main': (await refsOf(app, repo))['refs/heads/main']!,
      });
      await alice.ok(work, 'push', '-q', '--force', 'origin', 'main');
      await alice.ok(work, 'push', '-q', 'origin', '--delete', 'feature');
      await converged(app, repo, { 'refs/heads/main': amended });
      const pushes = await xrpc<{ pushes: { ref: string; after?: string }[] }>(
        app,
        'dev.knotless.listPushes',
        {
          actor: 'alice.test',
          repo,
        },
      );
      assert.ok(
        pushes.pushes.some((p) => p.ref === 'refs/heads/feature' && p.after === undefined),
        'deletion noted',
      );
      assert.ok(
        pushes.pushes.some((p) => p.ref === 'refs/heads/main' && p.after === amended),
        'forced push noted',
      );
    });

    it('resumes from its cursor after a restart, missing and duplicating nothing', async () => {
      const before = (
        await xrpc<{ pushes: unknown[] }>(app, 'dev.knotless.listPushes', {
          actor: 'alice.test',
          repo,
          limit: '100',
        })
      ).pushes.length;
      await app.close();
      // Pushed while the appview is down: only the stream from the saved cursor can tell it.
      await alice.ok(work, 'checkout', '-q', '-b', 'while-down');
      const down = await commitFiles(alice, work, { 'down.txt': 'x\n' }, 'pushed while down');
      await alice.ok(work, 'push', '-q', 'origin', 'while-down');
      const main = (await alice.ok(work, 'rev-parse', 'main')).trim();
      app = await appviewOn(t, database, dataDir);
      await converged(app, repo, { 'refs/heads/main': main, 'refs/heads/while-down': down });
      const list = async () =>
        (
          await xrpc<{ pushes: { ref: string; rev: string }[] }>(app, 'dev.knotless.listPushes', {
            actor: 'alice.test',
            repo,
            limit: '100',
          })
        ).pushes;
      assert.equal((await list()).length, before + 1);
      // Replaying the whole stream (cursor rewound to the start) must change nothing.
      await app.close();
      const stream = t.net.pdsUrl.replace(/^http/, 'ws');
      const reopened = await appviewOn(t, database, dataDir, { firehoses: [] });
      // Where the stream ended when the appview closed: nothing was written since.
      const end = await reopened.index.cursor(stream);
      assert.ok(end !== undefined && end > 0, `cursor ${end}`);
      await reopened.index.db.updateTable('cursors').set({ seq: 0 }).execute();
      await reopened.close();
      app = await appviewOn(t, database, dataDir);
      await waitFor('the replay to reach the end', async () => {
        const c = await app.index.cursor(stream);
        return c !== undefined && c >= end ? true : undefined;
      });
      await app.idle();
      const again = await list();
      assert.equal(again.length, before + 1);
      assert.equal(new Set(again.map((p) => `${p.ref} ${p.rev}`)).size, again.length);
      await converged(app, repo, { 'refs/heads/main': main, 'refs/heads/while-down': down });
    });
  });
}

backendSuite('sqlite');
backendSuite('postgres');
