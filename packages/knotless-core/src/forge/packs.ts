import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BlobCache } from '../cache/blob-cache.ts';
import { Mirror } from '../cache/mirror.ts';
import type { ForgeServices } from './services.ts';
import { KnotlessError } from '../errors.ts';
import { checkPackBounds } from '../git/pack-check.ts';
import { indexPack, parsePackInfo } from '../git/pack.ts';
import { GitError, runGit } from '../git/run.ts';
import type { Identity } from '../identity/resolver.ts';
import { blobMatchesCid } from '../records/cid.ts';
import { readRepoRefs } from '../records/read-refs.ts';
import { MAX_BLOB_PART_BYTES, loadPack, verifyPack } from '../packs/transfer.ts';
import type { BlobRef } from '../records/ref-record.ts';
import type { RemoteRef, RemoteRepo } from '../records/remote-repo.ts';
import { blobUploadLimit } from '../packs/server-info.ts';
import { safeText } from '../text/terminal.ts';
import { XrpcError, generalFailure, type Authorizer } from '../xrpc/client.ts';
import { pdsRefusal } from '../xrpc/pds-errors.ts';
import { PACK_MIME, type Round } from './records.ts';

/**
 * A branch of a repository as read now (its ref table's entry when it has one, else its record, for
 * compare-and-swap), or a sentence why not.
 */
export async function branchOf(remote: RemoteRepo, branch: string): Promise<RemoteRef> {
  return branchIn(remote, await readRepoRefs(remote), branch);
}

/** The branch in `refs` (a listing of `remote`), as {@link branchOf} finds it. */
export function branchIn(remote: RemoteRepo, refs: RemoteRef[], branch: string): RemoteRef {
  const found = refs.filter((r) => r.record.ref === `refs/heads/${branch}`);
  if (found.length !== 1 || found[0]!.record.target === undefined)
    throw new KnotlessError(
      'not-found',
      `${remote.label} has no branch ${safeText(branch)}; check it with \`git ls-remote knotless://${remote.label}\`.`,
    );
  return found[0]!;
}

/**
 * The two ends of a pull request's round, each read by `tip` (a branch as whoever asks holds it: the
 * PDS's record for a write, an appview's copy for a preview). `base` is the base branch of the
 * repository the pull request is proposed to, never the head repository's branch of that name: a
 * fork's own main may be far behind the repository it was forked from. `head` is the head branch.
 * A round holds what `head` reaches and `base` does not, and its diff runs from their merge base;
 * `knotless pr create`, the web's form and the compare page that previews it all measure it here.
 */
export async function roundEnds<R, T>(
  tip: (repo: R, branch: string) => Promise<T>,
  target: R,
  base: string,
  head: R,
  branch: string,
): Promise<{ base: T; head: T }> {
  const [b, h] = await Promise.all([tip(target, base), tip(head, branch)]);
  return { base: b, head: h };
}

/** Indexes a ref's packs into the cache's mirror of the repository they belong to. */
export async function syncRef(
  mirror: Mirror,
  remote: RemoteRepo,
  ref: RemoteRef,
  cache: BlobCache,
  maxObjectBytes: number,
): Promise<void> {
  await mirror.sync(ref.record.packs, (p) =>
    loadPack(remote.reader, remote.owner.did, p, cache, () => {}, maxObjectBytes),
  );
}

/**
 * Makes a new round: the head branch's commit, the target base branch's commit, and a non-thin pack
 * of everything reachable from the first and not the second, uploaded as one blob to the author's
 * PDS (the round must not depend on the head branch, which its owner may delete).
 */
export async function makeRound(
  ctx: ForgeServices,
  auth: Authorizer & { session: { pds: string } },
  target: RemoteRepo,
  base: string,
  head: RemoteRepo,
  branch: string,
  cache: BlobCache,
): Promise<Round> {
  const { base: baseRef, head: headRef } = await roundEnds(branchOf, target, base, head, branch);
  // A round's pack is a public blob: never one built from a private repository's objects.
  for (const r of [target, head]) {
    await r.prepare();
    if (r.isPrivate)
      throw new KnotlessError(
        'usage',
        `${r.label} is private, and a pull request's packs are public blobs, so knotless makes none from a private repository; push a branch to it instead.`,
      );
  }
  const mirror = new Mirror(ctx.config.cacheDir, head.owner.did, head.name);
  await syncRef(mirror, head, headRef, cache, ctx.config.maxObjectBytes);
  await syncRef(mirror, target, baseRef, cache, ctx.config.maxObjectBytes);
  const headOid = headRef.record.target!;
  const baseOid = baseRef.record.target!;
  // Not buildPack: that pack is thin, and a round's pack must stand alone (FORGE.md).
  const pack = (
    await runGit(['pack-objects', '--stdout', '--revs', '--delta-base-offset', '-q'], {
      gitDir: mirror.gitDir,
      input: `${headOid}\n^${baseOid}\n`,
    })
  ).stdout;
  const client = ctx.client(auth.session.pds, auth);
  const limit = await blobUploadLimit(client, ctx.config.cacheDir);
  if (pack.length > limit)
    throw new KnotlessError(
      'too-large',
      `The round's pack is ${pack.length} bytes, over the ${limit} your PDS takes in one blob; nothing was written.`,
    );
  let blob: BlobRef;
  try {
    ({ blob } = await client.procedure<{ blob: BlobRef }>('com.atproto.repo.uploadBlob', pack, {
      contentType: PACK_MIME,
    }));
  } catch (err) {
    throw generalFailure(err, "uploading the round's pack");
  }
  cache.put(blob.ref.$link, pack);
  return { head: headOid, base: baseOid, pack: blob, createdAt: new Date().toISOString() };
}

/**
 * A round's pack from its author's PDS (or the blob cache), checked before git sees it: the blob
 * against its CID, the pack against its own checksum, and its objects for decompression bombs.
 */
export async function loadRoundPack(
  ctx: ForgeServices,
  author: Identity,
  blob: BlobRef,
  cache: BlobCache,
): Promise<Buffer> {
  const cid = blob.ref.$link;
  let bytes = cache.get(cid);
  if (bytes === undefined) {
    if (blob.size > MAX_BLOB_PART_BYTES || blob.size < 32)
      throw new KnotlessError(
        'corrupt-remote',
        `The round's pack claims ${blob.size} bytes; it was not read.`,
      );
    try {
      bytes = await ctx
        .client(author.pds)
        .queryBytes('com.atproto.sync.getBlob', { did: author.did, cid }, blob.size);
    } catch (err) {
      const kind = err instanceof XrpcError ? pdsRefusal(err) : undefined;
      if (kind === 'blob-missing' || kind === 'not-found' || kind === 'record-missing')
        throw new KnotlessError(
          'corrupt-remote',
          `The round's pack ${safeText(cid)} is missing from ${safeText(author.handle ?? author.did)}'s PDS; the pull request cannot be read.`,
          { cause: err },
        );
      throw generalFailure(err, "downloading a round's pack");
    }
    if (!blobMatchesCid(bytes, cid))
      throw new KnotlessError(
        'corrupt-remote',
        `The round's pack does not match its CID ${safeText(cid)}; it was not used.`,
      );
    cache.put(cid, bytes);
  }
  let info: { id: string; count: number };
  try {
    info = parsePackInfo(bytes);
  } catch (err) {
    throw new KnotlessError(
      'corrupt-remote',
      `The round's pack ${safeText(cid)} is not a git pack; it was not used.`,
      {
        cause: err,
      },
    );
  }
  verifyPack({ id: info.id, size: bytes.length, count: info.count }, bytes);
  checkPackBounds(bytes, info.id, ctx.config.maxObjectBytes);
  return bytes;
}

/**
 * Checks that everything `head` reaches is in `gitDir` or reachable from `not` (`--all`: the
 * clone's refs): a hand-made round's pack can hold its commit and leave out its trees, and a branch
 * or merge on such a commit would leave a repository that git calls broken. `what` names where
 * the rest of the history comes from, for the message.
 */
export async function checkRoundComplete(
  gitDir: string,
  head: string,
  not: string[],
  what: string,
): Promise<void> {
  try {
    await runGit(['rev-list', '--objects', '--quiet', head, '--not', ...not], { gitDir });
  } catch (err) {
    if (!(err instanceof GitError)) throw err;
    throw new KnotlessError(
      'corrupt-remote',
      `The round's pack and ${what} lack objects its commit ${head} needs (${safeText(err.stderr.trim().split('\n').pop() ?? '', 200)}); nothing was written: the author can run \`knotless pr update\`.`,
      { cause: err },
    );
  }
}

/** A scratch repository for one operation, removed by `close`. */
export interface Scratch {
  gitDir: string;
  workTree: string;
  close(): void;
}

/**
 * A temporary repository that borrows the objects of `mirror` (alternates: nothing copied) and
 * holds a round's pack besides, so that a merge or a diff sees both sides without touching the
 * mirror, which holds only what records list.
 */
export async function scratchRepo(mirror: Mirror, pack: Uint8Array): Promise<Scratch> {
  const workTree = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-pr-'));
  const gitDir = path.join(workTree, '.git');
  const close = () => fs.rmSync(workTree, { recursive: true, force: true });
  try {
    await runGit(['init', '-q', workTree]);
    fs.writeFileSync(
      path.join(gitDir, 'objects', 'info', 'alternates'),
      `${path.resolve(mirror.gitDir, 'objects')}\n`,
    );
    await indexPack(pack, gitDir, false);
  } catch (err) {
    close();
    throw err;
  }
  return { gitDir, workTree, close };
}
