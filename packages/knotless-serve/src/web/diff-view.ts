import type { FileStat } from '../mirror/diff.ts';
import { html, type SafeHtml } from './html.ts';

/** Files of a diff shown per page; the rest are a click on the pager away. */
export const FILES_PER_PAGE = 40;
/** A file with more patch lines than this is shown collapsed, one click to open (no script). */
const COLLAPSE_LINES = 400;

const n = (v: number | undefined) => (v === undefined ? 0 : v);

/** The summary and per-file counts of a whole diff, each file a link to its part of the page. */
export function diffStatView(files: FileStat[], fileLink: (i: number) => string): SafeHtml {
  if (files.length === 0) return html`<p class="muted">No changes.</p>`;
  const added = files.reduce((a, f) => a + n(f.added), 0);
  const deleted = files.reduce((a, f) => a + n(f.deleted), 0);
  return html`<details class="box stat" ${files.length <= 30 ? html`open` : ''}>
    <summary class="head">
      ${files.length} file${files.length === 1 ? '' : 's'} changed,
      <span class="a">+${added}</span> <span class="d">−${deleted}</span>
    </summary>
    <table class="list">
      <caption class="sr">
        Files changed
      </caption>
      ${files.map(
        (f, i) =>
          html`<tr>
            <td><a href="${fileLink(i)}">${f.oldPath === undefined ? '' : `${f.oldPath} → `}${f.path}</a></td>
            <td class="num nowrap">
              ${
                f.added === undefined
                  ? html`<span class="muted">binary</span>`
                  : html`<span class="a">+${f.added}</span> <span class="d">−${n(f.deleted)}</span>`
              }
            </td>
          </tr>`,
      )}
    </table>
  </details>`;
}

interface Row {
  cls: string;
  old: number | undefined;
  new: number | undefined;
  text: string;
}

/** A file's patch lines with old and new line numbers, from its hunk headers. */
function rows(lines: string[]): Row[] {
  let o = 0;
  let w = 0;
  const out: Row[] = [];
  for (const l of lines) {
    const h = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(l);
    if (h !== null) {
      o = Number(h[1]);
      w = Number(h[2]);
      out.push({ cls: 'd-hunk', old: undefined, new: undefined, text: l });
    } else if (l.startsWith('+')) out.push({ cls: 'd-add', old: undefined, new: w++, text: l });
    else if (l.startsWith('-')) out.push({ cls: 'd-del', old: o++, new: undefined, text: l });
    else if (l.startsWith('\\')) out.push({ cls: '', old: undefined, new: undefined, text: l });
    else out.push({ cls: '', old: o++, new: w++, text: l });
  }
  return out;
}

/**
 * Comments on the lines of a diff (a pull request round's): each line of the new side a link to
 * comment on it, and under a line what `below` gives (its comments, the open form).
 */
export interface LineNotes {
  link: (path: string, line: number) => string;
  below: (path: string, line: number) => SafeHtml | undefined;
}

function lineCells(r: Row, path: string | undefined, notes: LineNotes | undefined): SafeHtml {
  const n = r.new;
  const numbered =
    n === undefined || path === undefined || notes === undefined
      ? html`<td class="n2">${n ?? ''}</td>`
      : html`<td class="n2">
          <a href="${notes.link(path, n)}" aria-label="Comment on ${path} line ${n}">${n}</a>
        </td>`;
  const below = n === undefined || path === undefined ? undefined : notes?.below(path, n);
  return html`<tr>
      <td class="o">${r.old ?? ''}</td>
      ${numbered}
      <td class="${r.cls}">${r.text}</td>
    </tr>
    ${
      below === undefined
        ? ''
        : html`<tr class="notes">
            <td colspan="3">${below}</td>
          </tr>`
    }`;
}

/**
 * The patch of one page of files, each in a box with line numbers, `first` the index of the page's
 * first file in the whole diff (its anchor). Large files are collapsed; every line escaped.
 */
export function patchView(
  patch: string,
  files: FileStat[],
  first: number,
  cut: boolean,
  notes?: LineNotes,
): SafeHtml {
  const parts = patch.split(/^(?=diff --git )/m).filter((p) => p.startsWith('diff --git '));
  return html`${parts.map((part, i) => {
    const all = part.replace(/\n$/, '').split('\n');
    const start = all.findIndex((l) => l.startsWith('@@') || l.startsWith('Binary files'));
    const body = start === -1 ? [] : all.slice(start);
    const f = files[i];
    const name =
      f === undefined ? (all[0] ?? '') : `${f.oldPath === undefined ? '' : `${f.oldPath} → `}${f.path}`;
    const table =
      body.length === 0
        ? html`<p class="pad muted">No content changes (mode or rename only).</p>`
        : body[0]!.startsWith('Binary files')
          ? html`<p class="pad muted">Binary file changed.</p>`
          : html`<table class="code">
              ${rows(body).map((r) => lineCells(r, f?.path, notes))}
            </table>`;
    const head = html`<span class="mono">${name}</span>
      ${f?.added === undefined ? '' : html` <span class="stat"><span class="a">+${f.added}</span> <span class="d">−${n(f.deleted)}</span></span>`}`;
    return body.length > COLLAPSE_LINES
      ? html`<details class="box" id="f${first + i}">
          <summary class="head">
            ${head} <span class="muted">(large: ${body.length} lines, open to show)</span>
          </summary>
          ${table}
        </details>`
      : html`<div class="box" id="f${first + i}">
          <div class="head">${head}</div>
          ${table}
        </div>`;
  })}
  ${cut ? html`<p class="muted">The rest of this page's diff is too large to show; clone to see it.</p>` : ''}`;
}

/** Newer/older page links for a paged list. */
export function pager(pageNo: number, pages: number, link: (p: number) => string): SafeHtml {
  if (pages <= 1) return html``;
  return html`<nav class="pager" aria-label="Pages">
    ${pageNo > 1 ? html`<a href="${link(pageNo - 1)}">← Previous</a>` : ''}
    <span class="muted">page ${pageNo} of ${pages}</span>
    ${pageNo < pages ? html`<a href="${link(pageNo + 1)}">Next →</a>` : ''}
  </nav>`;
}
