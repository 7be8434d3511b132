import type http from 'node:http';
import { spawnGit } from '../../mirror/history.ts';
import { listRefs, log } from '../../mirror/read.ts';
import { atomXml } from '../atom.ts';
import { href } from '../html.ts';
import { HttpError, type Site, type RepoTarget } from '../site.ts';
import { refPath, requireMirror } from './common.ts';

const FORMATS: Record<string, string> = { '.tar.gz': 'application/gzip', '.zip': 'application/zip' };

/** A name safe in a Content-Disposition header and as a directory in the archive. */
function fileSafe(s: string): string {
  return s.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[-.]+/, '') || 'archive';
}

/**
 * The same name keeping letters, digits and marks of any script, for RFC 6266's `filename*` (a
 * branch `ünï` downloads as `site-ünï.zip`, not `site-n-.zip`): percent-encoded UTF-8, and nothing
 * a file name or the header could act on.
 */
function unicodeName(s: string): string {
  return s.replace(/[^\p{L}\p{N}\p{M}._-]+/gu, '-').replace(/^[-.]+/, '') || 'archive';
}

/**
 * The tree of a ref as `.tar.gz` or `.zip` (`git archive`), streamed to the reader. The request's
 * signal kills git when the time limit passes or the reader leaves, like every other git here.
 */
export async function archive(repo: RepoTarget, tail: string, res: http.ServerResponse): Promise<void> {
  requireMirror(repo);
  const ext = Object.keys(FORMATS).find((e) => tail.endsWith(e));
  if (ext === undefined) throw new HttpError(404, 'Archives are <ref>.tar.gz or <ref>.zip.');
  const at = await refPath(repo, tail.slice(0, -ext.length));
  if (at.path !== '') throw new HttpError(404, `No branch, tag or commit ${tail.slice(0, -ext.length)}.`);
  const name = `${fileSafe(repo.name)}-${fileSafe(at.ref)}`;
  const child = spawnGit(repo.gitDir, ['archive', `--format=${ext.slice(1)}`, `--prefix=${name}/`, at.oid]);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => {
      if (!res.headersSent)
        res.writeHead(200, {
          'content-type': FORMATS[ext]!,
          'content-disposition': `attachment; filename="${name}${ext}"; filename*=UTF-8''${encodeURIComponent(`${unicodeName(repo.name)}-${unicodeName(at.ref)}${ext}`)}`,
          'x-content-type-options': 'nosniff',
        });
    });
    child.stdout!.pipe(res, { end: false });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) {
        res.end();
        resolve();
      } else if (res.headersSent) {
        // Half an archive must not look like a whole one: cut the connection.
        res.destroy();
        resolve();
      } else reject(new Error(`git archive exited with ${code}`));
    });
  });
}

/** Entries of the Atom feed. */
const FEED_ENTRIES = 30;

/** An Atom feed of a ref's commits (default branch when `tail` is empty). */
export async function atomFeed(
  site: Site,
  repo: RepoTarget,
  tail: string,
  res: http.ServerResponse,
): Promise<void> {
  requireMirror(repo);
  if (tail === '') {
    const { head, branches } = await listRefs(repo.gitDir);
    tail = (head ?? branches[0]?.name ?? 'refs/heads/main').replace(/^refs\/heads\//, '');
  }
  const at = await refPath(repo, tail);
  const commits = await log(repo.gitDir, at.oid, FEED_ENTRIES);
  const repoUrl = site.publicUrl + href(repo.owner, repo.name);
  const updated =
    commits[0]?.date === undefined ? new Date(0).toISOString() : new Date(commits[0].date).toISOString();
  const feed = atomXml({
    id: `${repoUrl}/atom/${at.ref}`,
    title: `${repo.owner}/${repo.name}: commits on ${at.ref}`,
    link: repoUrl,
    updated,
    entries: commits.map((c) => {
      const url = `${site.publicUrl}${href(repo.owner, repo.name, 'commit', c.oid)}`;
      return {
        id: url,
        title: c.subject,
        link: url,
        updated: new Date(c.date).toISOString(),
        author: c.author,
        content: c.body === '' ? c.subject : `${c.subject}\n\n${c.body}`,
      };
    }),
  });
  if (res.headersSent) return;
  res
    .writeHead(200, {
      'content-type': 'application/atom+xml; charset=utf-8',
      'x-content-type-options': 'nosniff',
    })
    .end(feed);
}
