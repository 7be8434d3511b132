import type { RepoRow } from '../../db/index-store.ts';
import type { NamedMaintainer } from '../../db/maintainers.ts';
import { maintainersLine } from './common.ts';
import { html, href, page, when, type SafeHtml } from '../html.ts';
import { inactiveAccount } from '../http-error.ts';
import { HttpError, type Site } from '../site.ts';

/**
 * A list of repositories with owner, description and creation date, and each one's maintainers
 * when `maintainers` (by repository name) gives them.
 */
export function repoList(repos: RepoRow[], maintainers?: Map<string, NamedMaintainer[]>): SafeHtml {
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
            ${maintainersLine(maintainers?.get(r.name) ?? [])}
          </td>
          <td class="muted">${when(r.created_at)}</td>
        </tr>`;
      })}
    </table>
  </div>`;
}

/**
 * An account's page: its repositories. An organisation (an account whose repositories list
 * maintainers) shows each repository's maintainers and, first, everyone who maintains one of them;
 * an account that maintains others' repositories lists those too.
 */
export async function accountPage(site: Site, actor: string): Promise<string> {
  const owner = await site.index.owner(actor);
  if (owner === undefined) throw new HttpError(404, `No knotless account ${actor} is known here.`);
  if (owner.status !== null) throw inactiveAccount(actor, owner.status);
  const [repos, maintainers, maintains] = await Promise.all([
    site.index.repos({ did: owner.did, limit: 500 }),
    site.index.accountMaintainers(owner.did),
    site.index.maintainedBy(owner.did),
  ]);
  const shown = new Set(repos.map((r) => r.name));
  const members = new Map<string, NamedMaintainer>();
  for (const [repo, list] of maintainers)
    if (shown.has(repo)) for (const m of list) if (!members.has(m.did)) members.set(m.did, m);
  return page(
    actor,
    html`<h1>${owner.handle ?? owner.did}</h1>
      <p class="muted mono">${owner.did}</p>
      ${
        members.size === 0
          ? ''
          : html`<section class="org" aria-labelledby="members-h">
              <h2 id="members-h">Maintainers</h2>
              <p class="muted">
                Accounts its repositories list as maintainers: they push and decide as its owner does.
              </p>
              ${maintainersLine([...members.values()])}
            </section>`
      }
      <h2>Repositories</h2>
      ${repoList(repos, maintainers)}
      ${
        maintains.length === 0
          ? ''
          : html`<h2>Maintains</h2>
              <ul class="maintains">
                ${maintains.map((m) => {
                  const who = m.handle ?? m.did;
                  return html`<li><a href="${href(who, m.repo)}">${who}/${m.repo}</a></li>`;
                })}
              </ul>`
      }`,
  );
}
