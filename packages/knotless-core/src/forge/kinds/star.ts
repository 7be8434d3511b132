// A star (dev.knotless.star) on a repository, in the reader's own account.
import { STAR, type StarRecord } from '../records.ts';
import { checkRepoUri, forgeKind, uriOf } from './kind.ts';
import starLexicon from '../../../../../lexicons/dev/knotless/star.json' with { type: 'json' };

export const STAR_KIND = forgeKind({
  name: 'star',
  collection: STAR,
  lexicon: starLexicon,
  signIn: true,
  table: 'stars',
  noun: 'star',
  parse(value): StarRecord {
    const v = value as unknown as StarRecord;
    checkRepoUri(STAR, v.subject);
    return { subject: v.subject, createdAt: v.createdAt };
  },
  row(r) {
    const subject = uriOf(r.subject);
    return { subject_did: subject.did, subject_name: subject.rkey };
  },
});
