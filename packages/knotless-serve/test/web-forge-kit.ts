// What the web forge tests do besides clicking: sign in through the PDS's own consent page, read
// an account's records straight from its PDS (found through PLC, not assumed), and reach the
// appview's stored OAuth session as an operator with the database could; and move a branch with
// the CLI behind a page's back.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { Cookie, Page } from 'playwright-core';
import type { GitUser } from '../../knotless/test/helpers/git.ts';
import type { TestNet } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { WebSessions } from '../src/auth/web-sessions.ts';

/**
 * Signs `handle` in from the page's sign-in form: the appview sends the browser to the PDS, where
 * the account's password is given and access approved; back at the appview the header names the
 * reader. Returns the browser's cookies for the appview (the session cookie).
 */
export async function signIn(
  page: Page,
  appUrl: string,
  handle: string,
  password: string,
): Promise<Cookie[]> {
  await page.goto(`${appUrl}/-/signin`);
  await page.getByLabel('Handle').fill(handle);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('input[name="password"]').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Authorize' }).click();
  await page.getByText(`Signed in as ${handle}`).waitFor();
  return (await page.context().cookies(appUrl)).filter((c) => c.name === 'knotless_session');
}

/** The PDS an account lives on, from its DID document at PLC. */
export async function pdsOf(t: TestNet, handle: string): Promise<string> {
  const doc = (await (await fetch(`${t.net.plcUrl}/${t.dids[handle]!}`)).json()) as {
    service: { id: string; serviceEndpoint: string }[];
  };
  return doc.service.find((s) => s.id === '#atproto_pds')!.serviceEndpoint.replace(/\/+$/, '');
}

/** Every record of `collection` in `handle`'s own account, read from its PDS. */
export async function listOwn(
  t: TestNet,
  handle: string,
  collection: string,
): Promise<{ uri: string; value: Record<string, unknown> }[]> {
  const q = new URLSearchParams({ repo: t.dids[handle]!, collection, limit: '100' });
  const res = await fetch(`${await pdsOf(t, handle)}/xrpc/com.atproto.repo.listRecords?${q}`);
  assert.equal(res.status, 200);
  return ((await res.json()) as { records: { uri: string; value: Record<string, unknown> }[] }).records;
}

/**
 * An account's OAuth session row as the index holds it (sealed), with a way to put it back and
 * start a browser session on it: what an operator who copied the database could attempt.
 */
export async function sealedSessionOf(
  app: Appview,
  did: string,
): Promise<{ restore(): Promise<{ value: string }> } | undefined> {
  const row = await app.index.db
    .selectFrom('oauth_sessions')
    .selectAll()
    .where('did', '=', did)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    async restore() {
      await app.index.db.insertInto('oauth_sessions').values(row).execute();
      return { value: await new WebSessions(app.index.db).create(did, 'bob.test') };
    },
  };
}

/** `<owner>/<repo>`'s main as `git ls-remote` reads it from the account. */
export async function mainOf(user: GitUser, repo: string): Promise<string> {
  return (await user.ok(user.dir(), 'ls-remote', `knotless://${repo}`, 'refs/heads/main')).split('\t')[0]!;
}

/**
 * Someone else moves main of `repo` (`owner/name`, one of `user`'s): the CLI commits a new file,
 * so that a page rendered before no longer shows the tip. Returns the new tip.
 */
export async function commitBehindThePage(user: GitUser, repo: string): Promise<string> {
  const note = path.join(user.dir(), 'note.txt');
  fs.writeFileSync(note, 'from the CLI\n');
  const cli = await user.knotless('repo', 'commit', repo, '-m', 'meanwhile', '--add', `note.txt=${note}`);
  assert.equal(cli.code, 0, cli.stderr);
  return mainOf(user, repo);
}
