import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { commitFiles, newRepo, type GitUser } from '../../knotless/test/helpers/git.ts';
import type { TestNet } from '../../knotless/test/helpers/network.ts';
import { waitUntil } from '../../knotless/test/helpers/wait.ts';
import { startAppview, type Appview } from '../src/appview.ts';
import { defaultConfig, type ServeConfig } from '../src/config.ts';

/** An appview on the test network, following its PDS's event stream in dev mode. */
export async function appviewOn(
  t: TestNet,
  database: string,
  dataDir?: string,
  extra: Partial<ServeConfig> = {},
  /** Told each line the appview logs, besides the test log. */
  log: (line: string) => void = () => {},
): Promise<Appview> {
  const dir = dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-serve-'));
  return startAppview(
    {
      ...defaultConfig(dir),
      database,
      port: 0,
      plcUrl: t.net.plcUrl,
      firehoses: t.net.pdses.map((p) => p.url.replace(/^http/, 'ws')),
      dev: true,
      // A page's 30 s limit is a clock, which a loaded machine passes with nothing wrong (a web edit of
      // a 3 MiB form took 78 s in one CI run). Tests of the limit itself set their own (limits.test.ts).
      requestTimeoutMs: 10 * 60_000,
      ...extra,
    },
    (line) => {
      log(line);
      if (process.env['KNOTLESS_SERVE_TEST_LOG']) process.stderr.write(`appview: ${line}\n`);
    },
  );
}

/** Polls `check` until it returns a value other than undefined (see waitUntil: no clock of its own). */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
  return waitUntil(what, check);
}

/** GETs a URL and returns status and text. */
export async function get(url: string): Promise<{ status: number; text: string }> {
  const res = await fetch(url);
  return { status: res.status, text: await res.text() };
}

/** GETs an XRPC query's JSON, failing on an error status. */
export async function xrpc<T>(app: Appview, nsid: string, params: Record<string, string>): Promise<T> {
  const res = await fetch(`${app.url}/xrpc/${nsid}?${new URLSearchParams(params).toString()}`);
  const body = (await res.json()) as T;
  if (!res.ok) throw new Error(`${nsid}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

/**
 * Where every team test starts: `owner`'s repository `name` created, its first commit (`a.txt`)
 * pushed to main, `before` done in the working copy (pushes of the owner's own that come before the
 * team), `maintainer` added, and `app`'s page of the repository naming a maintainer. Answers the
 * repository's URL, the working copy and the first commit.
 */
export async function maintainedRepo(
  app: Appview,
  owner: { user: GitUser; handle: string },
  name: string,
  maintainer: string,
  before: (work: string) => Promise<void> = async () => {},
): Promise<{ url: string; work: string; first: string }> {
  const { user, handle } = owner;
  const created = await user.knotless('repo', 'create', name);
  assert.equal(created.code, 0, created.stderr);
  const url = `knotless://${handle}/${name}`;
  const work = await newRepo(user, url);
  const first = await commitFiles(user, work, { 'a.txt': 'first\n' }, 'first');
  await user.ok(work, 'push', '-q', 'origin', 'main');
  await before(work);
  const added = await user.knotless('repo', 'maintainer', 'add', name, maintainer);
  assert.equal(added.code, 0, added.stderr);
  await waitFor(`${name} indexed with its maintainer`, async () => {
    const page = await get(`${app.url}/${handle}/${name}`);
    return page.text.includes('class="muted maintainers"') ? true : undefined;
  });
  return { url, work, first };
}
