import type { LexiconDoc, Lexicons } from '@atproto/lexicon';
import { FORGE_LEXICONS } from 'knotless-core/forge/kinds/table';
import repo from '../../../../lexicons/dev/knotless/repo.json' with { type: 'json' };

/**
 * The lexicon documents the forge's records are checked against (bundled: an install has no
 * lexicons/): the repository record's, and each forge kind's from the table of kinds, so a new kind
 * needs no line here.
 */
const DOCS = [repo, ...FORGE_LEXICONS] as unknown as LexiconDoc[];

let loaded: Promise<{ lex: Lexicons; jsonToLex: (v: unknown) => unknown }> | undefined;

/** @atproto/lexicon loads only for forge commands: git's commands never pay for it. */
function lexicons(): Promise<{ lex: Lexicons; jsonToLex: (v: unknown) => unknown }> {
  loaded ??= import('@atproto/lexicon').then((m) => ({
    lex: new m.Lexicons(DOCS),
    jsonToLex: (v: unknown) => m.jsonToLex(v),
  }));
  return loaded;
}

/**
 * Why a record read from the network (its JSON form, blobs as `{$type: 'blob', ref: {$link}}`) is
 * not a valid `nsid` record by the lexicon, or undefined when it is. Grapheme counts, formats
 * (at-uri, datetime), enums and blob types are all the lexicon library's own checks.
 */
export async function lexiconProblem(nsid: string, value: unknown): Promise<string | undefined> {
  const { lex, jsonToLex } = await lexicons();
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'it is not an object';
  const res = lex.validate(nsid, jsonToLex(value));
  return res.success ? undefined : res.error.message;
}
