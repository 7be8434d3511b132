import type http from 'node:http';
import { spawnGit } from '../../mirror/history.ts';
import { listRefs, log } from '../../mirror/read.ts';
import { escapeHtml, href } from '../html.ts';
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

// eslint-disable-next-line no-control-regex -- these are exactly the characters to replace
export const NOT_XML = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g;

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
  // XML 1.0 has no place for most control characters, which a commit message may hold.
  const x = (text: string) => escapeHtml(text.replace(NOT_XML, '\ufffd'));
  const repoUrl = site.publicUrl + href(repo.owner, repo.name);
  const updated =
    commits[0]?.date === undefined ? new Date(0).toISOString() : new Date(commits[0].date).toISOString();
  const entries = commits.map((c) => {
    const url = `${site.publicUrl}${href(repo.owner, repo.name, 'commit', c.oid)}`;
    return (
      `<entry><id>${x(url)}</id><title>${x(c.subject)}</title><link href="${x(url)}"/>` +
      `<updated>${x(new Date(c.date).toISOString())}</updated><author><name>${x(c.author)}</name></author>` +
      `<content type="text">${x(c.body === '' ? c.subject : `${c.subject}\n\n${c.body}`)}</content></entry>`
    );
  });
  const feed =
    '<?xml version="1.0" encoding="utf-8"?>\n' +
    `<feed xmlns="http://www.w3.org/2005/Atom"><id>${x(`${repoUrl}/atom/${at.ref}`)}</id>` +
    `<title>${x(`${repo.owner}/${repo.name}: commits on ${at.ref}`)}</title>` +
    `<link href="${x(repoUrl)}"/><updated>${updated}</updated>${entries.join('')}</feed>\n`;
  if (res.headersSent) return;
  res
    .writeHead(200, {
      'content-type': 'application/atom+xml; charset=utf-8',
      'x-content-type-options': 'nosniff',
    })
    .end(feed);
}
