import type { RepoRow } from '../../db/index-store.ts';
import { html, href, page, when, type SafeHtml } from '../html.ts';
import { inactiveAccount } from '../http-error.ts';
import { HttpError, type Site } from '../site.ts';

/** A list of repositories with owner, description and creation date. */
export function repoList(repos: RepoRow[]): SafeHtml {
  if (repos.length === 0) return html`<p class="muted">No repositories.</p>`;
  return html`<div class="box">
    <table class="list">
      ${repos.map((r) => {
        const owner = r.handle ?? r.did;
        return html`<tr>
          <td>
            <a href="${href(owner)}">${owner}</a> /
            <a href="${href(owner, r.name)}"><strong>${r.name}</strong></a>
            ${r.private === 1 ? html`<span class="muted">private</span>` : ''}
            ${r.description === null ? '' : html`<div class="muted">${r.description}</div>`}
          </td>
          <td class="muted">${when(r.created_at)}</td>
        </tr>`;
      })}
    </table>
  </div>`;
}

/** An account's page: its repositories. */
export async function accountPage(site: Site, actor: string): Promise<string> {
  const owner = await site.index.owner(actor);
  if (owner === undefined) throw new HttpError(404, `No knotless account ${actor} is known here.`);
  if (owner.status !== null) throw inactiveAccount(actor, owner.status);
  const repos = await site.index.repos({ did: owner.did, limit: 500 });
  return page(
    actor,
    html`<h1>${owner.handle ?? owner.did}</h1>
      <p class="muted mono">${owner.did}</p>
      <h2>Repositories</h2>
      ${repoList(repos)}`,
  );
}
