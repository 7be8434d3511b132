import type http from 'node:http';
import path from 'node:path';
import { REPO_COLLECTION, isValidRepoName, serveHttpBackend } from 'knotless-core';
import { XrpcError } from 'knotless-core/xrpc/client';
import { CATCHING_UP } from '../mirror/ready.ts';
import { repoRecordOf } from '../model/records.ts';
import { findRepo } from './route-table.ts';
import { HttpError, type RepoTarget, type Site } from './site.ts';

/**
 * What a plain-HTTP clone of a private repository is told, with 403: its packs are encrypted for
 * its members, so the appview holds nothing to serve, and a member clones it through the helper.
 */
export function privateRepository(owner: string, name: string): HttpError {
  return new HttpError(
    403,
    `${owner}/${name} is private (encrypted for its members), so this appview cannot serve it; a member clones it with git clone knotless://${owner}/${name}`,
  );
}

/**
 * The repository a git request names, refused with the same sentence whether or not the index has
 * caught up with it: a private one (known so to the index, or, when the index does not know it yet,
 * to its owner's PDS) is refused as private, and one its owner's PDS holds that the index has not
 * seen yet is still being mirrored, not missing.
 */
export async function repoForGit(site: Site, actor: string, name: string): Promise<RepoTarget> {
  let repo: RepoTarget;
  try {
    repo = await findRepo(site, actor, name);
  } catch (err) {
    if (!(err instanceof HttpError) || err.status !== 404 || !isValidRepoName(name)) throw err;
    const owner = await site.index.owner(actor);
    if (owner === undefined) throw err;
    const record = await ownersRecord(site, owner.did, name);
    if (record === undefined) throw err;
    if (repoRecordOf(record).private === true) throw privateRepository(actor, name);
    throw new HttpError(503, CATCHING_UP);
  }
  if (repo.private) throw privateRepository(actor, name);
  return repo;
}

/** The repository record `name` in its owner's PDS, or undefined when the PDS holds none. */
async function ownersRecord(site: Site, did: string, name: string): Promise<unknown> {
  const client = await site.mirror.ownerClient(did);
  try {
    const got = await client.query<{ value?: unknown }>('com.atproto.repo.getRecord', {
      repo: did,
      collection: REPO_COLLECTION,
      rkey: name,
    });
    return got.value;
  } catch (err) {
    if (err instanceof XrpcError && (err.status === 404 || err.error === 'RecordNotFound')) return undefined;
    throw err;
  }
}

/**
 * Serves one mirror read-only over git's smart HTTP protocol (knotless's `git http-backend` bridge).
 * Pushes are refused before git is started; http-backend would refuse them too, as receive-pack is
 * off. When `signal` aborts (the request's time limit, or the reader leaving), git is killed and
 * nothing more is written.
 */
export function serveGit(
  gitDir: string,
  service: string,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  query: string,
  signal?: AbortSignal,
): void {
  if (service === 'git-receive-pack' || /service=git-receive-pack/.test(query)) {
    res
      .writeHead(403, { 'content-type': 'text/plain' })
      .end('This appview is read-only: push with knotless://\n');
    return;
  }
  serveHttpBackend(req, res, {
    projectRoot: path.dirname(gitDir),
    pathInfo: `/${path.basename(gitDir)}/${service}`,
    query,
    receivePack: false,
    ...(signal === undefined ? {} : { signal }),
  });
}
