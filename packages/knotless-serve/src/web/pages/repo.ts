import { indexedVerdict } from '../checks.ts';
import { checksBadge } from './checks-view.ts';
import fs from 'node:fs';
import { mirrorRefs } from '../../mirror/ref-cache.ts';
import { commitCount, lastCommits, type DatedRef, type LastCommit } from '../../mirror/history.ts';
import { listTree, log, pathType, readBlob, symbolicHead, type TreeEntry } from '../../mirror/read.ts';
import { copyField, html, href, humanSize, page, pathHref, when, type SafeHtml } from '../html.ts';
import { renderMarkdown } from '../render.ts';
import { HttpError, type Site, type RepoTarget } from '../site.ts';
import { commitLink, crumbs, refPath, refSwitcher, repoHeader, short } from './common.ts';
import { starForm } from './forge-forms.ts';
import { viewer } from '../viewer.ts';

const README = /^readme(\.(md|markdown|txt))?$/i;

function treeTable(
  repo: RepoTarget,
  ref: string,
  path: string,
  entries: TreeEntry[],
  last: Map<string, LastCommit>,
): SafeHtml {
  const base = [repo.owner, repo.name];
  const join = (name: string) => (path === '' ? name : `${path}/${name}`);
  return html`<div class="box">
    <table class="list tree">
      <caption class="sr">
        Files at ${ref}${path === '' ? '' : ` in ${path}`}
      </caption>
      ${entries.map((e) => {
        const kind = e.type === 'tree' ? 'tree' : 'blob';
        const link =
          e.type === 'commit'
            ? html`${e.name} <span class="muted">@ ${short(e.oid)}</span>`
            : html`<a href="${pathHref([...base, kind], `${ref}/${join(e.name)}`)}"
                >${e.name}${e.type === 'tree' ? '/' : ''}</a
              >`;
        const c = last.get(e.name);
        return html`<tr>
          <td class="mono name">${link}</td>
          <td class="msg">
            ${
              c === undefined
                ? ''
                : html`<a class="muted" href="${href(...base, 'commit', c.oid)}" title="${c.oid}"
                    >${c.subject}</a
                  >`
            }
          </td>
          <td class="muted nowrap">${c === undefined ? '' : when(c.date)}</td>
          <td class="muted nowrap num">${e.size === undefined ? '' : humanSize(e.size)}</td>
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
  const base = [repo.owner, repo.name];
  const body = /\.(md|markdown)$/i.test(file.name)
    ? renderMarkdown(text, {
        remote: (url) => site.images.url(url),
        local: (file) => pathHref([...base, 'raw'], `${ref}/${file}`),
        link: (file) => pathHref([...base, 'blob'], file === '' ? ref : `${ref}/${file}`),
        dir: path,
      })
    : html`<pre>${text}</pre>`;
  return html`<div class="box">
    <div class="head mono">${file.name}</div>
    <div class="readme">${body}</div>
  </div>`;
}

/**
 * The clone commands, first on the page: the knotless URL (push too) and plain git from the
 * appview, labelled by the scheme the appview's public URL really has.
 */
function cloneBox(site: Site, repo: RepoTarget): SafeHtml {
  const httpUrl = `${site.publicUrl}/${repo.owner}/${repo.name}`;
  const scheme = httpUrl.startsWith('https:') ? 'HTTPS' : 'HTTP (unencrypted)';
  return html`<details class="clone" open>
    <summary>Clone</summary>
    <div class="pad">
      ${copyField('knotless (clone and push)', `git clone knotless://${repo.owner}/${repo.name}`)}
      ${copyField(`plain git over ${scheme}, read-only`, `git clone ${httpUrl}`)}
    </div>
  </details>`;
}

/** Switcher, latest commit, tree with each entry's last commit, README: the Code view of a directory. */
async function codeView(
  site: Site,
  repo: RepoTarget,
  ref: string,
  oid: string,
  path: string,
  refs: { branches: DatedRef[]; tags: DatedRef[] },
  extra: SafeHtml,
): Promise<SafeHtml> {
  const entries = await listTree(repo.gitDir, oid, path);
  const [[latest], last] = await Promise.all([
    log(repo.gitDir, oid, 1),
    lastCommits(
      repo.gitDir,
      oid,
      path,
      entries.map((e) => e.name),
    ),
  ]);
  const base = [repo.owner, repo.name];
  const switcher = refSwitcher(repo, ref, refs, (r) =>
    pathHref([...base, 'tree'], path === '' ? r : `${r}/${path}`),
  );
  return html`<div class="bar">
      ${switcher} ${extra}
      <span class="grow"></span>
      <a href="${pathHref([...base, 'archive'], `${ref}.tar.gz`)}">.tar.gz</a>
      <a href="${pathHref([...base, 'archive'], `${ref}.zip`)}">.zip</a>
    </div>
    ${path === '' ? '' : crumbs(repo, ref, path)}
    ${
      latest === undefined
        ? ''
        : html`<p class="latest">
            ${commitLink(repo, latest.oid)} ${latest.subject}
            <span class="muted">${latest.author}, ${when(latest.date)}</span>
            ${checksBadge(repo, latest.oid, await indexedVerdict(site, repo, latest.oid, undefined))}
          </p>`
    }
    ${treeTable(repo, ref, path, entries, last)} ${await readme(site, repo, ref, oid, path, entries)}`;
}

/**
 * What the index's records of the owner were checked against: the newest revision of the owner's
 * signed repository verified here (by a backfill or on the event stream), and when; said plainly
 * when there is none, since then nothing shown is proved to be the owner's.
 */
async function verifiedLine(site: Site, repo: RepoTarget): Promise<SafeHtml> {
  const v = await site.index.verified(repo.did);
  if (v === undefined)
    return html`<p class="verified unverified">
      Not verified: this appview has not checked the owner's signed repository, so what it shows of this
      repository is not proved to be the owner's.
    </p>`;
  return html`<p class="verified">
    Verified against the owner's signing key: the owner's repository at revision
    <code>${v.rev}</code>, checked ${when(v.at)}.
  </p>`;
}

async function emptyPage(site: Site, repo: RepoTarget): Promise<string> {
  return page(
    repo.name,
    html`${repoHeader(repo)} ${await verifiedLine(site, repo)} ${cloneBox(site, repo)}
      <p>Empty repository.</p>`,
  );
}

/** A repository's front page: clone commands, counts, default branch tree and README. */
export async function repoPage(site: Site, repo: RepoTarget): Promise<string> {
  if (repo.private)
    return page(
      repo.name,
      html`${repoHeader(repo)}
        <p>
          A private repository: its contents are encrypted for its members, and nothing of them is shown here.
        </p>`,
    );
  if (!fs.existsSync(repo.gitDir)) return emptyPage(site, repo);
  const refs = await mirrorRefs(repo.gitDir);
  const head = await headBranch(repo.gitDir, refs.branches);
  if (head === undefined) return emptyPage(site, repo);
  const branch = head.name.slice('refs/heads/'.length);
  const base = [repo.owner, repo.name];
  const commits = await commitCount(repo.gitDir, head.oid);
  const plural = (n: number, one: string, many = `${one}s`) =>
    `${n.toLocaleString('en')} ${n === 1 ? one : many}`;
  const forge = await site.index.forge.counts(repo.did, repo.name);
  const v = viewer();
  const stars = starForm(
    repo,
    await site.index.forge.stars(repo.did, repo.name),
    v !== undefined && (await site.index.forge.starsBy(v.did, repo.did, repo.name)).length > 0,
  );
  const counts = html`<span class="counts">
    <a href="${pathHref([...base, 'commits'], branch)}">${plural(commits, 'commit')}</a>
    <a href="${href(...base, 'branches')}">${plural(refs.branches.length, 'branch', 'branches')}</a>
    <a href="${href(...base, 'tags')}">${plural(refs.tags.length, 'tag')}</a>
    <a href="${href(...base, 'pulls')}">${plural(forge.pulls['open'] ?? 0, 'open pull request')}</a>
    <a href="${href(...base, 'issues')}">${plural(forge.issues['open'] ?? 0, 'open issue')}</a>
    ${stars}
  </span>`;
  // The owner's ref table gives no listing now (db/ref-tables.ts): readers are told the refs shown
  // are the last ones read whole, and why, rather than shown them as current.
  const problem = await site.index.refTableProblem(repo.did, repo.name);
  const stale =
    problem === undefined
      ? ''
      : html`<p class="error">
          This repository's ref table gives no listing now, so its refs are shown as last read whole:
          ${problem}
        </p>`;
  return page(
    `${repo.owner}/${repo.name}`,
    html`${repoHeader(repo)} ${stale} ${await verifiedLine(site, repo)} ${cloneBox(site, repo)}
    ${await codeView(site, repo, branch, head.oid, '', refs, counts)}`,
    {
      description: repo.description ?? `${repo.name}, a git repository of ${repo.owner} on knotless`,
      feed: href(...base, 'atom'),
    },
  );
}

/** HEAD's branch, else the most recent one. */
async function headBranch(dir: string, branches: DatedRef[]): Promise<DatedRef | undefined> {
  const head = await symbolicHead(dir);
  return branches.find((b) => b.name === head) ?? branches[0];
}

/** A directory at a ref. */
export async function treePage(site: Site, repo: RepoTarget, tail: string): Promise<string> {
  const at = await refPath(repo, tail);
  const type = await pathType(repo.gitDir, at.oid, at.path);
  if (type !== 'tree') throw new HttpError(404, `No directory ${at.path} at ${at.ref}.`);
  const refs = await mirrorRefs(repo.gitDir);
  return page(
    `${at.path || repo.name} at ${at.ref}`,
    html`${repoHeader(repo, at.ref)}${await codeView(site, repo, at.ref, at.oid, at.path, refs, html``)}`,
  );
}
