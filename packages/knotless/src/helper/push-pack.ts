import { buildPack, parsePackInfo } from '../git/pack.ts';
import { inlineBytes, type PackEntry } from '../remote/ref-record.ts';
import { uploadPack } from '../remote/packs.ts';
import type { RemoteRef } from '../remote/remote-repo.ts';
import { blobUploadLimit } from '../remote/server-info.ts';
import type { Authorizer } from '../xrpc/client.ts';
import { Meter } from './progress.ts';
import type { HelperState } from './state.ts';
import type { Update } from './push-check.ts';

/** A pack travels inline in the ref record when it is at most this big… */
export const INLINE_PACK_MAX = 16 * 1024;
/** …and the record's inline packs stay within this; otherwise packs go to blobs. */
export const RECORD_INLINE_MAX = 32 * 1024;
/** A push that updates more refs than this stores its pack as a blob, not a copy in every record. */
export const INLINE_REFS_MAX = 4;

/**
 * The refs whose packs a push builds on: the updated refs' current values and, for new refs, the
 * default branch and any ref already at the new value. Only those this repository has can be used
 * (git must walk them to leave their objects out of the pack).
 */
export function baseRefs(
  state: HelperState,
  updates: Update[],
  present: (oid: string) => boolean,
): RemoteRef[] {
  const refs = state.refs ?? new Map<string, RemoteRef>();
  const bases = new Map<string, RemoteRef>();
  const add = (r: RemoteRef | undefined) => {
    if (r?.record.target !== undefined && present(r.record.target)) bases.set(r.record.ref, r);
  };
  const head = refs.get('HEAD')?.record.symref;
  for (const u of updates) {
    const current = refs.get(u.dst);
    add(current);
    if (current === undefined && head !== undefined) add(refs.get(head));
  }
  const wanted = new Set(updates.flatMap((u) => [u.oid, u.peeled]));
  for (const r of refs.values()) if (wanted.has(r.record.target)) add(r);
  return [...bases.values()];
}

/** The ordered union of pack lists, each pack once. */
export function unionPacks(lists: PackEntry[][]): PackEntry[] {
  const seen = new Map<string, PackEntry>();
  for (const list of lists) for (const p of list) if (!seen.has(p.id)) seen.set(p.id, p);
  return [...seen.values()];
}

/**
 * Builds the push's one thin pack (objects the remote lacks, deltas against what it has) and
 * returns the pack list every updated ref will carry: the base refs' packs, then the new pack.
 * Large packs, and inline packs that would overfill a record, are uploaded as blobs first — so a
 * record is only ever written once everything it lists is stored.
 */
export async function preparePacks(
  state: HelperState,
  auth: Authorizer,
  updates: Update[],
  present: (oid: string) => boolean,
): Promise<PackEntry[]> {
  const bases = baseRefs(state, updates, present);
  const tips = [...new Set(updates.map((u) => u.oid).filter((o): o is string => o !== undefined))];
  const list = unionPacks(bases.map((b) => b.record.packs));
  if (tips.length === 0) return list;
  const pack = await buildPack({
    tips,
    exclude: bases.map((b) => b.record.target!),
    progress: state.options.progress && state.options.verbosity > 0,
  });
  const info = parsePackInfo(pack);
  if (info.count > 0) list.push({ id: info.id, size: pack.length, count: info.count, inline: pack });

  const fits =
    pack.length <= INLINE_PACK_MAX &&
    updates.length <= INLINE_REFS_MAX &&
    inlineBytes(list) <= RECORD_INLINE_MAX;
  return fits ? list : hoist(state, auth, list);
}

/** Replaces the inline packs of a list by blobs (uploading them, in parts under the PDS's limit). */
async function hoist(state: HelperState, auth: Authorizer, list: PackEntry[]): Promise<PackEntry[]> {
  const remote = await state.remote();
  const writer = remote.writer(auth);
  const inline = list.filter((p) => p.inline !== undefined);
  if (inline.length === 0) return list;
  const limit = await blobUploadLimit(writer, state.ctx.config.cacheDir);
  const totalParts = inline.reduce((n, p) => n + Math.ceil(p.size / limit), 0);
  const meter = new Meter(state.options, 'Uploading packs', totalParts);
  const stored = new Map<string, PackEntry>();
  await Promise.all(
    inline.map(async (p) => {
      const parts = await uploadPack(
        writer,
        p.inline!,
        limit,
        () => meter.tick(Math.min(limit, p.size)),
        state.cache,
      );
      stored.set(p.id, { id: p.id, size: p.size, count: p.count, parts });
    }),
  );
  meter.end();
  return list.map((p) => stored.get(p.id) ?? p);
}
