// A comment (dev.knotless.comment) on a pull request or an issue, optionally on one line of a round's diff.
import { COMMENT, ISSUE, InvalidRecord, PULL, lineCommentProblem, type CommentRecord } from '../records.ts';
import { checkSubject, forgeKind, uriOf } from './kind.ts';
import commentLexicon from '../../../../../lexicons/dev/knotless/comment.json' with { type: 'json' };

export const COMMENT_KIND = forgeKind({
  name: 'comment',
  collection: COMMENT,
  lexicon: commentLexicon,
  signIn: true,
  table: 'comments',
  noun: 'comment',
  parse(value): CommentRecord {
    const v = value as unknown as CommentRecord;
    const subjectCollection = checkSubject(COMMENT, v.subject, [PULL, ISSUE]);
    const problem = lineCommentProblem({ ...v, subjectCollection });
    if (problem !== undefined) throw new InvalidRecord(COMMENT, problem);
    return {
      subject: v.subject,
      ...(v.round === undefined ? {} : { round: v.round }),
      ...(v.path === undefined ? {} : { path: v.path, line: v.line! }),
      body: v.body,
      createdAt: v.createdAt,
    };
  },
  row(r) {
    const subject = uriOf(r.subject);
    return {
      subject_did: subject.did,
      subject_collection: subject.collection,
      subject_rkey: subject.rkey,
      round: r.round ?? null,
      path: r.path ?? null,
      line: r.line ?? null,
      body: r.body,
    };
  },
});
