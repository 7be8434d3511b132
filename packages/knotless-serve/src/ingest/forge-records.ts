// The forge's records as the appview reads them: knotless-core's one reader (forge/read.ts), the
// CLI's too, with the lexicon documents the appview bundles. The lexicon documents are the contract:
// records are checked against the JSON files themselves, by @atproto/lexicon, so the appview cannot
// drift from what the CLI writes.
import { Lexicons, jsonToLex, type LexiconDoc } from '@atproto/lexicon';
import { forgeReader } from 'knotless-core/forge/read';
import check from '../../../../lexicons/dev/knotless/check.json' with { type: 'json' };
import comment from '../../../../lexicons/dev/knotless/comment.json' with { type: 'json' };
import issue from '../../../../lexicons/dev/knotless/issue.json' with { type: 'json' };
import issueState from '../../../../lexicons/dev/knotless/issue/state.json' with { type: 'json' };
import protection from '../../../../lexicons/dev/knotless/protection.json' with { type: 'json' };
import pull from '../../../../lexicons/dev/knotless/pull.json' with { type: 'json' };
import pullStatus from '../../../../lexicons/dev/knotless/pull/status.json' with { type: 'json' };
import star from '../../../../lexicons/dev/knotless/star.json' with { type: 'json' };

const lexicons = new Lexicons([
  pull,
  pullStatus,
  issue,
  issueState,
  comment,
  star,
  check,
  protection,
] as unknown as LexiconDoc[]);

/** The forge's records, read as the CLI reads them. */
export const forgeRecords = forgeReader((nsid, value) => {
  const res = lexicons.validate(nsid, jsonToLex(value));
  return Promise.resolve(res.success ? undefined : res.error.message);
});
