// Hostile pull request rounds against the appview's mirror: a round's pack is indexed into the
// target repository's mirror (no ref), so a pack holding a commit without its tree must neither
// break the pull request's page nor stand in for the real objects when a branch later moves there.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runGit } from 'knotless-core';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, get, waitFor, xrpc } from './helpers.ts';

// alice on the first PDS, carol on the second.
const t = useNetwork(['alice.test', 'carol.test'], { pdses: 2 });
const alice = useGitUser(t, 'alice.test');
let app: Appview;

async function session(handle: string): Promise<{ did: string; accessJwt: string }> {
  const res = await fetch(`${t.pdsOf[handle]!}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: handle, password: t.password }),
  });
  return (await res.json()) as { did: string; accessJwt: string };
}

/** Calls an XRPC procedure on the PDS as `handle`, as a hand-written client could. */
async function call(
  handle: string,
  nsid: string,
  body: Uint8Array | object,
  type = 'application/json',
): Promise<Record<string, unknown>> {
  const { accessJwt } = await session(handle);
  const res = await fetch(`${t.pdsOf[handle]!}/xrpc/${nsid}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${accessJwt}`, 'content-type': type },
    body: body instanceof Uint8Array ? new Blob([new Uint8Array(body)]) : JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, `${nsid}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

describe('hostile pull requests and issues against the appview: partial round packs, control characters', () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
  });
  after(async () => {
    await app?.close();
  });

  it("shows no diff, and the mirror fetches alice's own pack when her branch moves to that commit", async () => {
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/site');
    const base = await commitFiles(alice, work, { 'README.md': '# Site\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    const aliceDid = (await session('alice.test')).did;
    const carolDid = (await session('carol.test')).did;
    const repoUri = `at://${aliceDid}/dev.knotless.repo/site`;
    const gitDir = app.mirror.gitDir(aliceDid, 'site');
    await waitFor('the mirror of main', async () => {
      const out = await runGit(['rev-parse', '-q', '--verify', 'refs/heads/main'], {
        gitDir,
        okCodes: [1, 128],
      });
      return out.stdout.toString().trim() === base ? true : undefined;
    });

    // alice's next commit, seen by carol before the appview has it (as anyone sees a fork's
    // branch): carol's round holds the commit object alone.
    const next = await commitFiles(alice, work, { 'next.txt': 'the real tree\n' }, 'next');
    const only = await runGit(['pack-objects', '--stdout', '-q'], {
      gitDir: `${work}/.git`,
      input: `${next}\n`,
    });
    const { blob } = await call(
      'carol.test',
      'com.atproto.repo.uploadBlob',
      only.stdout,
      'application/x-git-packed-objects',
    );
    const made = await call('carol.test', 'com.atproto.repo.createRecord', {
      repo: carolDid,
      collection: 'dev.knotless.pull',
      record: {
        $type: 'dev.knotless.pull',
        repo: repoUri,
        base: 'main',
        head: { repo: repoUri, branch: 'main' },
        title: 'Only a commit',
        rounds: [{ head: next, base, pack: blob, createdAt: new Date().toISOString() }],
        createdAt: new Date().toISOString(),
      },
    });
    const rkey = String(made['uri']).split('/').pop()!;
    await waitFor('the pull request', async () => {
      const r = await xrpc<{ pulls: { uri: string }[] }>(app, 'dev.knotless.listPulls', { repo: repoUri });
      return r.pulls.some((p) => p.uri === made['uri']) ? true : undefined;
    });
    const pull = await get(`${app.url}/alice.test/site/pulls/${carolDid}/${rkey}`);
    assert.equal(pull.status, 200, pull.text);
    assert.match(pull.text, /cannot be shown: the round&#39;s pack lacks objects/);
    // Seen again: not taken in (nor counted against the mirror's bound for rounds) a second time.
    assert.match((await get(`${app.url}/alice.test/site/pulls/${carolDid}/${rkey}`)).text, /lacks objects/);
    const ledger = fs.readFileSync(path.join(gitDir, 'knotless-rounds'), 'utf8');
    assert.equal(ledger.trim().split('\n').length, 1, ledger);

    await alice.ok(work, 'push', '-q', 'origin', 'main');
    await waitFor('main moved in the mirror', async () => {
      const out = await runGit(['rev-parse', '-q', '--verify', 'refs/heads/main'], {
        gitDir,
        okCodes: [1, 128],
      });
      return out.stdout.toString().trim() === next ? true : undefined;
    });
    await app.idle();
    await runGit(['rev-list', '--objects', '--quiet', 'refs/heads/main'], { gitDir });
    const page = await get(`${app.url}/alice.test/site/blob/main/next.txt`);
    assert.equal(page.status, 200, page.text);
    assert.match(page.text, /the real tree/);
    const clone = alice.dir();
    await alice.ok(clone, 'clone', '-q', `${app.url}/alice.test/site`, 'c');
    assert.equal((await alice.ok(`${clone}/c`, 'rev-parse', 'HEAD')).trim(), next);
  });

  it('an issue, labels and a comment full of control and bidi characters and HTML: pages show none raw', async () => {
    const aliceDid = (await session('alice.test')).did;
    const carolDid = (await session('carol.test')).did;
    const repoUri = `at://${aliceDid}/dev.knotless.repo/site`;
    const now = new Date().toISOString();
    const evil = 'Tee \u001b]8;;http://x\u0007c\u001b]8;;\u0007 \u202eevil\u2066 <b>x</b> \u0000z\u009b';
    const create = (handle: string, did: string, collection: string, record: Record<string, unknown>) =>
      call(handle, 'com.atproto.repo.createRecord', {
        repo: did,
        collection,
        record: { $type: collection, ...record },
      });
    const issue = await create('carol.test', carolDid, 'dev.knotless.issue', {
      repo: repoUri,
      title: evil,
      body: `${evil}\n\n\`\`\`js\n${evil}\n\`\`\`\n<script>alert(1)</script>`,
      createdAt: now,
    });
    await create('carol.test', carolDid, 'dev.knotless.comment', {
      subject: issue['uri'],
      body: evil,
      createdAt: now,
    });
    await create('alice.test', aliceDid, 'dev.knotless.issue.state', {
      issue: issue['uri'],
      state: 'open',
      labels: ['<b>l</b>', '\u001b[31mred', '\u202ertl'],
      createdAt: now,
    });
    const rkey = String(issue['uri']).split('/').pop()!;
    await waitFor('the issue, its comment and labels', async () => {
      const r = await xrpc<{ issue: { labels: string[] }; comments: unknown[] }>(
        app,
        'dev.knotless.getIssue',
        {
          uri: String(issue['uri']),
        },
      );
      return r.comments.length > 0 && r.issue.labels.length > 0 ? true : undefined;
    });
    for (const u of [
      '/alice.test/site/issues',
      `/alice.test/site/issues/${carolDid}/${rkey}`,
      '/alice.test/site',
    ]) {
      const r = await get(`${app.url}${u}`);
      assert.equal(r.status, 200, u);
      if (u !== '/alice.test/site') assert.match(r.text, /Tee /, u);
      assert.doesNotMatch(
        r.text,
        // eslint-disable-next-line no-control-regex -- exactly what must not be there
        /[\u0000-\u0008\u000b\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/,
        u,
      );
      assert.doesNotMatch(r.text, /<b>x|<b>l|<script>alert/, u);
    }
  });

  it('a commit only a round brought without its parents is no commit to the pages: 404, and a round on it says so, never 500', async () => {
    const aliceDid = (await session('alice.test')).did;
    const carolDid = (await session('carol.test')).did;
    const repoUri = `at://${aliceDid}/dev.knotless.repo/site`;
    const gitDir = app.mirror.gitDir(aliceDid, 'site');
    const main = (await runGit(['rev-parse', 'refs/heads/main'], { gitDir })).stdout.toString().trim();
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', 'knotless://alice.test/site', 'w');
    const w = `${dir}/w`;
    await commitFiles(alice, w, { 'q.txt': 'q\n' }, 'q');
    const p = await commitFiles(alice, w, { 'p.txt': 'p\n' }, 'p');
    const mk = async (title: string, head: string, base: string, pack: Uint8Array) => {
      const { blob } = await call(
        'carol.test',
        'com.atproto.repo.uploadBlob',
        pack,
        'application/x-git-packed-objects',
      );
      const made = await call('carol.test', 'com.atproto.repo.createRecord', {
        repo: carolDid,
        collection: 'dev.knotless.pull',
        record: {
          $type: 'dev.knotless.pull',
          repo: repoUri,
          base: 'main',
          head: { repo: repoUri, branch: 'main' },
          title,
          rounds: [{ head, base, pack: blob, createdAt: new Date().toISOString() }],
          createdAt: new Date().toISOString(),
        },
      });
      await waitFor('pr', async () => {
        const r = await xrpc<{ pulls: { uri: string }[] }>(app, 'dev.knotless.listPulls', { repo: repoUri });
        return r.pulls.some((x) => x.uri === made['uri']) ? true : undefined;
      });
      return String(made['uri']).split('/').pop()!;
    };
    const onlyP = (await runGit(['pack-objects', '--stdout', '-q'], { gitDir: `${w}/.git`, input: `${p}\n` }))
      .stdout;
    const x = await mk('X', p, main, onlyP);
    assert.equal((await get(`${app.url}/alice.test/site/pulls/${carolDid}/${x}`)).status, 200);
    await alice.ok(w, 'checkout', '-q', '-b', 'h', main);
    const h = await commitFiles(alice, w, { 'h.txt': 'h\n' }, 'h');
    const full = (
      await runGit(['pack-objects', '--revs', '--stdout', '-q'], {
        gitDir: `${w}/.git`,
        input: `${h}\n^${main}\n`,
      })
    ).stdout;
    const y = await mk('Y', h, p, full);
    const r = await get(`${app.url}/alice.test/site/pulls/${carolDid}/${y}`);
    assert.equal(r.status, 200, r.text);
    assert.match(r.text, /is not in this repository any more/);
    for (const u of [
      `/alice.test/site/commit/${p}`,
      `/alice.test/site/compare/main...${p}`,
      `/alice.test/site/tree/${p}`,
      `/alice.test/site/archive/${p}.zip`,
      `/alice.test/site/commits/${p}`,
      `/alice.test/site/raw/${p}/p.txt`,
    ]) {
      const rr = await get(`${app.url}${u}`);
      assert.equal(rr.status, 404, `${u}: ${rr.text.slice(0, 300)}`);
    }
  });
});
