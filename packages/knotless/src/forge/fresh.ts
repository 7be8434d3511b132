// Read-your-writes over the appview: it learns of records from the event stream a second or more
// after they are written, so a user who just commented, merged or closed would see their own action
// missing. The few records written lately by the current user (and the repository's owner, whose
// records decide states) are read straight from their PDSes and laid over the appview's answer.
import { decide, type Decision } from 'knotless-core/records/forge-authority';
import type { Identity } from 'knotless-core/identity/resolver';
import type { SubjectView } from './appview.ts';
import type { Kind } from './kinds.ts';
import { COMMENT, parseAtUri, parseComment } from './records.ts';
import type { CommentItem, Item, Reader } from './items.ts';

/** How far back a user's own records are read: far beyond an appview's usual lag of seconds. */
export const FRESH_MS = 10 * 60 * 1000;
/** Records one reading takes (one listRecords page). */
export const FRESH_LIMIT = 25;

type Base = { repo: string; title: string; createdAt: string };
type Fresh = Decision<string> & { subject: string };

const sinceNow = () => new Date(Date.now() - FRESH_MS).toISOString();

/** The state records `did` wrote lately, and how far back that reading is complete. */
async function recentStates<R extends Base>(
  r: Reader,
  kind: Kind<R>,
  who: Pick<Identity, 'did' | 'pds'>,
): Promise<{ decisions: Fresh[]; since: string }> {
  const got = await r.store.recent(who, kind.stateCollection, kind.parseState, FRESH_LIMIT, sinceNow());
  return {
    decisions: got.records.map((s) => ({ by: who.did, rkey: s.rkey, ...s.value })),
    since: got.since,
  };
}

/**
 * The appview's listing with the current user's own recent state records (and the owner's) laid
 * over it. For each item they touch, the authority rule is applied to the union: the appview's
 * state stands for every record older than the reading (a decision by the owner, older than all
 * read: it holds the owner's merge and labels, and the author's close counts over it exactly as
 * the rule says), and the records read are themselves. One request for the user's records, a
 * second for the owner's when that is someone else; a third only for an item whose author's newer
 * record could outweigh an owner's close or reopen just read, and, for a listing of one state, the
 * appview's listing of all when the records touch an item it did not list.
 */
export async function freshen<R extends Base>(
  r: Reader,
  kind: Kind<R>,
  owner: Identity,
  repo: string,
  state: string,
  listed: Item<R>[],
  me: string | undefined,
  fromView: (v: SubjectView) => Promise<Item<R> | undefined>,
): Promise<Item<R>[]> {
  if (me === undefined || r.appview === undefined) return listed;
  const readers = [me === owner.did ? owner : await r.ctx.resolver.resolve(me)];
  if (me !== owner.did) readers.push(owner);
  const read = await Promise.all(readers.map((who) => recentStates(r, kind, who)));
  let since = read.map((x) => x.since).reduce((a, b) => (Date.parse(a) > Date.parse(b) ? a : b));
  let fresh = read.flatMap((x) => x.decisions);
  const byUri = new Map(listed.map((it) => [it.uri, it]));
  // Only the owner's records and an author's own (the author is in the subject's uri) can count.
  const counts = (d: Fresh) => d.by === owner.did || d.by === parseAtUri(d.subject)?.did;
  const subjects = new Set(fresh.filter(counts).map((d) => d.subject));
  if (subjects.size === 0) return listed;
  // Items the records touch that the appview listed under another state: one listing of all, not a
  // query per item (a record may be about another repository's item, which no query here finds).
  if (state !== 'all' && [...subjects].some((uri) => !byUri.has(uri)))
    for (const v of await r.appview.list(kind.list, repo, 'all')) {
      if (byUri.has(v.uri) || !subjects.has(v.uri)) continue;
      const item = await fromView(v);
      if (item !== undefined) byUri.set(v.uri, item);
    }
  const decideAll = () =>
    new Map(
      [...subjects].flatMap((uri) => {
        const it = byUri.get(uri);
        if (it === undefined) return [];
        const baseline: Fresh = {
          by: owner.did,
          rkey: '',
          subject: uri,
          state: it.state,
          labels: it.labels,
          ...(it.merged === undefined ? {} : { merged: it.merged }),
          createdAt: new Date(0).toISOString(),
        };
        const mine = fresh.filter((d) => d.subject === uri && Date.parse(d.createdAt) > Date.parse(since));
        return [[uri, decide([baseline, ...mine], owner.did, it.did, kind.authorMay)] as const];
      }),
    );
  let decided = decideAll();
  // An owner's close or reopen read here loses to a newer one by the author, which the appview may
  // hold but this reading does not: read that author's too, where the answer would change.
  const authors = new Set<string>();
  for (const [uri, d] of decided) {
    const it = byUri.get(uri)!;
    if (it.did === me || it.did === owner.did || d.state === it.state || d.state === 'merged') continue;
    authors.add(it.did);
  }
  for (const did of authors) {
    const got = await recentStates(r, kind, await r.ctx.resolver.resolve(did));
    fresh = [...fresh, ...got.decisions];
    if (Date.parse(got.since) > Date.parse(since)) since = got.since;
  }
  if (authors.size > 0) decided = decideAll();
  for (const [uri, d] of decided) {
    const it = byUri.get(uri)!;
    const { merged: _old, ...rest } = it;
    byUri.set(uri, {
      ...rest,
      state: d.state,
      labels: d.labels,
      ...(d.merged === undefined ? {} : { merged: d.merged }),
    });
  }
  return [...byUri.values()]
    .filter((it) => state === 'all' || it.state === state)
    .sort((a, b) => (a.record.createdAt < b.record.createdAt ? 1 : -1));
}

/**
 * The appview's comments with the current user's own recent ones on `subject` laid over them (by
 * uri, the PDS's copy winning), oldest first: one request, none without a current user.
 */
export async function withMyComments(
  r: Reader,
  subject: string,
  comments: CommentItem[],
  me: string | undefined,
): Promise<CommentItem[]> {
  if (me === undefined) return comments;
  const who = await r.ctx.resolver.resolve(me);
  const got = await r.store.recent(who, COMMENT, parseComment, FRESH_LIMIT, sinceNow());
  const byUri = new Map(comments.map((c) => [c.uri, c]));
  for (const c of got.records)
    if (c.value.subject === subject)
      byUri.set(c.uri, { uri: c.uri, did: me, handle: who.handle, record: c.value });
  return [...byUri.values()].sort((a, b) => (a.record.createdAt < b.record.createdAt ? -1 : 1));
}
