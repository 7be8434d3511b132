import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';
import type { Run } from './cli.ts';
import { commitFiles, useGitUser, type GitUser } from './git.ts';
import { startProxy, type Proxy, type ProxyOptions } from 'knotless-devnet';
import { useNetwork, type TestNet } from './network.ts';

/** A working directory that never exists (see its use in the forge tests). */
export const NO_CLONE = path.join(os.tmpdir(), 'knotless-forge-no-clone-yet', String(process.pid));

/** A pull request or issue as the CLI's `--json` prints it (the fields the forge tests read). */
export interface ItemJson {
  id: string;
  uri: string;
  state: string;
  title: string;
  author: string;
  merged?: string;
  rounds?: { head: string; base: string }[] | number;
  comments?: { author: string; body: string; round?: number }[];
  diff?: { files: number; insertions: number; deletions: number };
}

/** A forge test file's network, its users (one per handle, in order) and the environment they add. */
export interface ForgeNet<H extends readonly string[]> {
  t: TestNet;
  users: { [K in keyof H]: GitUser };
  /** What every user's commands run with, on top of their login: also for hand-made environments. */
  env: () => Record<string, string>;
}

/**
 * Starts the network for a forge test file and logs a git user in to each account. Compaction is
 * off, so that no background `repo compact` rewrites ref records while a test reads them; when
 * `appview()` names one, the CLI finds pull requests and issues through it; `more` is added to every
 * command's environment.
 */
export function useForgeNet<const H extends readonly string[]>(
  handles: H,
  appview: () => string | undefined = () => undefined,
  more: Record<string, string> = {},
): ForgeNet<H> {
  // Two PDSes: the accounts alternate between them, so forks, pull requests and issues cross PDSes.
  const t = useNetwork([...handles], { pdses: 2 });
  const env = (): Record<string, string> => {
    const url = appview();
    return { KNOTLESS_COMPACT: '0', ...more, ...(url === undefined ? {} : { KNOTLESS_APPVIEW: url }) };
  };
  const users = handles.map((h) => useGitUser(t, h, env)) as { [K in keyof H]: GitUser };
  return { t, users, env };
}

/** Opens a pull request on `repo` from `head` as `user`; `more` adds options (--base, --body). */
export async function openPr(
  user: GitUser,
  repo: string,
  head: string,
  title: string,
  ...more: string[]
): Promise<ItemJson> {
  return json<ItemJson>(
    await user.knotless('pr', 'create', repo, '--head', head, '--title', title, ...more, '--json'),
  );
}

/**
 * Creates the repository `site` in `handle`'s account and pushes a first commit (README.md, and
 * a.txt with three lines for merges to clash on) from a new work tree whose `origin` it is;
 * returns that work tree.
 */
export async function newSite(user: GitUser, handle: string): Promise<string> {
  assert.equal((await user.knotless('repo', 'create', 'site')).code, 0);
  const dir = user.dir();
  await user.ok(dir, 'init', '-q');
  await commitFiles(user, dir, { 'README.md': 'hello\n', 'a.txt': 'one\ntwo\nthree\n' }, 'first');
  await user.ok(dir, 'remote', 'add', 'origin', `knotless://${handle}/site`);
  await user.ok(dir, 'push', '-q', 'origin', 'main');
  return dir;
}

/** The commit a branch of a knotless repository is at, or '' when it has none. */
export async function tipOf(user: GitUser, url: string, branch: string): Promise<string> {
  const out = await user.ok(user.dir(), 'ls-remote', url, `refs/heads/${branch}`);
  return out.split('\t')[0]!.trim();
}

/** The PDS an account of the test network was made on. */
export function pdsOf(t: TestNet, handle: string): string {
  const pds = t.pdsOf[handle];
  if (pds === undefined) throw new Error(`${handle} is not an account of this test network`);
  return pds;
}

/**
 * A counting proxy for KNOTLESS_SERVICE on a network whose accounts live on several PDSes: requests
 * go to `home`'s PDS (sessions, writes), reads naming another account to that account's PDS.
 */
export function proxyFor(t: TestNet, home: string, opts: Omit<ProxyOptions, 'target'> = {}): Promise<Proxy> {
  const routes = Object.fromEntries(Object.entries(t.dids).map(([h, did]) => [did, pdsOf(t, h)]));
  return startProxy({ target: pdsOf(t, home), routes, ...opts });
}

/** A session on the account's PDS, for writing straight to it. */
async function sessionOf(t: TestNet, handle: string): Promise<{ accessJwt: string; did: string }> {
  const res = await fetch(`${pdsOf(t, handle)}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: handle, password: t.password }),
  });
  return (await res.json()) as { accessJwt: string; did: string };
}

/** A proxy (see {@link proxyFor}) that runs a hook once, as it forwards the next putRecord. */
export interface PutHookProxy {
  proxy: Proxy;
  /** Runs `hook` before the next putRecord is forwarded (then no more). */
  beforeNextPut(hook: () => Promise<void>): void;
  /** What the last hook threw, if anything (the request it held then fails too). */
  failure(): unknown;
}

/**
 * A proxy for `home`'s requests whose hook runs, once, as the next putRecord goes through it: a
 * write of another machine's lands between a command's read and its write, every time.
 */
export async function putHookProxy(t: TestNet, home: string): Promise<PutHookProxy> {
  let next: (() => Promise<void>) | undefined;
  let failed: unknown;
  const proxy = await proxyFor(t, home, {
    onRequest: async ({ nsid }) => {
      if (nsid !== 'com.atproto.repo.putRecord') return;
      const hook = next;
      next = undefined;
      await hook?.().catch((err: unknown) => {
        failed = err;
        throw err;
      });
    },
  });
  return { proxy, beforeNextPut: (hook) => void (next = hook), failure: () => failed };
}

/**
 * Writes `records` of `collection` straight into `handle`'s account, 200 to an applyWrites (the
 * PDS's limit), as an account flooding others with records would.
 */
export async function writeManyRaw(
  t: TestNet,
  handle: string,
  collection: string,
  records: readonly Record<string, unknown>[],
): Promise<void> {
  const session = await sessionOf(t, handle);
  for (let i = 0; i < records.length; i += 200) {
    const res = await fetch(`${pdsOf(t, handle)}/xrpc/com.atproto.repo.applyWrites`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessJwt}` },
      body: JSON.stringify({
        repo: session.did,
        writes: records.slice(i, i + 200).map((value) => ({
          $type: 'com.atproto.repo.applyWrites#create',
          collection,
          value: { $type: collection, ...value },
        })),
      }),
    });
    assert.equal(res.status, 200, await res.text());
  }
}

/** Deletes a record straight from an account (an interrupted or hand-made state). */
export async function deleteRaw(t: TestNet, handle: string, collection: string, rkey: string): Promise<void> {
  const session = await sessionOf(t, handle);
  const res = await fetch(`${pdsOf(t, handle)}/xrpc/com.atproto.repo.deleteRecord`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessJwt}` },
    body: JSON.stringify({ repo: session.did, collection, rkey }),
  });
  assert.equal(res.status, 200, await res.text());
}

/** Puts a record under a key straight into an account (replacing what is there), as a PDS could. */
export async function putRaw(
  t: TestNet,
  handle: string,
  collection: string,
  rkey: string,
  record: Record<string, unknown>,
): Promise<void> {
  const session = await sessionOf(t, handle);
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.putRecord`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessJwt}` },
    body: JSON.stringify({ repo: session.did, collection, rkey, record }),
  });
  assert.equal(res.status, 200, await res.text());
}

/** Writes a record straight into an account, as a hostile or hand-written client could. */
export async function writeRaw(
  t: TestNet,
  handle: string,
  collection: string,
  record: Record<string, unknown>,
  rkey?: string,
): Promise<string> {
  const pds = pdsOf(t, handle);
  const session = await sessionOf(t, handle);
  const res = await fetch(`${pds}/xrpc/com.atproto.repo.createRecord`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessJwt}` },
    body: JSON.stringify({
      repo: session.did,
      collection,
      ...(rkey === undefined ? {} : { rkey }),
      record: { $type: collection, ...record },
    }),
  });
  const body = (await res.json()) as { uri: string };
  assert.equal(res.status, 200, JSON.stringify(body));
  return body.uri;
}

/** The JSON a `--json` command printed, after checking it succeeded. */
export function json<T = Record<string, unknown>>(res: Run): T {
  assert.equal(res.code, 0, res.stderr);
  return JSON.parse(res.stdout) as T;
}

/** Uploads bytes as a blob straight to an account, for a hand-made record to name. */
export async function uploadRaw(
  t: TestNet,
  handle: string,
  bytes: Uint8Array,
  mimeType = 'application/x-git-packed-objects',
): Promise<{ $type: 'blob'; ref: { $link: string }; mimeType: string; size: number }> {
  const session = await sessionOf(t, handle);
  const res = await fetch(`${pdsOf(t, handle)}/xrpc/com.atproto.repo.uploadBlob`, {
    method: 'POST',
    headers: { 'content-type': mimeType, authorization: `Bearer ${session.accessJwt}` },
    body: new Blob([new Uint8Array(bytes)]),
  });
  const body = (await res.json()) as {
    blob: { $type: 'blob'; ref: { $link: string }; mimeType: string; size: number };
  };
  assert.equal(res.status, 200, JSON.stringify(body));
  return body.blob;
}
