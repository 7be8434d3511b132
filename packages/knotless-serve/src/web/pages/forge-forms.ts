// The forge's forms, shown to a signed-in reader (plain forms: they post without JavaScript), and
// to everyone else a link to sign in. What each posts to is in web/actions/forge.ts.
import { labelList } from 'knotless-core/forge/decision';
import { inTeam } from 'knotless-core/records/forge-authority';
import { csrfField, postButton } from '../forms.ts';
import { html, href, type SafeHtml } from '../html.ts';
import type { RepoTarget } from '../site.ts';
import { signInOffered, viewer } from '../viewer.ts';

function signInHint(what: string): SafeHtml {
  return signInOffered() && viewer() === undefined
    ? html`<p class="muted"><a class="u" href="/-/signin">Sign in</a> to ${what}.</p>`
    : html``;
}

/** The "new issue" form at the foot of a repository's issues. */
export function newIssueForm(repo: RepoTarget): SafeHtml {
  if (viewer() === undefined) return signInHint('open an issue');
  return html`<section class="box" aria-labelledby="newissue-h">
    <div class="head"><h2 id="newissue-h">New issue</h2></div>
    <form class="pad stack" method="post" action="${href(repo.owner, repo.name, 'issues', 'new')}">
      ${csrfField()}
      <label for="issue-title">Title</label>
      <input id="issue-title" name="title" required maxlength="300" />
      <label for="issue-body">Description</label>
      <textarea id="issue-body" name="body" rows="6"></textarea>
      <p><button type="submit">Open issue</button></p>
    </form>
  </section>`;
}

/** The comment form of an issue or pull request page; `rounds` offers a round to comment on. */
export function commentForm(action: string, rounds = 0): SafeHtml {
  if (viewer() === undefined) return signInHint('comment');
  return html`<form class="box pad stack" method="post" action="${action}" id="comment">
    ${csrfField()}
    <label for="comment-body">Comment</label>
    <textarea id="comment-body" name="body" rows="5" required></textarea>
    ${
      rounds === 0
        ? ''
        : html`<label for="comment-round">On round</label>
            <select id="comment-round" name="round">
              <option value="">the whole pull request</option>
              ${Array.from({ length: rounds }, (_, i) => html`<option value="${String(i)}">round ${i}</option>`)}
            </select>`
    }
    <p><button type="submit">Comment</button></p>
  </form>`;
}

/** The form under a line of a round's diff, commenting on that line. */
export function lineCommentForm(action: string, round: number, path: string, line: number): SafeHtml {
  if (viewer() === undefined) return signInHint('comment on this line');
  return html`<form class="pad stack" method="post" action="${action}" id="line-form">
    ${csrfField()}
    <input type="hidden" name="round" value="${String(round)}" />
    <input type="hidden" name="path" value="${path}" />
    <input type="hidden" name="line" value="${String(line)}" />
    <label for="line-body">Comment on ${path} line ${line}</label>
    <textarea id="line-body" name="body" rows="3" required></textarea>
    <p><button type="submit">Comment on line</button></p>
  </form>`;
}

/** Whether `did` decides for the repository as its owner does: the owner or a maintainer. */
export function decidesFor(repo: RepoTarget, did: string | undefined): boolean {
  if (did === undefined) return false;
  return inTeam({ owner: repo.did, maintainers: repo.maintainers.map((m) => m.did) }, did);
}

/**
 * Close or reopen, for those the authority rule lets decide: the repository's owner and
 * maintainers, and the author of their own (never once merged). Others see no button; a forged
 * post is refused anyway.
 */
export function stateForm(repo: RepoTarget, base: string, author: string, state: string): SafeHtml {
  const v = viewer();
  if (v === undefined || state === 'merged' || (!decidesFor(repo, v.did) && v.did !== author)) return html``;
  return state === 'open'
    ? postButton(`${base}/state`, 'Close', { state: 'closed' })
    : postButton(`${base}/state`, 'Reopen', { state: 'open' });
}

/**
 * The merge button, for the owner and the maintainers: it names the head the page shows, and only
 * that head is merged, and the base branch's tip the page was rendered with (`baseTip`), which must
 * still be the tip. While the base branch's required checks have not passed (`unmet`, which the
 * page says), the owner alone has a second button that merges anyway.
 */
export function mergeForm(
  repo: RepoTarget,
  base: string,
  state: string,
  head: string | undefined,
  baseTip: string | undefined,
  unmet: readonly unknown[],
): SafeHtml {
  const v = viewer();
  if (v === undefined || !decidesFor(repo, v.did) || state !== 'open' || head === undefined) return html``;
  const fields = { head, ...(baseTip === undefined ? {} : { base: baseTip }) };
  const merge = postButton(`${base}/merge`, 'Merge pull request', fields);
  if (unmet.length === 0 || v.did !== repo.did) return merge;
  return html`${merge} ${postButton(`${base}/merge-without-checks`, 'Merge without checks', fields)}`;
}

/** The repository a pull request from `repo` goes into: the one it was forked from, else itself. */
export function pullInto(repo: RepoTarget): { owner: string; name: string } {
  return repo.forkOf ?? { owner: repo.owner, name: repo.name };
}

/**
 * The compare page's "open a pull request" form: this repository's `head` branch proposed for
 * `base` of the repository it was forked from (or of itself).
 */
export function newPullForm(repo: RepoTarget, base: string, head: string, title: string): SafeHtml {
  if (viewer() === undefined) return signInHint('open this pull request from here');
  const target = pullInto(repo);
  return html`<form class="stack" method="post" action="${href(target.owner, target.name, 'pulls', 'new')}">
    ${csrfField()}
    <input type="hidden" name="head_repo" value="${repo.owner}/${repo.name}" />
    <input type="hidden" name="head_branch" value="${head}" />
    <input type="hidden" name="base" value="${base}" />
    <label for="pull-title">Title</label>
    <input id="pull-title" name="title" required maxlength="300" value="${title}" />
    <label for="pull-body">Description</label>
    <textarea id="pull-body" name="body" rows="5"></textarea>
    <p><button type="submit">Open pull request</button></p>
  </form>`;
}

/** The labels form: the whole list, comma-separated (only the owner's and maintainers' labels count). */
export function labelsForm(repo: RepoTarget, base: string, labels: string[]): SafeHtml {
  const v = viewer();
  if (v === undefined || !decidesFor(repo, v.did)) return html``;
  return html`<form class="inline" method="post" action="${base}/labels">
    ${csrfField()}
    <label for="labels">Labels</label>
    <input id="labels" name="labels" value="${labelList(labels)}" placeholder="bug, docs" />
    <button type="submit">Save labels</button>
  </form>`;
}

/**
 * A repository's star count, and for a signed-in reader a button to star or unstar it (`starred`:
 * whether the index holds a star of theirs on it).
 */
export function starForm(repo: RepoTarget, count: number, starred: boolean): SafeHtml {
  const label = `${count.toLocaleString('en')} ${count === 1 ? 'star' : 'stars'}`;
  if (viewer() === undefined) return html`<span class="stars">${label}</span>`;
  return html`<span class="stars"
    >${label}
    ${
      starred
        ? postButton(href(repo.owner, repo.name, 'unstar'), 'Unstar')
        : postButton(href(repo.owner, repo.name, 'star'), 'Star')
    }</span
  >`;
}

/** An item's labels as pills, in the order the owner wrote them (the issue and pull request pages). */
export function labelPills(labels: readonly string[]): SafeHtml[] {
  return labels.map((l) => html` <span class="pill">${l}</span>`);
}
