import type { CommentRow, IssueRow, PullRow } from '../../db/forge-store.ts';
import { stateFilter, type StateFilter } from '../../model/states.ts';
import { pager } from '../diff-view.ts';
import { html, href, page, when, type SafeHtml } from '../html.ts';
import { renderMarkdown } from '../render.ts';
import { HttpError, type RepoTarget, type Site } from '../site.ts';
import { repoHeader } from './common.ts';

/**
 * Why a private repository has no pull requests or issues: they are public records, so none is kept
 * for it (the CLI refuses to write one too). Its pages of them do not exist, and a post is refused.
 */
export function noForgeWhenPrivate(repo: RepoTarget): string {
  return `${repo.owner}/${repo.name} is private, and pull requests and issues are public records, so none is kept for it.`;
}

/** The repository of a pull request's or issue's page: a private one keeps none (404). */
export function forgeRepo(repo: RepoTarget): RepoTarget {
  if (repo.private) throw new HttpError(404, noForgeWhenPrivate(repo));
  return repo;
}

/** The pull request or issue a page shows, by its author's DID and key: 404 unless it is one of `repo`'s. */
export async function forgeItem(
  site: Site,
  repo: RepoTarget,
  tab: 'pulls',
  did: string,
  rkey: string,
): Promise<PullRow>;
export async function forgeItem(
  site: Site,
  repo: RepoTarget,
  tab: 'issues',
  did: string,
  rkey: string,
): Promise<IssueRow>;
export async function forgeItem(
  site: Site,
  repo: RepoTarget,
  tab: 'pulls' | 'issues',
  did: string,
  rkey: string,
): Promise<PullRow | IssueRow>;
export async function forgeItem(
  site: Site,
  repo: RepoTarget,
  tab: 'pulls' | 'issues',
  did: string,
  rkey: string,
): Promise<PullRow | IssueRow> {
  const item =
    tab === 'pulls' ? await site.index.forge.pull(did, rkey) : await site.index.forge.issue(did, rkey);
  if (item === undefined || item.repo_did !== repo.did || item.repo_name !== repo.name)
    throw new HttpError(404, `No such ${tab === 'pulls' ? 'pull request' : 'issue'} in this repository.`);
  return item;
}

/** Pull requests and issues listed per page. */
export const FORGE_PER_PAGE = 50;

/** A state as a pill whose word carries the meaning (the colour only repeats it). */
export function statePill(state: string): SafeHtml {
  const label = state === 'merged' ? 'Merged' : state === 'closed' ? 'Closed' : 'Open';
  return html`<span class="pill st-${state === 'merged' || state === 'closed' ? state : 'open'}"
    >${label}</span
  >`;
}

/** An author by verified handle, else DID, linked to their account page. */
export function authorLink(did: string, handle: string | null): SafeHtml {
  const name = handle ?? did;
  return html`<a class="who" href="${href(name)}">${name}</a>`;
}

/** The `?state=` of a list page: open by default; anything else not offered is a 404. */
export function stateOf(raw: string | null, allowed: readonly StateFilter[]): StateFilter {
  const s = stateFilter(raw, allowed);
  if (s === undefined)
    throw new HttpError(404, `No list of ${raw ?? 'open'} items; try ${allowed.join(', ')}.`);
  return s;
}

/** Links to the list's states with their counts, the shown one marked. */
export function stateNav(
  base: string,
  current: string,
  counts: Record<string, number>,
  allowed: readonly StateFilter[],
): SafeHtml {
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  return html`<nav class="tabs states" aria-label="States">
    ${allowed.map((s) => {
      const n = s === 'all' ? total : (counts[s] ?? 0);
      const label = `${s[0]!.toUpperCase()}${s.slice(1)} (${n})`;
      const link = `${base}?state=${s}`;
      return s === current
        ? html`<a href="${link}" aria-current="page">${label}</a>`
        : html`<a href="${link}">${label}</a>`;
    })}
  </nav>`;
}

/** What differs between the pull request and the issue list pages; the page is the same. */
export interface ItemList<R> {
  tab: 'pulls' | 'issues';
  /** The states offered, `all` last. */
  states: readonly StateFilter[];
  /** The list's name as a title ("Pull requests") and in a sentence ("pull requests"). */
  title: string;
  noun: string;
  counts(site: Site, repo: RepoTarget): Promise<Record<string, number>>;
  rows(site: Site, repo: RepoTarget, state: StateFilter, limit: number, offset: number): Promise<R[]>;
  /** One item's table row; `short` its short id (knotless-core's `shortIds`, as the CLI lists it). */
  row(repo: RepoTarget, item: R, short: string): SafeHtml;
  /** What follows the list (the new issue form). */
  foot?: (repo: RepoTarget) => SafeHtml;
}

/**
 * The page `/<owner>/<repo>/<tab>` of `list`: a repository's pull requests or issues, open ones
 * unless `?state=` says.
 */
export function itemListPage<R extends { rkey: string }>(
  list: ItemList<R>,
): (site: Site, repo: RepoTarget, rawState: string | null, pageNo: number) => Promise<string> {
  return async (site, repo, rawState, pageNo) => {
    const state = stateOf(rawState, list.states);
    const counts = await list.counts(site, repo);
    const rows = await list.rows(site, repo, state, FORGE_PER_PAGE, (pageNo - 1) * FORGE_PER_PAGE);
    const shorts = await site.index.forge.shortIds(list.tab, repo.did, repo.name);
    const total = state === 'all' ? Object.values(counts).reduce((a, b) => a + b, 0) : (counts[state] ?? 0);
    const self = href(repo.owner, repo.name, list.tab);
    const table =
      rows.length === 0
        ? html`<p class="muted">No ${state === 'all' ? '' : `${state} `}${list.noun}.</p>`
        : html`<div class="box">
            <table class="list">
              <caption class="sr">
                ${list.title}
              </caption>
              ${rows.map((r) => list.row(repo, r, shorts.get(r.rkey) ?? r.rkey))}
            </table>
          </div>`;
    return page(
      `${list.title} · ${repo.owner}/${repo.name}`,
      html`${repoHeader(repo, undefined, list.tab)} ${stateNav(self, state, counts, list.states)} ${table}
      ${pager(pageNo, Math.max(1, Math.ceil(total / FORGE_PER_PAGE)), (p) => `${self}?state=${state}&page=${p}`)}
      ${list.foot?.(repo) ?? ''}`,
    );
  };
}

/** Text someone wrote in a record, as Markdown (raw HTML off, images from elsewhere as links). */
export function userText(text: string | null): SafeHtml {
  if (text === null || text.trim() === '') return html`<p class="muted">No description.</p>`;
  return html`<div class="readme">${renderMarkdown(text)}</div>`;
}

/** The comments on a pull request or issue, oldest first; a review comment names its round. */
export function commentList(comments: CommentRow[], roundLink?: (round: number) => string): SafeHtml {
  return html`<h2>Comments (${comments.length})</h2>
    ${comments.length === 0 ? html`<p class="muted">No comments yet.</p>` : ''}
    ${comments.map(
      (c) =>
        html`<article class="box comment" id="c-${c.rkey}">
          <div class="head">
            ${authorLink(c.did, c.handle)} <span class="muted">commented ${when(c.created_at)}</span>
            ${
              c.round === null
                ? ''
                : roundLink === undefined
                  ? html` <span class="pill">round ${c.round}</span>`
                  : html` <a class="pill" href="${roundLink(Number(c.round))}">round ${c.round}</a>`
            }
            ${c.path === null ? '' : html` <span class="muted">on <span class="mono">${c.path}</span> line ${c.line}</span>`}
          </div>
          ${userText(c.body)}
        </article>`,
    )}`;
}

/** The owner's repository page path pieces. */
export function repoBase(repo: RepoTarget): string[] {
  return [repo.owner, repo.name];
}

/** The DID an author segment of a URL names (a handle or a DID). */
export async function authorDid(site: Site, actor: string): Promise<string> {
  if (actor.startsWith('did:')) return actor;
  const owner = await site.index.owner(actor);
  if (owner === undefined) throw new HttpError(404, `No account ${actor} is known here.`);
  return owner.did;
}

/** Quotes a word for a POSIX shell when it needs it, so a copied command runs as shown. */
export function shellWord(s: string): string {
  return /^[A-Za-z0-9._/:@=+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}
