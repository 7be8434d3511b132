import { collect, Memo, spawnGit } from '../../mirror/history.ts';
import { log, pathType, readBlob } from '../../mirror/read.ts';
import { html, href, page, pathHref, when, type SafeHtml } from '../html.ts';
import { HttpError, type Site, type RepoTarget } from '../site.ts';
import { commitLink, crumbs, refPath, repoHeader } from './common.ts';
import { commitList } from './commits.ts';
import { lineCount, MAX_LINES } from './blob.ts';

const PER_PAGE = 50;
/** Blame of a commit's file never changes: the last ones made are kept (files are at most 256 KiB). */
const blames = new Memo<ReturnType<typeof parseBlame>>(32);
/** Largest file blamed: blame walks history line by line, the costliest view there is. */
const MAX_BLAME = 256 * 1024;

/** The commits that changed a file or directory, newest first, 50 a page. */
export async function historyPage(
  _site: Site,
  repo: RepoTarget,
  tail: string,
  pageNo: number,
): Promise<string> {
  const at = await refPath(repo, tail);
  if ((await pathType(repo.gitDir, at.oid, at.path)) === undefined)
    throw new HttpError(404, `No file or directory ${at.path} at ${at.ref}.`);
  const commits = await log(repo.gitDir, at.oid, PER_PAGE + 1, (pageNo - 1) * PER_PAGE, at.path);
  const self = pathHref([repo.owner, repo.name, 'history'], tail);
  return page(
    `History of ${at.path || repo.name} at ${at.ref}`,
    html`${repoHeader(repo, at.ref, 'commits')}${crumbs(repo, at.ref, at.path)}
      <h2>History of <span class="mono">${at.path || '/'}</span></h2>
      ${commits.length === 0 ? html`<p class="muted">No commits.</p>` : commitList(repo, commits.slice(0, PER_PAGE))}
      <nav class="pager" aria-label="Pages">
        ${pageNo > 1 ? html`<a href="${self}?page=${pageNo - 1}">← Newer</a>` : ''}
        ${commits.length > PER_PAGE ? html`<a href="${self}?page=${pageNo + 1}">Older →</a>` : ''}
      </nav>`,
  );
}

interface BlameLine {
  oid: string;
  line: number;
  text: string;
}

/** `git blame --porcelain` output: each line's commit, and each commit's summary and time once. */
function parseBlame(out: string): {
  lines: BlameLine[];
  commits: Map<string, { summary: string; time: string }>;
} {
  const lines: BlameLine[] = [];
  const commits = new Map<string, { summary: string; time: string }>();
  let cur: { oid: string; line: number } | undefined;
  for (const l of out.split('\n')) {
    if (l.startsWith('\t')) {
      if (cur !== undefined) lines.push({ ...cur, text: l.slice(1) });
      continue;
    }
    const h = /^([0-9a-f]{40}) \d+ (\d+)/.exec(l);
    if (h !== null) {
      cur = { oid: h[1]!, line: Number(h[2]) };
      if (!commits.has(h[1]!)) commits.set(h[1]!, { summary: '', time: '' });
      continue;
    }
    const c = cur === undefined ? undefined : commits.get(cur.oid);
    if (c === undefined) continue;
    if (l.startsWith('summary ')) c.summary = l.slice(8);
    else if (l.startsWith('author-time ')) c.time = new Date(Number(l.slice(12)) * 1000).toISOString();
  }
  return { lines, commits };
}

/** Each line of a file with the commit that last changed it. */
export async function blamePage(_site: Site, repo: RepoTarget, tail: string): Promise<string> {
  const at = await refPath(repo, tail);
  if ((await pathType(repo.gitDir, at.oid, at.path)) !== 'blob')
    throw new HttpError(404, `No file ${at.path} at ${at.ref}.`);
  const base = [repo.owner, repo.name];
  let body: SafeHtml;
  // One read: the content when within the limit (readBlob leaves it out past `max`).
  const { content } = await readBlob(repo.gitDir, at.oid, at.path, MAX_BLAME);
  if (content === undefined || lineCount(content) > MAX_LINES)
    body = html`<p class="pad muted">This file is too large to blame here; clone to run git blame.</p>`;
  else {
    const { lines, commits } = await blames.through(`${repo.gitDir}\0${at.oid}\0${at.path}`, async () =>
      parseBlame(await collect(spawnGit(repo.gitDir, ['blame', '--porcelain', at.oid, '--', at.path]))),
    );
    body = html`<table class="code blame">
      ${lines.map((l, i) => {
        const c = commits.get(l.oid);
        const first = i === 0 || lines[i - 1]!.oid !== l.oid;
        return html`<tr class="${first ? 'b-first' : ''}">
          <td class="b-who">
            ${
              first && c !== undefined
                ? html`${commitLink(repo, l.oid)} <span class="muted">${when(c.time)}</span>
                    <span class="b-sum">${c.summary}</span>`
                : ''
            }
          </td>
          <td class="n" id="L${l.line}">${l.line}</td>
          <td>${l.text}</td>
        </tr>`;
      })}
    </table>`;
  }
  return page(
    `Blame of ${at.path} at ${at.ref}`,
    html`${repoHeader(repo, at.ref)}${crumbs(repo, at.ref, at.path)}
      <div class="box">
        <div class="head bar">
          <span class="mono">${at.path.split('/').pop()}</span><span class="grow"></span>
          <a href="${pathHref([...base, 'blob'], tail)}">File</a>
          <a href="${pathHref([...base, 'history'], tail)}">History</a>
          <a href="${href(...base, 'commit', at.oid)}">Commit</a>
        </div>
        ${body}
      </div>`,
  );
}
