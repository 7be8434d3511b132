import fs from 'node:fs';
import { listRefs, listTree, log, pathType, readBlob, type TreeEntry } from '../../mirror/read.ts';
import { html, href, page, pathHref, when, type SafeHtml } from '../html.ts';
import { renderMarkdown } from '../render.ts';
import type { RepoTarget } from '../server.ts';
import { HttpError, type Site } from '../site.ts';
import { crumbs, refPath, repoHeader, short } from './common.ts';

const README = /^readme(\.(md|markdown|txt))?$/i;

function treeTable(repo: RepoTarget, ref: string, path: string, entries: TreeEntry[]): SafeHtml {
  const base = [repo.owner, repo.name];
  const join = (name: string) => (path === '' ? name : `${path}/${name}`);
  return html`<div class="box">
    <table class="list">
      ${entries.map((e) => {
        const kind = e.type === 'tree' ? 'tree' : 'blob';
        const link =
          e.type === 'commit'
            ? html`${e.name} <span class="muted">@ ${short(e.oid)}</span>`
            : html`<a href="${pathHref([...base, kind], `${ref}/${join(e.name)}`)}"
                >${e.name}${e.type === 'tree' ? '/' : ''}</a
              >`;
        return html`<tr>
          <td class="mono">${link}</td>
          <td class="muted">${e.size === undefined ? '' : `${e.size} B`}</td>
        </tr>`;
      })}
    </table>
  </div>`;
}

async function readme(
  site: Site,
  repo: RepoTarget,
  ref: string,
  oid: string,
  path: string,
  entries: TreeEntry[],
): Promise<SafeHtml> {
  const file = entries.find((e) => e.type === 'blob' && README.test(e.name));
  if (file === undefined) return html``;
  const blob = await readBlob(repo.gitDir, oid, path === '' ? file.name : `${path}/${file.name}`, 512 * 1024);
  if (blob.content === undefined) return html``;
  const text = blob.content.toString('utf8');
  const body = /\.(md|markdown)$/i.test(file.name)
    ? renderMarkdown(text, {
        remote: (url) => site.images.url(url),
        local: (file) => pathHref([repo.owner, repo.name, 'raw'], `${ref}/${file}`),
        dir: path,
      })
    : html`<pre>${text}</pre>`;
  return html`<div class="box">
    <div class="head mono">${file.name}</div>
    <div class="readme">${body}</div>
  </div>`;
}

/** The clone commands: plain git from the appview, and the knotless helper. */
function cloneBox(site: Site, repo: RepoTarget): SafeHtml {
  const httpUrl = `${site.publicUrl}/${repo.owner}/${repo.name}`;
  return html`<div class="box clone">
    <div class="head">Clone</div>
    <div style="padding:.6rem .8rem">
      <label>git over HTTPS (read-only)<input readonly value="git clone ${httpUrl}" /></label>
      <label
        >with the knotless helper (push too)<input
          readonly
          value="git clone knotless://${repo.owner}/${repo.name}"
      /></label>
    </div>
  </div>`;
}

/** A repository's front page: default branch tree, README, branches, tags, clone commands. */
export async function repoPage(site: Site, repo: RepoTarget): Promise<string> {
  const header = repoHeader(repo);
  if (!fs.existsSync(repo.gitDir))
    return page(
      repo.name,
      html`${header}
        <p>Empty repository.</p>
        ${cloneBox(site, repo)}`,
    );
  const { branches, tags, head } = await listRefs(repo.gitDir);
  const headRef = branches.find((b) => b.name === head) ?? branches[0];
  if (headRef === undefined)
    return page(
      repo.name,
      html`${header}
        <p>Empty repository.</p>
        ${cloneBox(site, repo)}`,
    );
  const branch = headRef.name.slice('refs/heads/'.length);
  const entries = await listTree(repo.gitDir, headRef.oid, '');
  const [last] = await log(repo.gitDir, headRef.oid, 1);
  const base = [repo.owner, repo.name];
  const refLinks = (list: typeof branches, prefix: string) =>
    list.map((r) => {
      const n = r.name.slice(prefix.length);
      return html`<a class="pill" href="${pathHref([...base, 'tree'], n)}">${n}</a>`;
    });
  return page(
    `${repo.owner}/${repo.name}`,
    html`${header}
      <p>
        <span class="pill">${branch}</span>
        ${last === undefined ? '' : html`<a class="mono" href="${href(...base, 'commit', last.oid)}">${short(last.oid)}</a> ${last.subject} <span class="muted">${last.author}, ${when(last.date)}</span>`}
      </p>
      ${treeTable(repo, branch, '', entries)} ${await readme(site, repo, branch, headRef.oid, '', entries)}
      ${cloneBox(site, repo)}
      <h2>Branches</h2>
      <p>${refLinks(branches, 'refs/heads/')}</p>
      <h2>Tags</h2>
      <p>${tags.length === 0 ? html`<span class="muted">none</span>` : refLinks(tags, 'refs/tags/')}</p>`,
  );
}

/** A directory at a ref. */
export async function treePage(site: Site, repo: RepoTarget, tail: string): Promise<string> {
  const at = await refPath(repo, tail);
  const type = await pathType(repo.gitDir, at.oid, at.path);
  if (type !== 'tree') throw new HttpError(404, `No directory ${at.path} at ${at.ref}.`);
  const entries = await listTree(repo.gitDir, at.oid, at.path);
  return page(
    `${at.path || repo.name} at ${at.ref}`,
    html`${repoHeader(repo, at.ref)}${crumbs(repo, at.ref, at.path)}${treeTable(repo, at.ref, at.path, entries)}${await readme(site, repo, at.ref, at.oid, at.path, entries)}`,
  );
}
