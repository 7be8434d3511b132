import fs from 'node:fs';
import { listRefs, resolveCommit } from '../../mirror/read.ts';
import { html, href, pathHref, type SafeHtml } from '../html.ts';
import type { RepoTarget } from '../server.ts';
import { HttpError } from '../site.ts';

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
  const { branches, tags } = await listRefs(repo.gitDir);
  const names = new Set([
    ...branches.map((b) => b.name.slice('refs/heads/'.length)),
    ...tags.map((t) => t.name.slice('refs/tags/'.length)),
  ]);
  for (let n = segs.length; n >= 1; n--) {
    const ref = segs.slice(0, n).join('/');
    if (!names.has(ref) && !(n === 1 && /^[0-9a-f]{7,40}$/.test(ref))) continue;
    const oid = await resolveCommit(repo.gitDir, ref);
    if (oid !== undefined) return { ref, oid, path: segs.slice(n).join('/') };
  }
  throw new HttpError(404, `No branch, tag or commit ${segs[0] ?? ''} in this repository.`);
}

/** The owner/name heading and the repository's tabs. */
export function repoHeader(repo: RepoTarget, ref?: string): SafeHtml {
  const base = [repo.owner, repo.name];
  const refTail = ref === undefined ? '' : '/' + ref.split('/').map(encodeURIComponent).join('/');
  return html`<h1>
      <a href="${href(repo.owner)}">${repo.owner}</a> / <a href="${href(...base)}">${repo.name}</a>
    </h1>
    ${repo.description === null ? '' : html`<p class="muted">${repo.description}</p>`}
    <nav class="crumbs">
      <a href="${href(...base)}">Code</a> · <a href="${href(...base, 'commits') + refTail}">Commits</a>
    </nav>`;
}

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
