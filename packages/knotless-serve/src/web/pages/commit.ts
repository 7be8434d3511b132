import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { roundEnds } from 'knotless-core/forge/packs';
import { indexedVerdict } from '../checks.ts';
import { checksList } from './checks-view.ts';
import { mirrorRefs } from '../../mirror/ref-cache.ts';
import { diffStat, patchOf, type FileStat } from '../../mirror/diff.ts';
import { commitInfo, log, mergeBase, resolveCommit } from '../../mirror/read.ts';
import { FILES_PER_PAGE, diffStatView, pager, patchView, type LineNotes } from '../diff-view.ts';
import { html, href, page, when, type SafeHtml } from '../html.ts';
import { HttpError, type Site, type RepoTarget } from '../site.ts';
import { commitLink, repoHeader, requireMirror, short } from './common.ts';
import { commitList } from './commits.ts';
import { pullInto } from './forge-forms.ts';
import { newPullBox } from './pulls.ts';

/** The diffstat and one page of a diff's files; `link` makes the address of a page. */
export async function pagedDiff(
  repo: RepoTarget,
  from: string | undefined,
  to: string,
  pageNo: number,
  link: (p: number) => string,
  notes?: LineNotes,
): Promise<SafeHtml> {
  const files = await diffStat(repo.gitDir, from, to);
  const pages = Math.max(1, Math.ceil(files.length / FILES_PER_PAGE));
  const p = Math.min(Math.max(1, Number.isInteger(pageNo) ? pageNo : 1), pages);
  const first = (p - 1) * FILES_PER_PAGE;
  const shown: FileStat[] = files.slice(first, first + FILES_PER_PAGE);
  const patch = await patchOf(repo.gitDir, from, to, shown);
  const fileLink = (i: number) => {
    const fp = Math.floor(i / FILES_PER_PAGE) + 1;
    return `${fp === p ? '' : link(fp)}#f${i}`;
  };
  return html`${diffStatView(files, fileLink)} ${pager(p, pages, link)}
  ${patchView(patch.text, shown, first, patch.cut, notes)} ${pager(p, pages, link)}`;
}

/** One commit: message, author, parents, short and full id, browse link, diffstat and paged diff. */
export async function commitPage(
  site: Site,
  repo: RepoTarget,
  tail: string,
  pageNo: number,
): Promise<string> {
  requireMirror(repo);
  const oid = /^[0-9a-f]{4,40}$/.test(tail) ? await resolveCommit(repo.gitDir, tail) : undefined;
  if (oid === undefined) throw new HttpError(404, `No commit ${tail} in this repository.`);
  const c = await commitInfo(repo.gitDir, oid);
  const self = href(repo.owner, repo.name, 'commit', oid);
  const diff = await pagedDiff(repo, c.parents[0], oid, pageNo, (p) => `${self}?page=${p}`);
  return page(
    `${c.subject} · ${short(oid)}`,
    html`${repoHeader(repo, undefined, 'commits')}
      <div class="box">
        <div class="head bar">
          <strong>${c.subject}</strong><span class="grow"></span>
          <a class="btn" href="${href(repo.owner, repo.name, 'tree', oid)}">Browse files</a>
        </div>
        <div class="pad">
          ${c.body === '' ? '' : html`<pre>${c.body}</pre>`}
          <p class="muted">${c.author} &lt;${c.email}&gt; · ${when(c.date)}</p>
          <p class="bar">
            <span>commit <span class="mono">${short(oid)}</span></span>
            <button type="button" data-copy="${oid}" title="Copy the full id ${oid}">Copy full id</button>
            ${
              c.parents.length === 0
                ? html`<span class="muted">no parent (first commit)</span>`
                : html`<span
                    >parent${c.parents.length === 1 ? '' : 's'}
                    ${c.parents.map((p) => html`${commitLink(repo, p)} `)}</span
                  >`
            }
          </p>
        </div>
      </div>
      ${checksList(await indexedVerdict(site, repo, oid, undefined))} ${diff}`,
  );
}

/**
 * Compares two refs as a pull request would: the commits on `head` since the merge base, and the
 * diff from the merge base to `head` (`base...head`). Both sides may hold slashes. When `head` is a
 * branch of this repository and `base` a branch of the repository a pull request from it goes into
 * (the one it was forked from, else itself), the page previews that pull request: its ends are read
 * as its round reads them (`roundEnds`), the base from that repository, never from a fork's own
 * branch of that name, which may be behind; so the page shows what the pull request will hold.
 */
export async function comparePage(
  site: Site,
  repo: RepoTarget,
  tail: string,
  pageNo: number,
): Promise<string> {
  requireMirror(repo);
  const dots = tail.indexOf('...');
  if (dots === -1) throw new HttpError(404, 'A comparison is written base...head.');
  const baseName = tail.slice(0, dots);
  const headName = tail.slice(dots + 3);
  const target = await pullTarget(site, repo);
  const ends =
    target === undefined
      ? undefined
      : await roundEnds(
          async (r: { gitDir: string }, branch: string) =>
            fs.existsSync(r.gitDir)
              ? (await mirrorRefs(r.gitDir)).byName.get(`refs/heads/${branch}`)
              : undefined,
          target,
          baseName,
          repo,
          headName,
        );
  const proposed =
    target !== undefined && ends?.base !== undefined && ends.head !== undefined
      ? { target, base: ends.base, head: ends.head }
      : undefined;
  // A fork's branch against the upstream's: git sees both mirrors' objects, nothing copied.
  const both =
    proposed !== undefined && proposed.target.gitDir !== repo.gitDir
      ? bothMirrors(repo.gitDir, proposed.target.gitDir)
      : undefined;
  try {
    const dir = both?.gitDir ?? repo.gitDir;
    const base = proposed?.base ?? (await resolveCommit(repo.gitDir, baseName));
    const head = proposed?.head ?? (await resolveCommit(repo.gitDir, headName));
    if (base === undefined) throw new HttpError(404, `No branch, tag or commit ${baseName}.`);
    if (head === undefined) throw new HttpError(404, `No branch, tag or commit ${headName}.`);
    const mb = await mergeBase(dir, base, head);
    // One more than shown, to say that there are more.
    const commits = await log(dir, mb === undefined ? head : `${mb}..${head}`, COMPARE_COMMITS + 1);
    const self =
      href(repo.owner, repo.name, 'compare') + '/' + tail.split('/').map(encodeURIComponent).join('/');
    const diff = await pagedDiff(
      { ...repo, gitDir: dir },
      mb ?? base,
      head,
      pageNo,
      (p) => `${self}?page=${p}`,
    );
    const more = commits.length > COMPARE_COMMITS;
    const count = more
      ? `More than ${COMPARE_COMMITS} commits`
      : `${commits.length} commit${commits.length === 1 ? '' : 's'}`;
    const against =
      both === undefined || proposed === undefined
        ? ''
        : `, measured against ${proposed.target.owner}/${proposed.target.name}'s ${baseName}, where a pull request from it goes`;
    const summary = `${count} on ${headName} since ${mb === undefined ? 'no common ancestor' : short(mb)}${against}.`;
    // Where the link `git push` prints for a new branch lands: prefilled as GitHub's "new pull
    // request", with the command to run, since the pull request is a record in the pusher's account.
    const proposal =
      commits.length > 0 && proposed !== undefined
        ? newPullBox(repo, baseName, headName, commits.length === 1 ? commits[0]!.subject : headName)
        : '';
    return page(
      `Compare ${baseName}...${headName}`,
      html`${repoHeader(repo)}
        <h2>Comparing <span class="pill">${baseName}</span> ... <span class="pill">${headName}</span></h2>
        <p class="muted">${summary}</p>
        ${proposal}
        ${
          commits.length === 0
            ? html`<p>${headName} has nothing that ${baseName} lacks.</p>`
            : commitList(repo, commits.slice(0, COMPARE_COMMITS))
        }
        ${diff}`,
    );
  } finally {
    both?.close();
  }
}

/**
 * The repository a pull request from `repo` goes into (`pullInto`), with its mirror; undefined when
 * this appview does not know the one it was forked from.
 */
async function pullTarget(
  site: Site,
  repo: RepoTarget,
): Promise<{ owner: string; name: string; gitDir: string } | undefined> {
  const into = pullInto(repo);
  if (repo.forkOf === null) return { ...into, gitDir: repo.gitDir };
  const owner = await site.index.owner(into.owner);
  if (owner === undefined) return undefined;
  return { ...into, gitDir: site.mirror.gitDir(owner.did, into.name) };
}

/**
 * A scratch git directory that reads the objects of two mirrors through alternates (nothing is
 * copied, nothing in either mirror is touched); `close` removes it.
 */
function bothMirrors(a: string, b: string): { gitDir: string; close(): void } {
  const gitDir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-compare-'));
  const close = () => fs.rmSync(gitDir, { recursive: true, force: true });
  try {
    fs.mkdirSync(path.join(gitDir, 'objects', 'info'), { recursive: true });
    fs.mkdirSync(path.join(gitDir, 'refs'));
    fs.writeFileSync(path.join(gitDir, 'HEAD'), 'ref: refs/heads/main\n');
    fs.writeFileSync(
      path.join(gitDir, 'objects', 'info', 'alternates'),
      `${path.resolve(a, 'objects')}\n${path.resolve(b, 'objects')}\n`,
    );
  } catch (err) {
    close();
    throw err;
  }
  return { gitDir, close };
}

/** Commits listed on a compare page; the log of the head ref shows the rest. */
const COMPARE_COMMITS = 100;
