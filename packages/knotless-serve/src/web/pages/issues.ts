import type { IssueRow } from '../../db/forge-store.ts';
import { STATE_FILTERS } from '../../model/states.ts';
import { html, href, page, when } from '../html.ts';
import type { RepoTarget, Site } from '../site.ts';
import { repoHeader } from './common.ts';
import { commentForm, labelPills, labelsForm, newIssueForm, stateForm } from './forge-forms.ts';
import {
  authorDid,
  authorLink,
  commentList,
  forgeItem,
  itemListPage,
  statePill,
  userText,
} from './forge-common.ts';

function issueHref(repo: RepoTarget, i: Pick<IssueRow, 'did' | 'rkey'>): string {
  return href(repo.owner, repo.name, 'issues', i.did, i.rkey);
}

/** `/<owner>/<repo>/issues`: the repository's issues, open ones unless `?state=` says. */
export const issuesPage = itemListPage<IssueRow>({
  tab: 'issues',
  states: STATE_FILTERS.issues,
  title: 'Issues',
  noun: 'issues',
  async counts(site, repo) {
    const counts = (await site.index.forge.counts(repo.did, repo.name)).issues;
    // Issues are never merged: no tab, no share of "all".
    delete counts['merged'];
    return counts;
  },
  rows: (site, repo, state, limit, offset) =>
    site.index.forge.issues(repo.did, repo.name, state, limit, offset),
  row: (repo, i, short) =>
    html`<tr>
      <td class="nowrap">${statePill(i.state)}</td>
      <td>
        <a href="${issueHref(repo, i)}"><strong>${i.title}</strong></a>
        <span class="muted mono short">#${short}</span>
        <div class="muted">${authorLink(i.did, i.handle)} opened ${when(i.created_at)}</div>
      </td>
    </tr>`,
  foot: newIssueForm,
});

/** `/<owner>/<repo>/issues/<author>/<rkey>`: an issue and its comments. */
export async function issuePage(site: Site, repo: RepoTarget, author: string, rkey: string): Promise<string> {
  const did = await authorDid(site, author);
  const issue = await forgeItem(site, repo, 'issues', did, rkey);
  const comments = await site.index.forge.comments('dev.knotless.issue', did, rkey);
  const short =
    (await site.index.forge.shortIds('issues', repo.did, repo.name)).get(issue.rkey) ?? issue.rkey;
  const id = `${issue.did}/${issue.rkey}`;
  const self = issueHref(repo, issue);
  return page(
    `${issue.title} · Issue · ${repo.owner}/${repo.name}`,
    html`${repoHeader(repo, undefined, 'issues')}
      <h2 class="title">${issue.title} <span class="muted mono short">#${short}</span></h2>
      <p>
        ${statePill(issue.state)} ${authorLink(issue.did, issue.handle)} opened ${when(issue.created_at)}
        ${labelPills(JSON.parse(issue.labels) as string[])}
      </p>
      <div class="box">${userText(issue.body)}</div>
      ${commentList(comments)} ${commentForm(`${self}/comment`)}
      <p>
        ${stateForm(repo, self, issue.did, issue.state)}
        ${labelsForm(repo, self, JSON.parse(issue.labels) as string[])}
      </p>
      <p class="muted">
        Or comment with
        <span class="mono">knotless issue comment ${repo.owner}/${repo.name} ${id} --body …</span>
      </p>
      <p><a href="${href(repo.owner, repo.name, 'issues')}">← All issues</a></p>`,
  );
}
