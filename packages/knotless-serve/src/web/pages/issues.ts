import type { IssueRow } from '../../db/forge-store.ts';
import { html, href, page, when } from '../html.ts';
import { HttpError, type RepoTarget, type Site } from '../site.ts';
import { pager } from '../diff-view.ts';
import { repoHeader } from './common.ts';
import {
  FORGE_PER_PAGE,
  authorDid,
  authorLink,
  commentList,
  stateNav,
  stateOf,
  statePill,
  userText,
} from './forge-common.ts';

const STATES = ['open', 'closed', 'all'];

function issueHref(repo: RepoTarget, i: Pick<IssueRow, 'did' | 'rkey'>): string {
  return href(repo.owner, repo.name, 'issues', i.did, i.rkey);
}

/** `/<owner>/<repo>/issues`: the repository's issues, open ones unless `?state=` says. */
export async function issuesPage(
  site: Site,
  repo: RepoTarget,
  rawState: string | null,
  pageNo: number,
): Promise<string> {
  const state = stateOf(rawState, STATES);
  const counts = (await site.index.forge.counts(repo.did, repo.name)).issues;
  delete counts['merged'];
  const rows = await site.index.forge.issues(
    repo.did,
    repo.name,
    state as 'open',
    FORGE_PER_PAGE,
    (pageNo - 1) * FORGE_PER_PAGE,
  );
  const total = state === 'all' ? Object.values(counts).reduce((a, b) => a + b, 0) : (counts[state] ?? 0);
  const self = href(repo.owner, repo.name, 'issues');
  const list =
    rows.length === 0
      ? html`<p class="muted">No ${state === 'all' ? '' : `${state} `}issues.</p>`
      : html`<div class="box">
          <table class="list">
            <caption class="sr">
              Issues
            </caption>
            ${rows.map(
              (i) =>
                html`<tr>
                  <td class="nowrap">${statePill(i.state)}</td>
                  <td>
                    <a href="${issueHref(repo, i)}"><strong>${i.title}</strong></a>
                    <div class="muted">${authorLink(i.did, i.handle)} opened ${when(i.created_at)}</div>
                  </td>
                </tr>`,
            )}
          </table>
        </div>`;
  return page(
    `Issues · ${repo.owner}/${repo.name}`,
    html`${repoHeader(repo, undefined, 'issues')} ${stateNav(self, state, counts, STATES)} ${list}
    ${pager(pageNo, Math.max(1, Math.ceil(total / FORGE_PER_PAGE)), (p) => `${self}?state=${state}&page=${p}`)}`,
  );
}

/** `/<owner>/<repo>/issues/<author>/<rkey>`: an issue and its comments. */
export async function issuePage(site: Site, repo: RepoTarget, author: string, rkey: string): Promise<string> {
  const did = await authorDid(site, author);
  const issue = await site.index.forge.issue(did, rkey);
  if (issue === undefined || issue.repo_did !== repo.did || issue.repo_name !== repo.name)
    throw new HttpError(404, 'No such issue in this repository.');
  const comments = await site.index.forge.comments('dev.knotless.issue', did, rkey);
  const id = `${issue.did}/${issue.rkey}`;
  return page(
    `${issue.title} · Issue · ${repo.owner}/${repo.name}`,
    html`${repoHeader(repo, undefined, 'issues')}
      <h2 class="title">${issue.title}</h2>
      <p>
        ${statePill(issue.state)} ${authorLink(issue.did, issue.handle)} opened ${when(issue.created_at)}
        ${(JSON.parse(issue.labels) as string[]).map((l) => html` <span class="pill">${l}</span>`)}
      </p>
      <div class="box">${userText(issue.body)}</div>
      ${commentList(comments)}
      <p class="muted">
        Comment with
        <span class="mono">knotless issue comment ${repo.owner}/${repo.name} ${id} --body …</span>
      </p>
      <p><a href="${href(repo.owner, repo.name, 'issues')}">← All issues</a></p>`,
  );
}
