// Editing a file of one's own repository in the browser and committing it to a branch: the page
// with the file in a text area, and the post that runs the core's `repo commit` operation
// (commitToBranch) as the signed-in owner, with the commit authored and committed by them.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type http from 'node:http';
import { KnotlessError } from 'knotless-core/errors';
import { isValidBranch } from 'knotless-core/forge/records';
import { treePathRefusal, treePathSentence } from 'knotless-core/git/tree-path';
import { commitRefusal, commitToBranch, type Committed } from 'knotless-core/ops/commit';
import { decidesFor } from '../pages/forge-forms.ts';
import { safeText } from 'knotless-core/text/terminal';
import type { Viewer } from '../../auth/web-sessions.ts';
import { readBlob } from '../../mirror/read.ts';
import { mirrorRefs } from '../../mirror/ref-cache.ts';
import { csrfField } from '../forms.ts';
import { HTML_HEADERS, html, page, pathHref, withoutUnsafe, type SafeHtml } from '../html.ts';
import { crumbs, refPath, repoHeader, short } from '../pages/common.ts';
import { HttpError, type RepoTarget, type Site } from '../site.ts';
import { viewer } from '../viewer.ts';
import { signInLapsed } from './sign-in-lapsed.ts';
import { field, identityOf, remoteRepo, seeOther, statusOf, writerFor, type Form } from './forge-env.ts';

/** Largest file edited in the browser: the one limit both the page and the post hold to. */
const MAX_EDIT = 512 * 1024;

/**
 * The largest edit form posted, derived from {@link MAX_EDIT} so that every file the page opens can
 * be saved: a form is URL-encoded, where a byte takes up to 3 (`%E2`), and a line end 6 (the
 * browser sends the text area's LF as CRLF, `%0D%0A`); 64 KiB more for the path, the message and
 * the other fields.
 */
export const EDIT_FORM_BYTES = 6 * MAX_EDIT + 64 * 1024;

/** What the edit form holds: the file's place and the reader's text. */
interface EditFields {
  path: string;
  branch: string;
  base: string;
  /** The text as the text area holds it: lines end in LF. */
  content: string;
  /** The file's line ends, which the post puts back (a text area holds LF, a browser posts CRLF). */
  eol: LineEnds;
  message: string;
}

type LineEnds = 'lf' | 'crlf';

/** The edit form, filled with `f`, under `refusal` when the last post was refused. */
function editForm(repo: RepoTarget, f: EditFields, refusal?: string): SafeHtml {
  const name = f.path.split('/').pop() ?? f.path;
  // HTML drops a line break right after <textarea>: one goes first, so a file's own first is kept.
  const text = `\n${f.content}`;
  return html`${repoHeader(repo, f.branch)}${crumbs(repo, f.branch, f.path)}
    ${refusal === undefined ? '' : html`<p class="error" role="alert">${refusal}</p>`}
    <form class="stack" method="post" action="${pathHref([repo.owner, repo.name], 'edit')}">
      ${csrfField()}
      <input type="hidden" name="path" value="${f.path}" />
      <input type="hidden" name="branch" value="${f.branch}" />
      <input type="hidden" name="base" value="${f.base}" />
      <input type="hidden" name="eol" value="${f.eol}" />
      <label for="edit-content">${name}</label>
      <textarea id="edit-content" name="content" rows="24" class="mono">${text}</textarea>
      <label for="edit-message">Commit message</label>
      <input id="edit-message" name="message" required value="${f.message}" />
      <p><button type="submit">Commit to ${f.branch}</button></p>
    </form>`;
}

/**
 * Why the browser cannot edit `content` so that saving it writes the same bytes back, or undefined
 * when it can: a page holds text, so a file that is not UTF-8 or holds what the page shows as
 * U+FFFD would be saved changed.
 */
function notEditable(content: Buffer | undefined): string | undefined {
  if (content === undefined) return 'it is larger than 512 KiB';
  const text = content.toString('utf8');
  if (content.subarray(0, 8000).includes(0) || !Buffer.from(text, 'utf8').equals(content))
    return 'it is not UTF-8 text';
  if (withoutUnsafe(text) !== text) return 'it holds control or bidi characters a page cannot carry';
  if (lineEnds(text) === undefined)
    return 'its lines end in a mix of LF, CRLF and CR, which a text area makes one';
  return undefined;
}

/** The line ends of `text` when all are one kind (a text area holds only LF); undefined for a mix. */
function lineEnds(text: string): LineEnds | undefined {
  if (!text.includes('\r')) return 'lf';
  return /\r(?!\n)|(?<!\r)\n/.test(text) ? undefined : 'crlf';
}

/**
 * The owner and the maintainers the index lists edit; the core's commit reads the owner's table
 * again before it writes, and refuses in the same words anyone it does not list.
 */
function teamOnly(repo: RepoTarget, v: Viewer | undefined): Viewer {
  if (v === undefined) throw new HttpError(401, 'Sign in to edit files.');
  if (!decidesFor(repo, v.did))
    throw new HttpError(
      403,
      commitRefusal(repo.owner, `${repo.owner}/${repo.name}`, v.handle, repo.maintainers.length > 0),
    );
  return v;
}

/** `/<owner>/<repo>/edit/<branch>/<path>`: the file in a form, for its owner and maintainers. */
export async function editPage(_site: Site, repo: RepoTarget, tail: string): Promise<string> {
  teamOnly(repo, viewer());
  const at = await refPath(repo, tail);
  if (!isValidBranch(at.ref)) throw new HttpError(404, `${at.ref} is not a branch.`);
  const blob = await readBlob(repo.gitDir, at.oid, at.path, MAX_EDIT);
  // Opened only when it can be saved as it is: the same checks as the post's.
  const why = treePathRefusal(at.path) ?? notEditable(blob.content);
  if (why !== undefined)
    throw new HttpError(
      400,
      `${safeText(at.path)} cannot be edited here: ${why}; change it with git and push.`,
    );
  const name = at.path.split('/').pop() ?? at.path;
  const text = blob.content!.toString('utf8');
  const fields = {
    path: at.path,
    branch: at.ref,
    base: at.oid,
    content: text.replace(/\r\n/g, '\n'),
    eol: lineEnds(text)!,
    message: `Update ${name}`,
  };
  return page(`Edit ${at.path} on ${at.ref}`, editForm(repo, fields));
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
  teamOnly(repo, v);
  const branch = field(form, 'branch', 'the branch');
  // Taken as sent, not trimmed: "a " and "a" are different files.
  const file = form.get('path') ?? '';
  const base = field(form, 'base', 'the commit edited');
  const message = field(form, 'message', 'a commit message');
  if (!isValidBranch(branch)) throw new HttpError(400, 'That is not a branch name.');
  // Browsers send text areas with CRLF line ends: the file gets back the ones it had.
  const text = (form.get('content') ?? '').replace(/\r\n/g, '\n');
  const eol: LineEnds = form.get('eol') === 'crlf' ? 'crlf' : 'lf';
  const content = eol === 'crlf' ? text.replace(/\n/g, '\r\n') : text;
  // A refusal shows the form again with the reader's text, so no typing is lost.
  const refuse = (status: number, sentence: string): HttpError =>
    new HttpError(
      status,
      sentence,
      editForm(repo, { path: file, branch, base, content: text, eol, message }, sentence),
    );
  const badPath = treePathSentence(file);
  if (badPath !== undefined) throw refuse(400, badPath);
  if (Buffer.byteLength(content) > MAX_EDIT)
    throw refuse(413, 'Files up to 512 KiB are edited here; nothing was committed.');
  const remote = remoteRepo(site, await identityOf(site, repo.did), repo.name);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-edit-'));
  let made: Committed;
  try {
    const local = path.join(dir, 'content');
    fs.writeFileSync(local, content);
    const cacheDir = site.forge.config.cacheDir;
    made = await commitToBranch(
      remote,
      // The mirror's blob cache: the blobs uploaded are there when the mirror takes the commit.
      {
        auth: await writerFor(site, v),
        cache: site.mirror.cache,
        cacheDir,
        // A maintainer's commit goes into their own ref table of the repository.
        pusher: { did: v.did, handle: v.handle },
      },
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
    if (err instanceof KnotlessError && err.code === 'usage') throw refuse(400, err.message);
    if (err instanceof KnotlessError && err.code === 'session-expired')
      throw signInLapsed(site, res, form, 'edit', err.message);
    if (err instanceof KnotlessError) throw new HttpError(statusOf(err), err.message);
    throw err;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const commits = pathHref([repo.owner, repo.name, 'commits'], branch);
  if (await shown(site, repo, v, made)) return void seeOther(res, commits);
  // Committed, but this appview's copy does not have it: the reader is told so rather than shown a
  // history without their commit. Past the mirror's size limit it never will, and the page says
  // where the commit can be seen instead of promising it here.
  const status = (await site.mirror.tooLarge(repo.did, repo.name))
    ? html`<p role="status">
        Committed <span class="mono">${short(made.commit)}</span> to ${branch} in ${repo.owner}'s account.
        This appview does not mirror repositories this large, so its pages will not show it; clone it to see
        it:
        <code>git clone knotless://${repo.owner}/${repo.name}</code>
      </p>`
    : html`<p role="status">
        Committed <span class="mono">${short(made.commit)}</span> to ${branch}. This appview's copy does not
        have it yet; <a href="${commits}">its commits</a> show it once it does.
      </p>`;
  res
    .writeHead(200, { ...HTML_HEADERS, 'cache-control': 'private, no-store' })
    .end(page(`Committed to ${branch}`, html`${repoHeader(repo, branch)} ${status}`));
}

/** The longest the page after a commit waits for this appview's copy to have the commit. */
const SHOWN_WAIT_MS = 10_000;

/**
 * Hands the commit just made to this appview's index and mirror (`Mirror.wrote`: the same rule as
 * its event on the stream, from the blobs this write left in the mirror's cache), so that the page
 * after it shows it without waiting for the stream. Bounded: false when the mirror has not taken it
 * within {@link SHOWN_WAIT_MS} (a failed or slow sync), and the page then says so.
 */
async function shown(site: Site, repo: RepoTarget, v: Viewer, made: Committed): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((r) => (timer = setTimeout(r, SHOWN_WAIT_MS)));
  const taken = site.mirror.wrote(repo.did, made.written, v.did).catch((err: unknown) =>
    // The commit is made; only this appview's copy lags, and its event syncs the mirror again.
    site.log.warn(
      `mirror ${repo.did}/${repo.name}: taking its own commit: ${err instanceof Error ? err.message : String(err)}`,
    ),
  );
  await Promise.race([taken, bound]).finally(() => clearTimeout(timer));
  return (await mirrorRefs(repo.gitDir)).byName.get(made.ref) === made.commit;
}
