// A ref's pack list as the index keeps it: JSON in a `packs` column, written by db/ when a record or
// table is applied and read back by mirror/ when it fetches the packs. The two directions live here
// together so that what is written is what is read.
import type { PackEntry } from 'knotless-core';

/** A pack list as the index stores it: JSON, inline bytes as base64 (what {@link packsOf} reads back). */
export function packsJson(packs: PackEntry[]): string {
  // Explicitly, not with a replacer: a Buffer's toJSON runs before any replacer sees it.
  return JSON.stringify(
    packs.map((p) => ({
      ...p,
      ...(p.inline === undefined ? {} : { inline: { $bytes: Buffer.from(p.inline).toString('base64') } }),
    })),
  );
}

/** The pack list stored in the index, back to PackEntry form (inline bytes as a Buffer). */
export function packsOf(row: { packs: string }): PackEntry[] {
  const raw = JSON.parse(row.packs) as (Omit<PackEntry, 'inline'> & { inline?: { $bytes: string } })[];
  return raw.map((p) => ({
    id: p.id,
    size: p.size,
    count: p.count,
    ...(p.inline === undefined ? {} : { inline: Buffer.from(p.inline.$bytes, 'base64') }),
    ...(p.parts === undefined ? {} : { parts: p.parts }),
  }));
}
