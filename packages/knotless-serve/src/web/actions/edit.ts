// Editing a file of one's own repository in the browser and committing it to a branch: the page
// with the file in a text area, and the post that runs the core's `repo commit` operation
// (commitToBranch) as the signed-in owner, with the commit authored and committed by them.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type http from 'node:http';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { KnotlessError } from 'knotless-core/errors';
import { isValidBranch } from 'knotless-core/forge/records';
import { commitToBranch } from 'knotless-core/ops/commit';
import type { Viewer } from '../../auth/web-sessions.ts';
import { readBlob } from '../../mirror/read.ts';
import { csrfField } from '../forms.ts';
import { html, page, pathHref } from '../html.ts';
import { crumbs, refPath, repoHeader } from '../pages/common.ts';
import { HttpError, type RepoTarget, type Site } from '../site.ts';
import { viewer } from '../viewer.ts';
import { field, identityOf, remoteRepo, seeOther, statusOf, writerFor, type Form } from './forge-env.ts';

/** Largest file edited in the browser. */
const MAX_EDIT = 512 * 1024;

function ownerOnly(repo: RepoTarget, v: Viewer | undefined): Viewer {
  if (v === undefined) throw new HttpError(401, 'Sign in to edit files.');
  if (v.did !== repo.did)
    throw new HttpError(
      403,
      `Only ${repo.owner} can commit to ${repo.owner}/${repo.name}; you are ${v.handle}.`,
    );
  return v;
}

/** `/<owner>/<repo>/edit/<branch>/<path>`: the file in a form, for its owner. */
export async function editPage(_site: Site, repo: RepoTarget, tail: string): Promise<string> {
  ownerOnly(repo, viewer());
  const at = await refPath(repo, tail);
  if (!isValidBranch(at.ref)) throw new HttpError(404, `${at.ref} is not a branch.`);
  const blob = await readBlob(repo.gitDir, at.oid, at.path, MAX_EDIT);
  if (blob.content === undefined || blob.content.subarray(0, 8000).includes(0))
    throw new HttpError(400, 'Only text files up to 512 KiB are edited here; commit it with git.');
  const name = at.path.split('/').pop() ?? at.path;
  return page(
    `Edit ${at.path} on ${at.ref}`,
    html`${repoHeader(repo, at.ref)}${crumbs(repo, at.ref, at.path)}
      <form class="stack" method="post" action="${pathHref([repo.owner, repo.name], 'edit')}">
        ${csrfField()}
        <input type="hidden" name="path" value="${at.path}" />
        <input type="hidden" name="branch" value="${at.ref}" />
        <input type="hidden" name="base" value="${at.oid}" />
        <label for="edit-content">${name}</label>
        <textarea id="edit-content" name="content" rows="24" class="mono">
${blob.content.toString('utf8')}</textarea>
        <label for="edit-message">Commit message</label>
        <input id="edit-message" name="message" required value="Update ${name}" />
        <p><button type="submit">Commit to ${at.ref}</button></p>
      </form>`,
  );
}

/**
 * POST `/<owner>/<repo>/edit`: commits the form's content at its path to its branch. The branch
 * must still be where the page showed it (409 otherwise: someone pushed meanwhile).
 */
export async function editFile(
  site: Site,
  v: Viewer,
  repo: RepoTarget,
  form: Form,
  res: http.ServerResponse,
): Promise<void> {
  ownerOnly(repo, v);
  const branch = field(form, 'branch', 'the branch');
  const file = field(form, 'path', 'the file');
  const base = field(form, 'base', 'the commit edited');
  const message = field(form, 'message', 'a commit message');
  if (!isValidBranch(branch)) throw new HttpError(400, 'That is not a branch name.');
  // Browsers send text areas with CRLF line ends: the file gets the LF it had.
  const content = (form.get('content') ?? '').replace(/\r\n/g, '\n');
  if (Buffer.byteLength(content) > MAX_EDIT) throw new HttpError(413, 'Files up to 512 KiB are edited here.');
  const remote = remoteRepo(site, await identityOf(site, repo.did), repo.name);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-edit-'));
  try {
    const local = path.join(dir, 'content');
    fs.writeFileSync(local, content);
    const cacheDir = site.forge.config.cacheDir;
    await commitToBranch(
      remote,
      { auth: await writerFor(site, v), cache: new BlobCache(cacheDir), cacheDir },
      {
        branch,
        message,
        changes: [{ kind: 'add', path: file, file: local }],
        // The signed-in account is author and committer: its handle, and its DID for the address.
        author: `${v.handle} <${v.did}>`,
        authorCommits: true,
        // Checked at the compare-and-swap itself: a push landing meanwhile is never overwritten.
        expect: base,
      },
    );
  } catch (err) {
    if (err instanceof KnotlessError && err.code === 'remote-changed')
      throw new HttpError(
        409,
        `${branch} moved since this file was opened (someone pushed); open it again and redo the edit.`,
      );
    if (err instanceof KnotlessError) throw new HttpError(statusOf(err), err.message);
    throw err;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  seeOther(res, pathHref([repo.owner, repo.name, 'commits'], branch));
}
