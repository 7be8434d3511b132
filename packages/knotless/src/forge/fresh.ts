// Read-your-writes over the appview: it learns of records from the event stream a second or more
// after they are written, so a user who just opened, commented, merged or closed would see their own
// action missing. The newest records of the current user and of the repository's owner (whose
// decisions count most) are read straight from their PDSes and laid over the appview's answer.
import {
  decide,
  inTeam,
  type Decided,
  type Decision,
  type Team,
} from 'knotless-core/records/forge-authority';
import type { Identity } from 'knotless-core/identity/resolver';
import type { SubjectView } from './appview.ts';
import type { Kind, StateFields } from './kinds.ts';
import { COMMENT, parseAtUri, parseComment } from './records.ts';
import { leftOut, type CommentItem, type Item, type Reader } from './items.ts';
import type { Stored } from 'knotless-core/forge/store';

/** How far back a record counts as new: far beyond an appview's usual lag of seconds. */
export const FRESH_MS = 10 * 60 * 1000;
/** Records one reading takes (one listRecords page). */
export const FRESH_LIMIT = 25;

type Base = { repo: string; title: string; createdAt: string };
type Page<T> = { records: Stored<T>[]; complete: boolean };

const sinceNow = () => new Date(Date.now() - FRESH_MS).toISOString();
const isNew = (createdAt: string) => Date.parse(createdAt) > Date.now() - FRESH_MS;

/**
 * The state records of the accounts an item's state depends on, read lazily and once each: the
 * newest page first, the whole collection only when that page cannot tell the account's latest
 * decision on an item.
 */
class StateReads<R extends Base> {
  readonly #pages = new Map<string, Promise<Page<StateFields>>>();
  readonly #all = new Map<string, Promise<Stored<StateFields>[]>>();

  readonly r: Reader;
  readonly kind: Kind<R>;
  readonly owner: Identity;
  readonly team: Team;

  constructor(r: Reader, kind: Kind<R>, owner: Identity, team: Team) {
    this.r = r;
    this.kind = kind;
    this.owner = owner;
    this.team = team;
  }

  #who(did: string): Promise<Identity> {
    return did === this.owner.did ? Promise.resolve(this.owner) : this.r.ctx.resolver.resolve(did);
  }

  /** A page of `did`'s state records already read, kept so that it is not read again. */
  seed(did: string, page: Page<StateFields>): void {
    this.#pages.set(did, Promise.resolve(page));
  }

  page(did: string): Promise<Page<StateFields>> {
    let got = this.#pages.get(did);
    if (got === undefined) {
      got = this.#who(did).then((who) =>
        this.r.store.page(who, this.kind.stateCollection, this.kind.parseState, FRESH_LIMIT),
      );
      this.#pages.set(did, got);
    }
    return got;
  }

  #everything(did: string): Promise<Stored<StateFields>[]> {
    let got = this.#all.get(did);
    if (got === undefined) {
      got = this.#who(did).then((who) =>
        this.r.store.list(who, this.kind.stateCollection, this.kind.parseState),
      );
      this.#all.set(did, got);
    }
    return got;
  }

  /**
   * `did`'s decisions on `subject`, enough to know its latest that `counts`: a page holding one
   * holds every later one too (keys are in order), so the whole collection is read only when the
   * page was full and held none.
   */
  async on(did: string, subject: string, counts: (state: string) => boolean): Promise<Decision<string>[]> {
    const p = await this.page(did);
    let here = p.records.filter((s) => s.value.subject === subject);
    if (!p.complete && !here.some((s) => counts(s.value.state)))
      here = (await this.#everything(did)).filter((s) => s.value.subject === subject);
    return here.map((s) => ({ by: did, rkey: s.rkey, ...s.value }));
  }

  /**
   * The state of `subject` by the authority rule, from the PDSes of its team (the owner and the
   * maintainers) and its author alone.
   */
  async decide(subject: string, author: string): Promise<Decided<string>> {
    const members = [this.owner.did, ...this.team.maintainers];
    const own = (
      await Promise.all(
        members.map((did) =>
          did === this.owner.did || did === author
            ? this.on(did, subject, () => true)
            : this.on(did, subject, () => true).catch((err: unknown) => leftOut(this.r, did, err)),
        ),
      )
    ).flat();
    const byTeam = decide(own, this.team, this.owner.did, this.kind.authorMay);
    // The team's merge or close stands whatever the author decided: their records are not read.
    if (inTeam(this.team, author) || byTeam.state !== 'open') return byTeam;
    const theirs = await this.on(author, subject, (s) => this.kind.authorMay.includes(s));
    return decide([...own, ...theirs], this.team, author, this.kind.authorMay);
  }
}

/**
 * The appview's listing with what the current user and the owner wrote lately laid over it: their
 * new pull requests or issues of `repo` the appview does not list yet, and the state, read from the
 * PDSes, of every item their new state records touch. A state is never taken half from the appview:
 * an item touched is decided again from its team's and author's records alone. Two requests (the
 * user's newest items and state records), two more for the owner's when that is someone else, and
 * the read of the owner's ref table for the repository's maintainers (beside them); more
 * only where a page cannot tell an account's latest decision, and, for a listing of one state, the
 * appview's listing of all when a record touches an item it did not list.
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
  const [team, items, states] = await Promise.all([
    r.team(owner, repo),
    Promise.all(readers.map((who) => r.store.page(who, kind.collection, kind.parse, FRESH_LIMIT))),
    Promise.all(readers.map((who) => r.store.page(who, kind.stateCollection, kind.parseState, FRESH_LIMIT))),
  ]);
  const reads = new StateReads(r, kind, owner, team);
  states.forEach((p, i) => reads.seed(readers[i]!.did, p));
  const byUri = new Map(listed.map((it) => [it.uri, it]));
  // Only the team's records and an author's own (the author is in the subject's uri) can count.
  const subjects = new Set(
    states
      .flatMap((p) => p.records)
      .filter((s) => isNew(s.value.createdAt))
      .filter((s) => inTeam(team, s.did) || s.did === parseAtUri(s.value.subject)?.did)
      .map((s) => s.value.subject),
  );
  const made = items
    .flatMap((p) => p.records)
    .filter((s) => s.value.repo === repo && isNew(s.value.createdAt) && !byUri.has(s.uri));
  for (const s of made) subjects.add(s.uri);
  if (subjects.size === 0) return listed;
  // Items touched that the appview listed under another state: one listing of all, not a query per
  // item (a record may be about another repository's item, which no query here finds).
  if (state !== 'all' && [...subjects].some((uri) => !byUri.has(uri)))
    for (const v of await r.appview.list(kind.list, repo, 'all')) {
      if (byUri.has(v.uri) || !subjects.has(v.uri)) continue;
      const item = await fromView(v);
      if (item !== undefined) byUri.set(v.uri, item);
    }
  for (const s of made)
    if (!byUri.has(s.uri))
      byUri.set(s.uri, {
        id: `${s.did}/${s.rkey}`,
        uri: s.uri,
        did: s.did,
        handle: (await r.ctx.resolver.resolve(s.did)).handle,
        rkey: s.rkey,
        cid: s.cid,
        record: s.value,
        state: 'open',
        labels: [],
      });
  for (const uri of subjects) {
    const it = byUri.get(uri);
    if (it === undefined) continue;
    const d = await reads.decide(uri, it.did);
    const { merged: _old, ignoredChecks: _ignored, ...rest } = it;
    byUri.set(uri, {
      ...rest,
      state: d.state,
      labels: d.labels,
      ...(d.merged === undefined ? {} : { merged: d.merged }),
      ...(d.ignoredChecks === undefined ? {} : { ignoredChecks: d.ignoredChecks }),
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
