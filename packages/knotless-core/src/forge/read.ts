// Reading the forge's records: the one reader the CLI and the appview both use, so that a record one
// of them keeps the other keeps too. A record is checked against its lexicon first (the check is
// handed in: each front end bundles the lexicon documents, and loads @atproto/lexicon its own way),
// then against what a lexicon cannot say (its kind's `parse`, kinds/). A record that fails throws
// InvalidRecord, with the rule it broke; the caller skips it whole, never using half of it.
import { InvalidRecord } from './records.ts';
import type { ForgeKind } from './kinds/kind.ts';
import { FORGE_KINDS, kindOf, type ForgeCollection, type ForgeRecord, type RecordOf } from './kinds/table.ts';

/**
 * Why a record (its JSON form, blobs as `{$type: 'blob', ref: {$link}}`) is not a valid `nsid` record
 * by its lexicon, or undefined when it is.
 */
export type LexiconCheck = (nsid: string, value: unknown) => Promise<string | undefined>;

type AnyKind = (typeof FORGE_KINDS)[number];

/** The forge's records read with one lexicon check: one reader per kind, by its name. */
export type ForgeReader = {
  [K in AnyKind as K['name']]: (value: unknown) => Promise<RecordOf<K>>;
} & {
  /** A record of any forge collection, with its collection. */
  any: (collection: ForgeCollection, value: unknown) => Promise<ForgeRecord>;
};

export function forgeReader(lexiconProblem: LexiconCheck): ForgeReader {
  async function read(kind: ForgeKind<string, string, string, unknown>, value: unknown): Promise<unknown> {
    const problem =
      typeof value !== 'object' || value === null || Array.isArray(value)
        ? 'it is not an object'
        : await lexiconProblem(kind.collection, value);
    if (problem !== undefined) throw new InvalidRecord(kind.collection, problem);
    return kind.parse(value as Record<string, unknown>);
  }

  const reader: Record<string, unknown> = {
    any: async (collection: ForgeCollection, value: unknown) => ({
      collection,
      record: await read(kindOf(collection) as ForgeKind<string, string, string, unknown>, value),
    }),
  };
  for (const kind of FORGE_KINDS)
    reader[kind.name] = (value: unknown) => read(kind as ForgeKind<string, string, string, unknown>, value);
  return reader as ForgeReader;
}
