// The forge's records as the appview reads them: knotless-core's one reader (forge/read.ts), the
// CLI's too, with the lexicon documents of the table of kinds (bundled with the appview). The
// lexicon documents are the contract: records are checked against the JSON files themselves, by
// @atproto/lexicon, so the appview cannot drift from what the CLI writes.
import { Lexicons, jsonToLex, type LexiconDoc } from '@atproto/lexicon';
import { forgeReader } from 'knotless-core/forge/read';
import { FORGE_LEXICONS } from 'knotless-core/forge/kinds/table';

// Each kind's own lexicon document, from the table of kinds: a new kind is checked with no line here.
const lexicons = new Lexicons(FORGE_LEXICONS as unknown as LexiconDoc[]);

/** The forge's records, read as the CLI reads them. */
export const forgeRecords = forgeReader((nsid, value) => {
  const res = lexicons.validate(nsid, jsonToLex(value));
  return Promise.resolve(res.success ? undefined : res.error.message);
});
