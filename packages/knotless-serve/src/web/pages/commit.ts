import { commitInfo, diff, log, mergeBase, resolveCommit } from '../../mirror/read.ts';
import { html, href, page, when } from '../html.ts';
import { renderDiff } from '../render.ts';
import type { RepoTarget } from '../server.ts';
import { HttpError, type Site } from '../site.ts';
import { repoHeader, requireMirror, short } from './common.ts';
import { commitList } from './commits.ts';

/** One commit: its message, author, parents and diff (against the first parent). */
export async function commitPage(_site: Site, repo: RepoTarget, tail: string): Promise<string> {
  requireMirror(repo);
  const oid = /^[0-9a-f]{4,40}$/.test(tail) ? await resolveCommit(repo.gitDir, tail) : undefined;
  if (oid === undefined) throw new HttpError(404, `No commit ${tail} in this repository.`);
  const c = await commitInfo(repo.gitDir, oid);
  const patch = await diff(repo.gitDir, c.parents[0], oid);
  return page(
    `${c.subject} · ${short(oid)}`,
    html`${repoHeader(repo)}
      <div class="box">
        <div class="head"><strong>${c.subject}</strong></div>
        <div style="padding:.6rem .8rem">
          ${c.body === '' ? '' : html`<pre>${c.body}</pre>`}
          <p class="muted">${c.author} &lt;${c.email}&gt; · ${when(c.date)}</p>
          <p class="mono">
            commit
            ${oid}${c.parents.map((p) => html`<br />parent <a href="${href(repo.owner, repo.name, 'commit', p)}">${p}</a>`)}
          </p>
        </div>
      </div>
      ${renderDiff(patch)}`,
  );
}

/**
 * Compares two refs as a pull request would: the commits on `head` since the merge base, and the
 * diff from the merge base to `head` (`base...head`). Both sides may hold slashes.
 */
export async function comparePage(_site: Site, repo: RepoTarget, tail: string): Promise<string> {
  requireMirror(repo);
  const dots = tail.indexOf('...');
  if (dots === -1) throw new HttpError(404, 'A comparison is written base...head.');
  const baseName = tail.slice(0, dots);
  const headName = tail.slice(dots + 3);
  const base = await resolveCommit(repo.gitDir, baseName);
  const head = await resolveCommit(repo.gitDir, headName);
  if (base === undefined) throw new HttpError(404, `No branch, tag or commit ${baseName}.`);
  if (head === undefined) throw new HttpError(404, `No branch, tag or commit ${headName}.`);
  const mb = await mergeBase(repo.gitDir, base, head);
  const commits = await log(repo.gitDir, mb === undefined ? head : `${mb}..${head}`, 250);
  const patch = await diff(repo.gitDir, mb ?? base, head);
  return page(
    `Compare ${baseName}...${headName}`,
    html`${repoHeader(repo)}
      <h2>Comparing <span class="pill">${baseName}</span> ... <span class="pill">${headName}</span></h2>
      <p class="muted">
        ${commits.length} commit${commits.length === 1 ? '' : 's'} on ${headName} since
        ${mb === undefined ? 'no common ancestor' : short(mb)}.
      </p>
      ${commits.length === 0 ? html`<p>${headName} has nothing that ${baseName} lacks.</p>` : commitList(repo, commits)}
      ${renderDiff(patch)}`,
  );
}
