import { lastTableRead, readRefTable, readRepoRefs, type TableRead } from 'knotless-core/records/read-refs';
import { applyRefUpdates, type RefUpdate } from 'knotless-core/records/ref-table';
import { rewriteTable, writeRefTable } from 'knotless-core/records/table-write';
import type { SessionAuthorizer } from '../auth/store.ts';
import type { BlobCache } from 'knotless-core/cache/blob-cache';
import type { Context } from '../context.ts';
import { KnotlessError, isKnotlessError } from 'knotless-core/errors';
import type { Identity } from 'knotless-core/identity/resolver';
import { blobMatchesCid } from 'knotless-core/records/cid';
import { MAX_BLOB_PART_BYTES, mapLimit } from 'knotless-core/packs/transfer';
import { forkPrivate } from 'knotless-core/private/fork';
import { cacheRing } from 'knotless-core/private/ring';
import type { BlobRef } from 'knotless-core/records/ref-record';
import { SwapConflict, refsByName, type RemoteRef, type RemoteRepo } from 'knotless-core/records/remote-repo';
import { safeText } from 'knotless-core/text/terminal';
import { XrpcError, generalFailure } from 'knotless-core/xrpc/client';
import { pdsRefusal } from 'knotless-core/xrpc/pds-errors';
import { PACK_MIME, repoUri } from './records.ts';

/**
 * Copies a blob into the session's account. A record may only reference blobs of its own account,
 * so a fork stores its own copy of every pack blob; uploading the same bytes gives the same CID.
 */
async function copyBlob(
  ctx: Context,
  auth: SessionAuthorizer,
  source: Identity,
  blob: BlobRef,
  cache: BlobCache,
): Promise<void> {
  const cid = blob.ref.$link;
  let bytes = cache.get(cid);
  if (bytes === undefined) {
    if (blob.size > MAX_BLOB_PART_BYTES)
      throw new KnotlessError(
        'corrupt-remote',
        `A blob of the repository claims ${blob.size} bytes; nothing was copied.`,
      );
    try {
      bytes = await ctx
        .client(source.pds)
        .queryBytes('com.atproto.sync.getBlob', { did: source.did, cid }, blob.size);
    } catch (err) {
      const kind = err instanceof XrpcError ? pdsRefusal(err) : undefined;
      if (kind === 'blob-missing' || kind === 'not-found')
        throw new KnotlessError(
          'remote-changed',
          'The repository changed while it was copied (a push or compaction replaced its packs); fork again.',
          {
            cause: err,
          },
        );
      throw generalFailure(err, 'downloading a pack to copy');
    }
    if (!blobMatchesCid(bytes, cid))
      throw new KnotlessError(
        'corrupt-remote',
        `A blob does not match its CID ${safeText(cid)}; nothing was copied.`,
      );
    cache.put(cid, bytes);
  }
  try {
    const res = await ctx
      .client(auth.session.pds, auth)
      .procedure<{ blob: BlobRef }>('com.atproto.repo.uploadBlob', bytes, {
        contentType: blob.mimeType || PACK_MIME,
      });
    if (res.blob.ref.$link !== cid)
      throw new KnotlessError(
        'pds-error',
        `Your PDS stored a copied blob under another CID (${safeText(res.blob.ref.$link)}); nothing was written.`,
      );
  } catch (err) {
    throw generalFailure(err, 'copying a pack into your account');
  }
}

/**
 * Forks `source/name` into the session's account as `newName`: the repository record (with
 * `forkOf`), then every ref record, their blobs copied first so that no record ever names a blob
 * the account lacks. Refs are created in batches like a mirror push. An original whose refs are in a
 * ref table is forked into a table of the fork's own, written once with every ref and HEAD. Run
 * again on a fork of the same original that stopped half way, it copies the refs the fork lacks.
 * Returns the number of refs copied (HEAD, copied too, is not a ref anyone counts: as `repo info`).
 */
export async function forkRepo(
  ctx: Context,
  auth: SessionAuthorizer,
  source: Identity,
  name: string,
  newName: string,
  cache: BlobCache,
  warn: (message: string) => void,
): Promise<number> {
  const records = ctx.repoRecords();
  const original = await records.get(source, name);
  const from = ctx.remoteRepo(source, name, warn);
  const refs = await readRepoRefs(from);
  const usable = refs.filter((r) => !refsByName(refs).contested.has(r.record.ref));
  const mine = { did: auth.session.did, handle: auth.session.handle, pds: auth.session.pds };
  const to = ctx.remoteRepo(mine, newName, warn);
  const forkOf = repoUri(source.did, name);
  let have = new Set<string>();
  let exists: KnotlessError | undefined;
  // A private original's fork is private to the same members, under the same keys.
  const priv =
    original.private === undefined
      ? undefined
      : await forkPrivate(ctx.config.configDir, ctx.client(source.pds), source, name);
  try {
    await records.create(auth, newName, original.description, forkOf, priv?.field);
    if (priv !== undefined) cacheRing(ctx.config.configDir, mine.did, newName, priv.ring);
  } catch (err) {
    // A fork that stopped half way (its record written, not every ref) is finished, not refused.
    if (!isKnotlessError(err, 'repo-exists') || (await records.get(mine, newName)).forkOf !== forkOf)
      throw err;
    exists = err;
  }
  // The fork's refs go where the original's are: into a table of its own when the original has one
  // (ref records would be ignored next to it), else records.
  const tabled = from.layout === 'table';
  // What the fork has is what every reader lists, not only its owner's own table: a ref a maintainer
  // of the fork pushed is there, and copying the original's value beside it, replacing nothing, would
  // make a divergence of it.
  if (exists !== undefined) have = new Set((await readRepoRefs(to)).map((r) => r.record.ref));
  const table = tabled && exists !== undefined ? lastTableRead(to) : undefined;
  const missing = usable.filter((r) => !have.has(r.record.ref));
  if (exists !== undefined && missing.length === 0) throw exists;
  const blobs = new Map<string, BlobRef>();
  for (const r of missing)
    for (const p of r.record.packs) for (const b of p.parts ?? []) blobs.set(b.ref.$link, b);
  await mapLimit([...blobs.values()], 4, (b) => copyBlob(ctx, auth, source, b, cache));
  await to.prepare();
  if (tabled) {
    await writeForkTable(to, auth, repoUri(mine.did, newName), missing, table);
    return missing.filter((r) => r.record.ref !== 'HEAD').length;
  }
  const creates = missing.map((r) => ({
    key: to.refKey(r.record.ref),
    record: { ...r.record, repo: newName, updatedAt: new Date().toISOString() },
  }));
  for (let i = 0; i < creates.length; i += 199) {
    const batch = creates.slice(i, i + 199);
    const written = await to.createRefs(auth, batch);
    for (const [j, w] of written.entries()) {
      const c = batch[j]!;
      if (w === undefined) await to.putRef(auth, c.key, c.record, null);
    }
  }
  return missing.filter((r) => r.record.ref !== 'HEAD').length;
}

/**
 * Writes the refs a fork lacks into its ref table, HEAD as its `head`: created with one write, or
 * written over the table a fork run that stopped half way left. Another run of the same fork that
 * wrote the table meanwhile is kept: the table is read again and only what it still lacks is added.
 */
async function writeForkTable(
  to: RemoteRepo,
  auth: SessionAuthorizer,
  repo: string,
  missing: RemoteRef[],
  table: TableRead | undefined,
): Promise<void> {
  const head = missing.find((r) => r.record.ref === 'HEAD')?.record.symref;
  const updates = (have: Set<string>): RefUpdate[] =>
    missing
      .filter((r) => r.record.target !== undefined && !have.has(r.record.ref))
      .map((r) => ({
        ref: r.record.ref,
        target: r.record.target!,
        packs: r.record.packs,
        ...(r.record.peeled === undefined ? {} : { peeled: r.record.peeled }),
      }));
  const init = { repo, ...(head === undefined ? {} : { head }), maintainer: false };
  if (table === undefined) {
    try {
      await writeRefTable(
        to,
        auth,
        applyRefUpdates(undefined, updates(new Set()), init, new Date()),
        undefined,
      );
      return;
    } catch (err) {
      if (!(err instanceof SwapConflict)) throw err;
    }
    table = await readRefTable(to);
    if (table === undefined)
      throw new KnotlessError(
        'remote-changed',
        `The ref table of ${to.label} changed while it was written; fork again.`,
      );
  }
  const res = await rewriteTable(to, auth, table, (read) => {
    const add = updates(new Set(read.table.refs.map((r) => r.ref)));
    if (add.length === 0 && (head === undefined || read.table.head !== undefined))
      return Promise.resolve({ kind: 'none' });
    return Promise.resolve({ kind: 'write', table: applyRefUpdates(read.table, add, init, new Date()) });
  });
  if (res.kind === 'busy')
    throw new KnotlessError(
      'remote-changed',
      `The ref table of ${to.label} kept changing while it was written; fork again.`,
    );
}
