import type { PullRow } from '../../db/forge-store.ts';
import { STATE_FILTERS } from '../../model/states.ts';
import { roundsOf } from '../xrpc/forge-views.ts';
import { copyField, html, href, when, type SafeHtml } from '../html.ts';
import type { RepoTarget } from '../site.ts';
import { newPullForm, pullInto } from './forge-forms.ts';
import { authorLink, itemListPage, shellWord, statePill } from './forge-common.ts';

/** A pull request's page, by its author's DID and record key. */
export function pullHref(repo: RepoTarget, p: Pick<PullRow, 'did' | 'rkey'>): string {
  return href(repo.owner, repo.name, 'pulls', p.did, p.rkey);
}

/**
 * What a pull request asks, in the tense its state gives it: an open one "wants to merge", a closed
 * one "wanted to", a merged one "was merged" (by the owner, not its author).
 */
export function mergeWords(
  p: Pick<PullRow, 'did' | 'handle' | 'state' | 'base'>,
  head: SafeHtml | string,
): SafeHtml {
  const from = html`<span class="mono">${head}</span>`;
  const into = html`<span class="mono">${p.base}</span>`;
  if (p.state === 'merged') return html`${authorLink(p.did, p.handle)}'s ${from} was merged into ${into}`;
  return html`${authorLink(p.did, p.handle)} ${p.state === 'closed' ? 'wanted' : 'wants'} to merge ${from}
  into ${into}`;
}

/** `/<owner>/<repo>/pulls`: the repository's pull requests, open ones unless `?state=` says. */
export const pullsPage = itemListPage<PullRow>({
  tab: 'pulls',
  states: STATE_FILTERS.pulls,
  title: 'Pull requests',
  noun: 'pull requests',
  counts: async (site, repo) => (await site.index.forge.counts(repo.did, repo.name)).pulls,
  rows: (site, repo, state, limit, offset) =>
    site.index.forge.pulls(repo.did, repo.name, state, limit, offset),
  row(repo, p, short) {
    const rounds = roundsOf(p).length;
    return html`<tr>
      <td class="nowrap">${statePill(p.state)}</td>
      <td>
        <a href="${pullHref(repo, p)}"><strong>${p.title}</strong></a>
        <span class="muted mono short">#${short}</span>
        <div class="muted">${mergeWords(p, p.head_branch)}, opened ${when(p.created_at)}</div>
      </td>
      <td class="muted nowrap num">${rounds} round${rounds === 1 ? '' : 's'}</td>
    </tr>`;
  },
});

/**
 * The "new pull request" box of a compare page, where the link `git push` prints for a new branch
 * lands. The appview cannot write to the reader's PDS, so it shows the exact command that does,
 * aimed at the repository this one was forked from when it is a fork.
 */
export function newPullBox(repo: RepoTarget, base: string, head: string, title: string): SafeHtml {
  const target = pullInto(repo);
  const command = [
    'knotless',
    'pr',
    'create',
    `${target.owner}/${target.name}`,
    '--head',
    `${repo.owner}/${repo.name}:${head}`,
    '--base',
    base,
    '--title',
    title,
  ]
    .map(shellWord)
    .join(' ');
  return html`<section class="box newpull" aria-labelledby="newpull-h">
    <div class="head"><h2 id="newpull-h">Open a pull request</h2></div>
    <div class="pad">
      <p>
        Propose <span class="mono">${repo.owner}/${repo.name}:${head}</span> for
        <span class="mono">${target.owner}/${target.name}</span>'s <span class="mono">${base}</span>. A pull
        request is a record in your own account.
      </p>
      ${newPullForm(repo, base, head, title)}
      <p class="muted">Or from a terminal where you are logged in to knotless:</p>
      ${copyField('Command', command)}
    </div>
  </section>`;
}
