import type { PushRow } from '../../db/index-store.ts';
import { html, href, page, when, type SafeHtml } from '../html.ts';
import type { Site } from '../site.ts';
import { repoList } from './account.ts';

/** Push rows read to make the home page's groups; one mirror push can write dozens of refs. */
const PUSH_ROWS = 300;
/** Pushes shown on the home page. */
const PUSH_GROUPS = 20;
/** Ref updates of one repository this close together are one push (a push writes in batches). */
const SAME_PUSH_MS = 60_000;

interface PushGroup {
  rows: PushRow[];
}

/**
 * Ref updates grouped into pushes: consecutive rows (newest first) of the same repository written
 * at the same account revision, or within a minute of each other, are one push. Without this a
 * mirror push of 38 tags filled the page with 38 rows.
 */
export function groupPushes(rows: PushRow[]): PushGroup[] {
  const groups: PushGroup[] = [];
  for (const row of rows) {
    const g = groups.at(-1);
    const prev = g?.rows.at(-1);
    const same =
      prev !== undefined &&
      prev.did === row.did &&
      prev.repo === row.repo &&
      (prev.pusher ?? null) === (row.pusher ?? null) &&
      (prev.rev === row.rev || Math.abs(Date.parse(prev.time) - Date.parse(row.time)) <= SAME_PUSH_MS);
    if (same) g!.rows.push(row);
    else groups.push({ rows: [row] });
  }
  return groups;
}

/**
 * One push on the home page: who pushed (the owner, or the maintainer whose table it was), and each
 * ref once, at its newest update in the group (rows are newest first).
 */
export function pushRow(g: PushGroup): SafeHtml {
  const first = g.rows[0]!;
  const owner = first.handle ?? first.did;
  const pusher = first.pusher == null ? owner : (first.pusher_handle ?? first.pusher);
  const seen = new Set<string>();
  const latest = g.rows.filter((r) => !seen.has(r.ref) && seen.add(r.ref));
  const refs = latest.slice(0, 5);
  return html`<tr>
    <td><a href="${href(owner)}">${owner}</a> / <a href="${href(owner, first.repo)}">${first.repo}</a></td>
    <td class="pusher">
      by <a href="${href(pusher)}">${pusher}</a>${
        first.pusher == null ? '' : html` <span class="pill">maintainer</span>`
      }
    </td>
    <td>
      <span class="push-refs"
        >${refs.map((p) => {
          const name = p.ref.replace(/^refs\/(heads|tags)\//, '');
          return html`<span class="pill">${name}</span>${
              p.new_target === null
                ? html`<span class="muted">deleted</span> `
                : html`<a
                    class="mono"
                    href="${href(owner, p.repo, 'commit', p.new_target)}"
                    title="${p.new_target}"
                    >${p.new_target.slice(0, 8)}</a
                  > `
            }`;
        })}${
          latest.length > refs.length
            ? html`<span class="muted">and ${latest.length - refs.length} more refs</span>`
            : ''
        }</span
      >
    </td>
    <td class="muted nowrap">${when(first.time)}</td>
  </tr>`;
}

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
  const groups = groupPushes(await site.index.pushes({ limit: PUSH_ROWS })).slice(0, PUSH_GROUPS);
  const repos = await site.index.repos({ limit: 20 });
  return page(
    'Home',
    html`<h1>Recent pushes</h1>
      <div class="box">
        <table class="list">
          <caption class="sr">
            Recent pushes, newest first
          </caption>
          ${
            groups.length === 0
              ? html`<tr>
                  <td class="muted">No pushes seen yet.</td>
                </tr>`
              : groups.map(pushRow)
          }
        </table>
      </div>
      <h2>New repositories</h2>
      ${repoList(repos)}`,
    { description: 'Git repositories that live in their owners’ AT Protocol accounts.' },
  );
}
