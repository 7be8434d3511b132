import { html, href, page, when } from '../html.ts';
import type { Site } from '../site.ts';
import { repoList } from './account.ts';

/** The home page: search results when there is a query, else recent pushes and new repositories. */
export async function homePage(site: Site, q: string): Promise<string> {
  if (q.trim() !== '') {
    const found = await site.index.search(q.trim().slice(0, 200), 50);
    return page(
      `Search: ${q}`,
      html`<h1>Repositories matching “${q}”</h1>
        ${found.length === 0 ? html`<p class="muted">Nothing found.</p>` : repoList(found)}`,
      { q },
    );
  }
  const pushes = await site.index.pushes({ limit: 30 });
  const repos = await site.index.repos({ limit: 20 });
  return page(
    'Home',
    html`<h1>Recent pushes</h1>
      <div class="box">
        <table class="list">
          ${
            pushes.length === 0
              ? html`<tr>
                  <td class="muted">No pushes seen yet.</td>
                </tr>`
              : pushes.map((p) => {
                  const owner = p.handle ?? p.did;
                  const branch = p.ref.replace(/^refs\/(heads|tags)\//, '');
                  return html`<tr>
                    <td>
                      <a href="${href(owner)}">${owner}</a> / <a href="${href(owner, p.repo)}">${p.repo}</a>
                    </td>
                    <td>
                      <span class="pill">${branch}</span> ${
                        p.new_target === null
                          ? html`<span class="muted">deleted</span>`
                          : html`<a class="mono" href="${href(owner, p.repo, 'commit', p.new_target)}"
                              >${p.new_target.slice(0, 8)}</a
                            >`
                      }
                    </td>
                    <td class="muted">${when(p.time)}</td>
                  </tr>`;
                })
          }
        </table>
      </div>
      <h2>New repositories</h2>
      ${repoList(repos)}`,
  );
}
