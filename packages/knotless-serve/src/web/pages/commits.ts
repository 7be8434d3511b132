import { listRefs, log, type CommitInfo } from '../../mirror/read.ts';
import { html, href, page, pathHref, when, type SafeHtml } from '../html.ts';
import type { RepoTarget, Site } from '../site.ts';
import { refPath, repoHeader, requireMirror, short } from './common.ts';

const PAGE = 50;

/** Commits as a table of id, subject, author and date. */
export function commitList(repo: RepoTarget, commits: CommitInfo[]): SafeHtml {
  return html`<div class="box">
    <table class="list">
      <caption class="sr">
        Commits, newest first
      </caption>
      ${commits.map(
        (c) =>
          html`<tr>
            <td>
              <a class="mono" href="${href(repo.owner, repo.name, 'commit', c.oid)}" title="${c.oid}"
                >${short(c.oid)}</a
              >
            </td>
            <td>${c.subject}</td>
            <td class="muted hide-narrow">${c.author}</td>
            <td class="muted nowrap">${when(c.date)}</td>
          </tr>`,
      )}
    </table>
  </div>`;
}

/** The log of a ref (default: HEAD's branch), 50 commits a page. */
export async function commitsPage(
  _site: Site,
  repo: RepoTarget,
  tail: string,
  pageNo: number,
): Promise<string> {
  requireMirror(repo);
  if (tail === '') {
    const { head, branches } = await listRefs(repo.gitDir);
    tail = (head ?? branches[0]?.name ?? 'refs/heads/main').replace(/^refs\/heads\//, '');
  }
  const at = await refPath(repo, tail);
  const n = Number.isInteger(pageNo) && pageNo > 0 ? pageNo : 1;
  const commits = await log(repo.gitDir, at.oid, PAGE + 1, (n - 1) * PAGE);
  const more = commits.length > PAGE;
  const link = (p: number) => `${pathHref([repo.owner, repo.name, 'commits'], at.ref)}?page=${p}`;
  const feed = pathHref([repo.owner, repo.name, 'atom'], at.ref);
  return page(
    `Commits of ${at.ref}`,
    html`${repoHeader(repo, at.ref, 'commits')}
      <h2>Commits on <span class="pill">${at.ref}</span></h2>
      ${commitList(repo, commits.slice(0, PAGE))}
      <nav class="pager" aria-label="Pages">
        ${n > 1 ? html`<a href="${link(n - 1)}">← Newer</a> ` : ''}${more ? html`<a href="${link(n + 1)}">Older →</a>` : ''}
      </nav>
      <p><a href="${feed}">Atom feed of ${at.ref}</a></p>`,
    { feed },
  );
}
