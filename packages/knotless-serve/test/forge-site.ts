// The forge the forge tests read, every record written straight to the PDS as its author
// (com.atproto.repo.createRecord / putRecord), independent of the CLI that normally writes them:
// alice's repository "site"; bob's fork of it (a repo record with forkOf) with a branch "feature";
// bob's pull request with two rounds, each a pack blob in bob's PDS; review comments; status
// records forged by bob (merged, of his own PR) and carol (closed), both to be ignored; issues by
// bob and carol with state records, one of them forged by carol.
import assert from 'node:assert/strict';
import path from 'node:path';
import { runGit } from 'knotless-core';
import { commitFiles, newRepo, useGitUser, type GitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork, type TestNet } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, waitFor, xrpc } from './helpers.ts';

/** One account's PDS session, for writing records as that account. */
export interface Writer {
  did: string;
  create(collection: string, record: Record<string, unknown>): Promise<{ uri: string; rkey: string }>;
  put(collection: string, rkey: string, record: Record<string, unknown>): Promise<void>;
  get(collection: string, rkey: string): Promise<Record<string, unknown>>;
  remove(collection: string, rkey: string): Promise<void>;
  upload(bytes: Uint8Array): Promise<Record<string, unknown>>;
}

export interface Forge {
  t: TestNet;
  alice: GitUser;
  bob: GitUser;
  app: Appview;
  w: Record<'alice' | 'bob' | 'carol', Writer>;
  dids: Record<'alice' | 'bob' | 'carol', string>;
  /** alice's main; bob's two round heads. */
  base: string;
  heads: [string, string];
  pull: { uri: string; rkey: string };
  issues: { bobs: { uri: string; rkey: string }; carols: { uri: string; rkey: string } };
  comments: { uri: string; rkey: string }[];
  repoUri: string;
  /** bob's clone of alice's repository, on his branch, with his fork as the remote "fork". */
  clone: string;
  setUp(): Promise<void>;
}

/** A moment `n` seconds after a fixed start, so the records' order is the test's, not the clock's. */
export function at(n: number): string {
  return new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString();
}

async function writer(t: TestNet, handle: string): Promise<Writer> {
  const pds = t.pdsOf[handle]!;
  const login = await fetch(`${pds}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: handle, password: t.password }),
  });
  assert.equal(login.status, 200, await login.clone().text());
  const { accessJwt, did } = (await login.json()) as { accessJwt: string; did: string };
  const call = async (nsid: string, body: unknown, type = 'application/json'): Promise<unknown> => {
    const res = await fetch(`${pds}/xrpc/${nsid}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${accessJwt}`, 'content-type': type },
      body: body instanceof Uint8Array ? new Blob([new Uint8Array(body)]) : JSON.stringify(body),
    });
    const text = await res.text();
    assert.equal(res.status, 200, `${nsid}: ${text}`);
    return text === '' ? {} : JSON.parse(text);
  };
  return {
    did,
    async create(collection, record) {
      const r = (await call('com.atproto.repo.createRecord', {
        repo: did,
        collection,
        record: { $type: collection, ...record },
      })) as { uri: string };
      return { uri: r.uri, rkey: r.uri.split('/').pop()! };
    },
    async put(collection, rkey, record) {
      await call('com.atproto.repo.putRecord', {
        repo: did,
        collection,
        rkey,
        record: { $type: collection, ...record },
      });
    },
    async get(collection, rkey) {
      const q = new URLSearchParams({ repo: did, collection, rkey });
      const res = await fetch(`${pds}/xrpc/com.atproto.repo.getRecord?${q.toString()}`);
      return ((await res.json()) as { value: Record<string, unknown> }).value;
    },
    async remove(collection, rkey) {
      await call('com.atproto.repo.deleteRecord', { repo: did, collection, rkey });
    },
    async upload(bytes) {
      return (
        (await call('com.atproto.repo.uploadBlob', bytes, 'application/x-git-packed-objects')) as {
          blob: Record<string, unknown>;
        }
      ).blob;
    },
  };
}

/** A non-thin pack of what `head` has and `base` lacks, made by git in the work tree `cwd`. */
async function packOf(cwd: string, head: string, base: string): Promise<Uint8Array> {
  const out = await runGit(['pack-objects', '--revs', '--stdout', '-q'], {
    gitDir: path.join(cwd, '.git'),
    input: `${head}\n^${base}\n`,
  });
  return out.stdout;
}

export function useForge(): Forge {
  // Two PDSes: alice and carol on the first, bob on the second, so the forge's flows cross PDSes.
  const t = useNetwork(['alice.test', 'bob.test', 'carol.test'], { pdses: 2 });
  const f = { t, alice: useGitUser(t, 'alice.test'), bob: useGitUser(t, 'bob.test') } as Forge;
  f.setUp = () => setUp(f);
  return f;
}

async function setUp(f: Forge): Promise<void> {
  const { t, alice, bob } = f;
  f.app = await appviewOn(t, ':memory:');
  f.w = {
    alice: await writer(t, 'alice.test'),
    bob: await writer(t, 'bob.test'),
    carol: await writer(t, 'carol.test'),
  };
  f.dids = { alice: f.w.alice.did, bob: f.w.bob.did, carol: f.w.carol.did };
  f.repoUri = `at://${f.dids.alice}/dev.knotless.repo/site`;

  assert.equal((await alice.knotless('repo', 'create', 'site', '--description', 'a site')).code, 0);
  const work = await newRepo(alice, 'knotless://alice.test/site');
  f.base = await commitFiles(alice, work, { 'README.md': '# Site\n', 'a.txt': 'one\ntwo\nthree\n' }, 'start');
  await alice.ok(work, 'push', '-q', 'origin', 'main');

  // bob's fork: his own repository with forkOf, holding alice's main and his branch.
  assert.equal((await bob.knotless('repo', 'create', 'site')).code, 0);
  const fork = await f.w.bob.get('dev.knotless.repo', 'site');
  await f.w.bob.put('dev.knotless.repo', 'site', { ...fork, forkOf: f.repoUri });
  const clone = bob.dir();
  f.clone = clone;
  await bob.ok(clone, 'clone', '-q', 'knotless://alice.test/site', '.');
  await bob.ok(clone, 'remote', 'add', 'fork', 'knotless://bob.test/site');
  // main first, so that the fork's HEAD names it, as a fork's would.
  await bob.ok(clone, 'push', '-q', 'fork', 'main');
  await bob.ok(clone, 'checkout', '-q', '-b', 'feature');
  const h0 = await commitFiles(
    bob,
    clone,
    { 'a.txt': 'one\nTWO\nthree\n', 'b.txt': 'bee\n' },
    'feature: shout two',
  );
  await bob.ok(clone, 'push', '-q', 'fork', 'feature');
  const round = async (head: string, n: number) => ({
    head,
    base: f.base,
    pack: await f.w.bob.upload(await packOf(clone, head, f.base)),
    createdAt: at(n),
  });
  const r0 = await round(h0, 10);
  const pull = {
    repo: f.repoUri,
    base: 'main',
    head: { repo: `at://${f.dids.bob}/dev.knotless.repo/site`, branch: 'feature' },
    title: 'Shout <two> & add b',
    body: 'Makes **two** louder.\n\n<script>alert(1)</script>',
    createdAt: at(10),
  };
  f.pull = await f.w.bob.create('dev.knotless.pull', { ...pull, rounds: [r0] });
  const h1 = await commitFiles(bob, clone, { 'b.txt': 'bee\nsee\n', 'c.txt': 'sea\n' }, 'feature: round two');
  await bob.ok(clone, 'push', '-q', 'fork', 'feature');
  f.heads = [h0, h1];
  await f.w.bob.put('dev.knotless.pull', f.pull.rkey, { ...pull, rounds: [r0, await round(h1, 20)] });

  f.comments = [
    await f.w.alice.create('dev.knotless.comment', {
      subject: f.pull.uri,
      round: 0,
      body: 'Why is b.txt **needed**? <img src=x onerror=alert(1)>',
      createdAt: at(15),
    }),
    await f.w.bob.create('dev.knotless.comment', {
      subject: f.pull.uri,
      round: 1,
      body: 'Round 1 adds c.',
      createdAt: at(21),
    }),
  ];
  // Forged: bob may not say merged, carol may say nothing. Both newer than anything else.
  await f.w.bob.create('dev.knotless.pull.status', {
    pull: f.pull.uri,
    status: 'merged',
    merged: h1,
    createdAt: at(30),
  });
  await f.w.carol.create('dev.knotless.pull.status', {
    pull: f.pull.uri,
    status: 'closed',
    createdAt: at(31),
  });

  const bobs = await f.w.bob.create('dev.knotless.issue', {
    repo: f.repoUri,
    title: 'Crash on start',
    body: 'It <b>crashes</b>.',
    createdAt: at(40),
  });
  const carols = await f.w.carol.create('dev.knotless.issue', {
    repo: f.repoUri,
    title: 'Docs typo',
    createdAt: at(41),
  });
  f.issues = { bobs, carols };
  await f.w.carol.create('dev.knotless.comment', {
    subject: bobs.uri,
    body: 'Same here.',
    createdAt: at(42),
  });
  // alice closes bob's issue; carol's forged reopen of it comes later and must not count, nor does
  // bob's own reopen dated years after. carol closes her own issue, then reopens it herself.
  await f.w.alice.create('dev.knotless.issue.state', { issue: bobs.uri, state: 'closed', createdAt: at(50) });
  await f.w.carol.create('dev.knotless.issue.state', { issue: bobs.uri, state: 'open', createdAt: at(51) });
  await f.w.bob.create('dev.knotless.issue.state', {
    issue: bobs.uri,
    state: 'open',
    createdAt: '2099-01-01T00:00:00.000Z',
  });
  await f.w.carol.create('dev.knotless.issue.state', {
    issue: carols.uri,
    state: 'closed',
    createdAt: at(52),
  });
  await f.w.carol.create('dev.knotless.issue.state', { issue: carols.uri, state: 'open', createdAt: at(53) });

  await waitFor('the forge records indexed', async () => {
    const issues = await xrpc<{ issues: { state: string }[] }>(f.app, 'dev.knotless.listIssues', {
      repo: f.repoUri,
      state: 'all',
    });
    const pull = await xrpc<{ pull: { rounds: unknown[] }; comments: unknown[] }>(
      f.app,
      'dev.knotless.getPull',
      { uri: f.pull.uri },
    );
    const open = await xrpc<{ issues: unknown[] }>(f.app, 'dev.knotless.listIssues', { repo: f.repoUri });
    return issues.issues.length === 2 &&
      open.issues.length === 1 &&
      pull.pull.rounds.length === 2 &&
      pull.comments.length === 2
      ? true
      : undefined;
  });
  await f.app.idle();
}
