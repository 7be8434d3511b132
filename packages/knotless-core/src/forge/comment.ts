// A comment on a pull request or issue, written in the commenter's account: the one write both
// front ends make (the CLI's `comment` commands, the appview's comment forms), which differ only in
// how they read the comment and show the result.
import { COMMENT, checkToWrite, writeRecord, type CommentRecord } from './records.ts';
import type { ForgeStore } from './store.ts';

/** The comment's fields; `round`, `path` and `line` as the reader checked them against the item. */
export type CommentDraft = Omit<CommentRecord, 'createdAt'>;

/**
 * Writes the comment, after checking it exactly as its readers will (`read` is the comment's
 * reader, forge/read.ts), so that nothing is written that every reader would skip.
 */
export async function writeComment(
  store: ForgeStore,
  auth: Parameters<ForgeStore['create']>[0],
  read: (value: unknown) => Promise<unknown>,
  draft: CommentDraft,
): Promise<{ made: { uri: string; cid: string; rkey: string }; record: CommentRecord }> {
  const record: CommentRecord = {
    subject: draft.subject,
    ...(draft.round === undefined ? {} : { round: draft.round }),
    ...(draft.path === undefined ? {} : { path: draft.path, line: draft.line! }),
    body: draft.body,
    createdAt: new Date().toISOString(),
  };
  const json = writeRecord(COMMENT, record);
  await checkToWrite(read, json, 'comment');
  return { made: await store.create(auth, COMMENT, json), record };
}
