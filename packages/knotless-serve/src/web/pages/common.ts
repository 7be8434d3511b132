import fs from 'node:fs';
import type { DatedRef } from '../../mirror/history.ts';
import { mirrorRefs } from '../../mirror/ref-cache.ts';
import { resolveCommit } from '../../mirror/read.ts';
import { html, href, pathHref, type SafeHtml } from '../html.ts';
import { HttpError, type RepoTarget } from '../site.ts';
import { viewer } from '../viewer.ts';

/** A ref (or commit id) and a path inside it, split from a URL tail like `feature/x/src/a.ts`. */
export interface RefPath {
  /** What the URL said: a branch, a tag or an object id. */
  ref: string;
  oid: string;
  path: string;
}

/** Fails with 404 until the mirror exists (a repository just seen, or with no refs yet). */
export function requireMirror(repo: RepoTarget): void {
  if (!fs.existsSync(repo.gitDir)) throw new HttpError(404, 'This repository has no mirrored commits yet.');
}

/**
 * Splits a URL tail into ref and path. Branch names may contain slashes, so the longest prefix that
 * names a branch or tag wins; otherwise the first segment must be a commit id.
 */
export async function refPath(repo: RepoTarget, tail: string): Promise<RefPath> {
  requireMirror(repo);
  const segs = tail.split('/').filter(Boolean);
  const { byName } = await mirrorRefs(repo.gitDir);
  const names = { has: (n: string) => byName.has(n) && !n.startsWith('refs/') };
  for (let n = segs.length; n >= 1; n--) {
    const ref = segs.slice(0, n).join('/');
    if (!names.has(ref) && !(n === 1 && /^[0-9a-f]{7,40}$/.test(ref))) continue;
    const oid = await resolveCommit(repo.gitDir, ref);
    if (oid !== undefined) return { ref, oid, path: segs.slice(n).join('/') };
  }
  throw new HttpError(404, `No branch, tag or commit ${segs[0] ?? ''} in this repository.`);
}

/** The repository's tabs, the current one marked for readers and screen readers alike. */
export type Tab = 'code' | 'commits' | 'branches' | 'tags' | 'pulls' | 'issues' | 'settings';

/**
 * The repository's maintainers, each marked and linked to their page (by handle, else by DID):
 * they push and decide as its owner does.
 */
export function maintainersLine(maintainers: readonly { did: string; handle: string | null }[]): SafeHtml {
  if (maintainers.length === 0) return html``;
  return html`<p class="muted maintainers">
    maintainers:
    ${maintainers.map((m, i) => {
      const name = m.handle ?? m.did;
      return html`${i === 0 ? '' : ', '}<a class="who maintainer" href="${href(name)}">${name}</a>`;
    })}
  </p>`;
}

/**
 * A team's refs whose values diverged, each named with where its other values are listed, as
 * `knotless repo info` says it: the value shown is the owner's, else the first writer's by DID.
 */
export function divergedLines(diverged: RepoTarget['diverged']): SafeHtml {
  if (diverged.length === 0) return html``;
  return html`<ul class="diverged">
    ${diverged.map(
      (d) =>
        html`<li>
          diverged <code>${d.ref}</code>: also
          ${d.apart.map((a, i) => html`${i === 0 ? '' : ', '}<code>${a}</code>`)}
        </li>`,
    )}
  </ul>`;
}

/** The owner/name heading and the repository's tabs. */
export function repoHeader(repo: RepoTarget, ref?: string, tab: Tab = 'code'): SafeHtml {
  const base = [repo.owner, repo.name];
  const refTail = ref === undefined ? '' : '/' + ref.split('/').map(encodeURIComponent).join('/');
  const tabs: [Tab, string, string][] = [
    ['code', 'Code', ref === undefined ? href(...base) : href(...base, 'tree') + refTail],
    // A private repository's contents are sealed and its pull requests and issues never kept: the
    // appview has nothing to show under those tabs, so it offers none.
    ...(repo.private
      ? []
      : ([
          ['commits', 'Commits', href(...base, 'commits') + refTail],
          ['branches', 'Branches', href(...base, 'branches')],
          ['tags', 'Tags', href(...base, 'tags')],
          ['pulls', 'Pull requests', href(...base, 'pulls')],
          ['issues', 'Issues', href(...base, 'issues')],
        ] as [Tab, string, string][])),
    // Only its owner manages a repository's settings (its webhooks).
    ...(viewer()?.did === repo.did
      ? [['settings', 'Settings', href(...base, 'settings', 'webhooks')] as [Tab, string, string]]
      : []),
  ];
  return html`<h1>
      <a href="${href(repo.owner)}">${repo.owner}</a> / <a href="${href(...base)}">${repo.name}</a>
    </h1>
    ${
      repo.forkOf === null
        ? ''
        : html`<p class="muted">
            forked from
            <a class="who" href="${href(repo.forkOf.owner, repo.forkOf.name)}"
              >${repo.forkOf.owner}/${repo.forkOf.name}</a
            >
          </p>`
    }
    ${repo.description === null ? '' : html`<p class="muted">${repo.description}</p>`}
    ${maintainersLine(repo.maintainers)} ${divergedLines(repo.diverged)}
    <nav class="tabs" aria-label="Repository">
      ${tabs.map(([id, label, link]) =>
        id === tab
          ? html`<a href="${link}" aria-current="page">${label}</a>`
          : html`<a href="${link}">${label}</a>`,
      )}
    </nav>`;
}

/**
 * A branch and tag switcher without script: a <details> list of the most recent of each, with
 * links to the same view (tree, blob, commits) at the other ref, and to the full lists.
 */
export function refSwitcher(
  repo: RepoTarget,
  current: string,
  refs: { branches: DatedRef[]; tags: DatedRef[] },
  link: (ref: string) => string,
): SafeHtml {
  const base = [repo.owner, repo.name];
  const list = (items: DatedRef[], prefix: string, more: string, total: number) =>
    html`<ul>
      ${items.slice(0, SWITCHER_MAX).map((r) => {
        const n = r.name.slice(prefix.length);
        return html`<li>
          <a href="${link(n)}" ${n === current ? html`aria-current="true"` : ''}>${n}</a>
        </li>`;
      })}
      ${total > SWITCHER_MAX ? html`<li><a href="${more}">All ${total}…</a></li>` : ''}
    </ul>`;
  return html`<details class="switch">
    <summary><span class="muted">ref:</span> <span class="mono">${current}</span></summary>
    <div class="menu">
      <div class="muted">Branches</div>
      ${list(refs.branches, 'refs/heads/', href(...base, 'branches'), refs.branches.length)}
      ${
        refs.tags.length === 0
          ? ''
          : html`<div class="muted">Tags</div>
              ${list(refs.tags, 'refs/tags/', href(...base, 'tags'), refs.tags.length)}`
      }
    </div>
  </details>`;
}

/** Refs listed in a switcher; the branches and tags pages list them all. */
const SWITCHER_MAX = 30;

/** Breadcrumbs for a path inside a ref: each directory a link to its tree. */
export function crumbs(repo: RepoTarget, ref: string, path: string): SafeHtml {
  const parts = path.split('/').filter(Boolean);
  const base = [repo.owner, repo.name];
  return html`<div class="crumbs mono">
    <a href="${pathHref([...base, 'tree'], ref)}">${repo.name}</a>${parts.map(
      (p, i) =>
        html` /
          <a href="${pathHref([...base, 'tree'], `${ref}/${parts.slice(0, i + 1).join('/')}`)}">${p}</a>`,
    )} <span class="pill">${ref}</span>
  </div>`;
}

/** A short commit id. */
export function short(oid: string): string {
  return oid.slice(0, 8);
}

/** A short commit id as a link, the full id a click away in its title. */
export function commitLink(repo: RepoTarget, oid: string): SafeHtml {
  return html`<a class="mono" href="${href(repo.owner, repo.name, 'commit', oid)}" title="${oid}"
    >${short(oid)}</a
  >`;
}
