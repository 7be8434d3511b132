// A commit's checks on the pages: each runner's latest verdict (icon, context, the runner's handle,
// whether the owner trusts it, a link to the run only when it is an http or https address), and a
// one-line summary beside a commit in lists. What counts for a merge is knotless-core's rule
// (unmetChecks); these only show what the index holds.
import type { CommitVerdict } from 'knotless-core/forge/checks-store';
import { moreUntrusted, type ShownCheck } from 'knotless-core/forge/checks';
import type { CheckState } from 'knotless-core/forge/records';
import { html, href, type SafeHtml } from '../html.ts';
import type { RepoTarget } from '../site.ts';

const ICON: Record<CheckState, string> = { success: '✓', failure: '✗', error: '!', pending: '●' };
const WORD: Record<CheckState, string> = {
  success: 'passed',
  failure: 'failed',
  error: 'errored',
  pending: 'pending',
};

/** A run's address, only when it is http or https: a check is anyone's claim, its link too. */
function runLink(c: ShownCheck): string | undefined {
  return c.targetUrl !== undefined && /^https?:\/\//i.test(c.targetUrl) ? c.targetUrl : undefined;
}

/** The list of a commit's checks (nothing when it has none), under `id` for links to it. */
export function checksList(v: CommitVerdict, id = 'checks'): SafeHtml {
  if (v.shown.length === 0) return html``;
  return html`<section class="box" id="${id}" aria-labelledby="${id}-h">
    <div class="head"><h2 id="${id}-h">Checks</h2></div>
    <ul class="checks pad">
      ${v.shown.map((c) => {
        const url = runLink(c);
        return html`<li class="check ck-${c.state}">
          <span class="ck-icon" aria-hidden="true">${ICON[c.state]}</span>
          <strong class="ck-context">${c.context}</strong> ${WORD[c.state]} by
          <span class="ck-runner">${v.names.get(c.runner) ?? c.runner}</span>
          ${c.trusted ? '' : html`<span class="pill">not trusted by the owner</span>`}
          ${c.description === undefined ? '' : html`<span class="muted">${c.description}</span>`}
          ${url === undefined ? '' : html`<a href="${url}" rel="nofollow noopener noreferrer">details</a>`}
        </li>`;
      })}
      ${v.left === undefined ? '' : html`<li class="check ck-more muted">… ${moreLeft(v.left)}</li>`}
    </ul>
  </section>`;
}

/** The verdicts by runners the owner does not trust that the index left out, in the CLI's words. */
function moreLeft(left: NonNullable<CommitVerdict['left']>): string {
  return moreUntrusted(left.count, left.atLeast);
}

/** The worst state among `shown`: a failure or error, else pending, else success. */
function overall(shown: readonly ShownCheck[]): CheckState {
  if (shown.some((c) => c.state === 'failure' || c.state === 'error')) return 'failure';
  if (shown.some((c) => c.state === 'pending')) return 'pending';
  return 'success';
}

/**
 * One line for a commit in a list: how many of its checks passed, linking to the commit's page where
 * they are listed, and how many by untrusted runners were left out; nothing when it has none.
 */
export function checksBadge(repo: RepoTarget, commit: string, v: CommitVerdict): SafeHtml {
  if (v.shown.length === 0) return html``;
  const state = overall(v.shown);
  const passed = v.shown.filter((c) => c.state === 'success').length;
  const title = v.shown
    .map((c) => `${c.context}: ${c.state} by ${v.names.get(c.runner) ?? c.runner}`)
    .concat(v.left === undefined ? [] : [moreLeft(v.left)])
    .join('; ');
  return html`<a
    class="ck-badge ck-${state}"
    href="${href(repo.owner, repo.name, 'commit', commit)}#checks"
    title="${title}"
    ><span aria-hidden="true">${ICON[state]}</span> ${passed}/${v.shown.length} checks
    passed${v.left === undefined ? '' : `, ${v.left.atLeast ? 'at least ' : ''}${v.left.count} more untrusted`}</a
  >`;
}

/**
 * Whether a pull request's last round can be merged into its base branch, and if not why: each
 * required check that has not passed, in the CLI's words. Nothing when the branch is not protected.
 */
export function mergeability(v: CommitVerdict, base: string): SafeHtml {
  if (v.required === undefined || v.required.length === 0) return html``;
  if (v.unmet.length === 0)
    return html`<p class="merge-checks ck-success">
      Can be merged: the required checks of ${base} have passed.
    </p>`;
  return html`<p class="merge-checks">
    Not mergeable yet: the required checks have not passed:
    ${v.unmet.map((u, i) => html`${i === 0 ? '' : '; '}<span class="unmet">${u.reason}</span>`)}.
  </p>`;
}
