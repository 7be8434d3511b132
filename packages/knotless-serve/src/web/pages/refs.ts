import { indexedVerdict } from '../checks.ts';
import { checksBadge } from './checks-view.ts';
import { aheadBehind, aheadBehindKnown, aheadBehindStarted, type DatedRef } from '../../mirror/history.ts';
import { mirrorRefs } from '../../mirror/ref-cache.ts';
import { symbolicHead } from '../../mirror/read.ts';
import { pager } from '../diff-view.ts';
import { html, href, page, pathHref, when } from '../html.ts';
import type { RepoTarget, Site } from '../site.ts';
import { commitLink, repoHeader, requireMirror } from './common.ts';

/** Refs per page of the branches and tags pages. */
const PER_PAGE = 50;
/** How long a branches page waits for ahead/behind figures; those not ready show later. */
const AHEAD_BUDGET_MS = 250;

/** Branches, newest first, each with how far ahead of and behind the default branch it is. */
export async function branchesPage(site: Site, repo: RepoTarget, pageNo: number): Promise<string> {
  requireMirror(repo);
  const { branches } = await mirrorRefs(repo.gitDir);
  const headName = await symbolicHead(repo.gitDir);
  // The default branch as the repository page shows it: HEAD's, else the most recent.
  const head = branches.find((b) => b.name === headName) ?? branches[0];
  const pages = Math.max(1, Math.ceil(branches.length / PER_PAGE));
  const p = Math.min(pageNo, pages);
  const shown = branches.slice((p - 1) * PER_PAGE, p * PER_PAGE);
  // Figures not ready in time show as pending; their walks finish in the background (shared,
  // queued appview-wide and cached), so a later view has them. A page waits only for walks it was
  // the first to ask for: a reload during a long count answers at once. A failed walk shows as
  // pending too, never as a 500.
  const isDefault = (b: DatedRef) => head === undefined || b.name === head.name;
  const fresh = shown.some((b) => !isDefault(b) && !aheadBehindStarted(repo.gitDir, head!.oid, b.oid));
  const walks = shown.filter((b) => !isDefault(b)).map((b) => aheadBehind(repo.gitDir, head!.oid, b.oid));
  if (fresh)
    await Promise.race([
      Promise.allSettled(walks),
      new Promise((resolve) => setTimeout(resolve, AHEAD_BUDGET_MS).unref()),
    ]);
  const counts = shown.map((b) =>
    isDefault(b) ? undefined : (aheadBehindKnown(repo.gitDir, head!.oid, b.oid) ?? null),
  );
  const base = [repo.owner, repo.name];
  const defName = head?.name.slice('refs/heads/'.length);
  // Each tip's checks, judged by its branch's protection.
  const checks = await Promise.all(
    shown.map((b) => indexedVerdict(site, repo, b.oid, b.name.slice('refs/heads/'.length))),
  );
  const self = href(...base, 'branches');
  return page(
    `Branches of ${repo.owner}/${repo.name}`,
    html`${repoHeader(repo, undefined, 'branches')}
      <h2>${branches.length} branch${branches.length === 1 ? '' : 'es'}</h2>
      <div class="box">
        <table class="list">
          <caption class="sr">
            Branches, most recently changed first
          </caption>
          ${shown.map((b, i) => {
            const name = b.name.slice('refs/heads/'.length);
            const c = counts[i];
            return html`<tr>
              <td><a class="mono" href="${pathHref([...base, 'tree'], name)}">${name}</a></td>
              <td class="hide-narrow">${commitLink(repo, b.oid)} <span class="muted">${b.subject}</span></td>
              <td class="nowrap">${checksBadge(repo, b.oid, checks[i]!)}</td>
              <td class="muted nowrap">${when(b.date)}</td>
              <td class="nowrap">
                ${
                  c === undefined
                    ? html`<span class="pill">default</span>`
                    : c === null
                      ? html`<span class="muted">counting…</span>`
                      : html`<a
                          href="${pathHref([...base, 'compare'], `${defName ?? ''}...${name}`)}"
                          title="commits ahead of and behind ${defName ?? ''}"
                          >${c.ahead} ahead, ${c.behind} behind</a
                        >`
                }
              </td>
            </tr>`;
          })}
        </table>
      </div>
      ${pager(p, pages, (n) => `${self}?page=${n}`)}`,
  );
}

/** Tags, newest first, with their commit and downloads. */
export async function tagsPage(_site: Site, repo: RepoTarget, pageNo: number): Promise<string> {
  requireMirror(repo);
  const { tags } = await mirrorRefs(repo.gitDir);
  const pages = Math.max(1, Math.ceil(tags.length / PER_PAGE));
  const p = Math.min(pageNo, pages);
  const shown: DatedRef[] = tags.slice((p - 1) * PER_PAGE, p * PER_PAGE);
  const base = [repo.owner, repo.name];
  const self = href(...base, 'tags');
  return page(
    `Tags of ${repo.owner}/${repo.name}`,
    html`${repoHeader(repo, undefined, 'tags')}
      <h2>${tags.length} tag${tags.length === 1 ? '' : 's'}</h2>
      ${
        tags.length === 0
          ? html`<p class="muted">No tags.</p>`
          : html`<div class="box">
              <table class="list">
                <caption class="sr">
                  Tags, newest first
                </caption>
                ${shown.map((t) => {
                  const name = t.name.slice('refs/tags/'.length);
                  return html`<tr>
                    <td><a class="mono" href="${pathHref([...base, 'tree'], name)}">${name}</a></td>
                    <td class="hide-narrow">
                      ${commitLink(repo, t.oid)} <span class="muted">${t.subject}</span>
                    </td>
                    <td class="muted nowrap">${when(t.date)}</td>
                    <td class="nowrap">
                      <a href="${pathHref([...base, 'archive'], `${name}.tar.gz`)}">.tar.gz</a>
                      <a href="${pathHref([...base, 'archive'], `${name}.zip`)}">.zip</a>
                    </td>
                  </tr>`;
                })}
              </table>
            </div>`
      }
      ${pager(p, pages, (n) => `${self}?page=${n}`)}`,
  );
}
