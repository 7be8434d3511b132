// Comments on the lines of a pull request round's diff: every line of the new side links to the
// same page with that line chosen (no script), where a small form opens under it; the round's
// comments on a line are shown under it, as well as in the comment list.
import type { CommentRow } from '../../db/forge-store.ts';
import type { LineNotes } from '../diff-view.ts';
import { html } from '../html.ts';
import { authorLink, userText } from './forge-common.ts';
import { lineCommentForm } from './forge-forms.ts';

/** The line a page's address chose (`path`, `line`), if any. */
export function chosenLine(params: URLSearchParams): { path: string; line: number } | undefined {
  const path = params.get('path');
  const line = Number(params.get('line'));
  return path === null || path === '' || !Number.isSafeInteger(line) || line < 1 ? undefined : { path, line };
}

/**
 * The notes of round `round`'s diff: `pageLink` is the diff's own page (its address has a query
 * already), `action` where a comment posts, `open` the line whose form is shown.
 */
export function lineNotes(
  comments: CommentRow[],
  round: number,
  pageLink: string,
  action: string,
  open: { path: string; line: number } | undefined,
): LineNotes {
  const key = (path: string, line: number) => `${line}\n${path}`;
  const at = new Map<string, CommentRow[]>();
  for (const c of comments) {
    if (c.path === null || c.line === null || Number(c.round) !== round) continue;
    const k = key(c.path, Number(c.line));
    at.set(k, [...(at.get(k) ?? []), c]);
  }
  return {
    link: (path, line) =>
      `${pageLink}&${new URLSearchParams({ path, line: String(line) }).toString()}#line-form`,
    below(path, line) {
      const here = at.get(key(path, line)) ?? [];
      const form = open?.path === path && open.line === line;
      if (here.length === 0 && !form) return undefined;
      return html`${here.map(
        (c) =>
          html`<article class="comment" id="lc-${c.rkey}">
            <div class="head">${authorLink(c.did, c.handle)} <span class="muted">on line ${line}</span></div>
            ${userText(c.body)}
          </article>`,
      )}
      ${form ? lineCommentForm(action, round, path, line) : ''}`;
    },
  };
}
