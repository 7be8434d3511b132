import type { Context } from '../context.ts';
import { KnotlessError, isKnotlessError } from 'knotless-core/errors';
import type { Identity } from 'knotless-core/identity/resolver';
import { safeText } from 'knotless-core/text/terminal';
import { Appview, type CommentView, type SubjectView } from './appview.ts';
import { decide, type Decision, type Team } from 'knotless-core/records/forge-authority';
import { readTeam } from 'knotless-core/records/maintainers';
import type { Kind } from './kinds.ts';
import { COMMENT, InvalidRecord, parseAtUri, parseComment, type CommentRecord } from './records.ts';
import { freshen, withMyComments } from './fresh.ts';
import { leftOut, type CommentItem, type Item, type Reader } from './items.ts';
import { ForgeStore, type Stored } from 'knotless-core/forge/store';
import { keysNamed } from 'knotless-core/forge/short-id';

export type { CommentItem, Item, Reader } from './items.ts';

type Base = { repo: string; title: string; createdAt: string };

export function reader(ctx: Context, note: (message: string) => void): Reader {
  const teams = new Map<string, Promise<Team>>();
  return {
    ctx,
    store: new ForgeStore(ctx, (m) => note(`warning: ${m}`)),
    appview: Appview.of(ctx),
    note,
    team(owner, repo) {
      let got = teams.get(repo);
      if (got === undefined) {
        const name = parseAtUri(repo)?.rkey ?? repo;
        got = readTeam(ctx.remoteRepo(owner, name, (m) => note(`warning: ${m}`)));
        teams.set(repo, got);
      }
      return got;
    },
  };
}

async function handleOf(r: Reader, did: string): Promise<string | undefined> {
  return (await r.ctx.resolver.resolve(did)).handle;
}

/**
 * The states of records read from their authors' PDSes, by the authority rule: the state records
 * of the repository's owner, its maintainers and each author, read directly; nobody else's can
 * count, so nobody else's are read.
 */
export async function withStates<R extends Base>(
  r: Reader,
  kind: Kind<R>,
  owner: Identity,
  items: Stored<R>[],
): Promise<Item<R>[]> {
  const team = items.length === 0 ? undefined : await r.team(owner, items[0]!.value.repo);
  // Each decision keeps what it is about, so one listing of an account serves every item.
  const accounts = new Map<string, Promise<(Decision<string> & { subject: string })[]>>();
  const decisionsOf = (did: string) => {
    let found = accounts.get(did);
    if (found === undefined) {
      found = (async () => {
        const who = did === owner.did ? owner : await r.ctx.resolver.resolve(did);
        const states = await r.store.list(who, kind.stateCollection, kind.parseState);
        return states.map((s) => ({ by: did, rkey: s.rkey, ...s.value }));
      })();
      accounts.set(did, found);
    }
    return found;
  };
  return Promise.all(
    items.map(async (it) => {
      const deciders = new Set([owner.did, ...(team?.maintainers ?? []), it.did]);
      const all = (
        await Promise.all(
          [...deciders].map((did) =>
            did === owner.did || did === it.did
              ? decisionsOf(did)
              : decisionsOf(did).catch((err: unknown) => leftOut(r, did, err)),
          ),
        )
      ).flat();
      const mine = all.filter((d) => d.subject === it.uri);
      const decided = decide(mine, team ?? owner.did, it.did, kind.authorMay);
      return {
        id: `${it.did}/${it.rkey}`,
        uri: it.uri,
        did: it.did,
        handle: await handleOf(r, it.did),
        rkey: it.rkey,
        cid: it.cid,
        record: it.value,
        state: decided.state,
        ...(decided.merged === undefined ? {} : { merged: decided.merged }),
        ...(decided.ignoredChecks === undefined ? {} : { ignoredChecks: decided.ignoredChecks }),
        labels: decided.labels,
        decisions: mine,
      };
    }),
  );
}

/**
 * The pull requests or issues of a repository. With an appview, its listing (which applies the
 * same authority rule); without one, only those in the owner's and the current account's PDS can be
 * found, and the note says so.
 */
export async function listItems<R extends Base>(
  r: Reader,
  kind: Kind<R>,
  owner: Identity,
  repo: string,
  state: string,
  me: string | undefined,
): Promise<Item<R>[]> {
  if (r.appview !== undefined) {
    const views = await r.appview.list(kind.list, repo, state);
    const fromView = (v: SubjectView) => itemOfView(r, kind, repo, v);
    const out: Item<R>[] = [];
    for (const v of views) {
      const item = await fromView(v);
      if (item !== undefined) out.push(item);
    }
    return freshen(r, kind, owner, repo, state, out, me, fromView);
  }
  r.note(
    `KNOTLESS_APPVIEW is not set: listing only the ${kind.noun}s in ${safeText(owner.handle ?? owner.did)}'s${me === undefined || me === owner.did ? '' : ' and your'} account.`,
  );
  const accounts = [
    owner,
    ...(me === undefined || me === owner.did ? [] : [await r.ctx.resolver.resolve(me)]),
  ];
  const found = (await Promise.all(accounts.map((a) => r.store.list(a, kind.collection, kind.parse)))).flat();
  const items = await withStates(
    r,
    kind,
    owner,
    found.filter((s) => s.value.repo === repo),
  );
  return items
    .filter((it) => state === 'all' || it.state === state)
    .sort((a, b) => (a.record.createdAt < b.record.createdAt ? 1 : -1));
}

/** The item an appview's view describes, when it is one of `repo`'s and a valid record. */
async function itemOfView<R extends Base>(
  r: Reader,
  kind: Kind<R>,
  repo: string,
  v: SubjectView,
): Promise<Item<R> | undefined> {
  const u = parseAtUri(v.uri);
  if (v.repo !== repo || u?.collection !== kind.collection) return undefined;
  // What a view says of its record is checked as the record would be: never half used.
  const record = await checkedView(r, kind, v);
  if (record === undefined) return undefined;
  return {
    id: `${u.did}/${u.rkey}`,
    uri: v.uri,
    did: u.did,
    // The appview's word for a handle is not taken (it may not know it yet, or may lie): ours is verified.
    handle: await handleOf(r, u.did),
    rkey: u.rkey,
    cid: v.cid,
    record,
    state: v.state,
    ...(v.merged === undefined ? {} : { merged: v.merged }),
    labels: v.labels,
  };
}

/**
 * Finds the pull request or issue an id names: `<did>/<rkey>`, `<handle>/<rkey>`, its at-uri, or a
 * bare record key when exactly one of the repository's has it. The record itself is read from its
 * author's PDS and its state decided from the owner's and author's records.
 */
export async function findItem<R extends Base>(
  r: Reader,
  kind: Kind<R>,
  owner: Identity,
  repo: string,
  id: string,
  me: string | undefined,
): Promise<Item<R>> {
  let did: string;
  let rkey: string;
  if (id.startsWith('at://')) {
    // An at-uri may name its account by handle as well as by DID.
    const [authority = '', collection, key, ...more] = id.slice('at://'.length).split('/');
    if (collection !== kind.collection || key === undefined || more.length > 0)
      throw new KnotlessError('usage', `${safeText(id)} is not a ${kind.noun} (${kind.collection}).`);
    did = authority.startsWith('did:') ? authority : (await r.ctx.resolver.resolve(authority)).did;
    rkey = key;
  } else if (id.includes('/')) {
    const slash = id.lastIndexOf('/');
    did = (await r.ctx.resolver.resolve(id.slice(0, slash))).did;
    rkey = id.slice(slash + 1);
  } else {
    // A record key, or its short id (knotless-core's forge/short-id.ts, as the appview shows it).
    const all = await listItems(r, kind, owner, repo, 'all', me);
    const keys = new Set(
      keysNamed(
        id,
        all.map((it) => it.rkey),
      ),
    );
    const matches = all.filter((it) => keys.has(it.rkey));
    if (matches.length > 1)
      throw new KnotlessError(
        'usage',
        `${safeText(id)} names ${matches.length} ${kind.noun}s (${matches.map((m) => m.id).join(', ')}); give the whole id.`,
      );
    if (matches[0] === undefined) throw missing(kind, id, owner, repo);
    ({ did, rkey } = matches[0]);
  }
  if (!/^[A-Za-z0-9._:~-]{1,512}$/.test(rkey)) throw missing(kind, id, owner, repo);
  const author = did === owner.did ? owner : await r.ctx.resolver.resolve(did);
  const stored = await r.store.get(author, kind.collection, rkey, kind.parse);
  if (stored === undefined || stored.value.repo !== repo) throw missing(kind, id, owner, repo);
  const [item] = await withStates(r, kind, owner, [stored]);
  return item!;
}

function missing(kind: Kind<Base>, id: string, owner: Identity, repo: string): KnotlessError {
  const name = parseAtUri(repo)?.rkey ?? repo;
  return new KnotlessError(
    'not-found',
    `There is no ${kind.noun} ${safeText(id)} in ${safeText(owner.handle ?? owner.did)}/${safeText(name)}; list them with \`knotless ${kind.word} list\`.`,
  );
}

/**
 * The comments on a subject, oldest first: the appview's when set (anyone's, with the current
 * user's own recent ones read from their PDS, which the appview may not have yet), else those in
 * the accounts of the people involved (`dids`), with a note that others' are not shown.
 */
export async function commentsOn(
  r: Reader,
  kind: Kind<Base>,
  subject: string,
  dids: string[],
  me: string | undefined,
): Promise<CommentItem[]> {
  if (r.appview !== undefined) {
    const got = await r.appview.get(kind.view, subject);
    if (got !== undefined) {
      const out: CommentItem[] = [];
      for (const c of got.comments) {
        // The appview's words are checked like a record: a comment must still be a valid one.
        const record = await checkedComment(r, c);
        const u = parseAtUri(c.uri);
        if (record === undefined || u === undefined || record.subject !== subject) continue;
        out.push({ uri: c.uri, did: u.did, handle: await handleOf(r, u.did), record });
      }
      return withMyComments(r, subject, out, me);
    }
  } else {
    r.note('KNOTLESS_APPVIEW is not set: showing only the comments of the owner, the author and you.');
  }
  const out: CommentItem[] = [];
  for (const did of new Set(dids)) {
    const who = await r.ctx.resolver.resolve(did);
    for (const c of await r.store.list(who, COMMENT, parseComment))
      if (c.value.subject === subject) out.push({ uri: c.uri, did, handle: who.handle, record: c.value });
  }
  return out.sort((a, b) => (a.record.createdAt < b.record.createdAt ? -1 : 1));
}

/** The record a pull or issue view describes, checked as the record; an invalid one is skipped. */
async function checkedView<R extends Base>(r: Reader, kind: Kind<R>, v: SubjectView): Promise<R | undefined> {
  try {
    const record = await kind.parse(JSON.parse(JSON.stringify(kind.fromView(v))));
    if (!kind.states.includes(v.state)) throw new InvalidRecord(kind.collection, 'its state is unknown');
    return record;
  } catch (err) {
    if (!(err instanceof InvalidRecord)) throw err;
    r.note(`warning: the appview's ${err.message.replace(/\.$/, '')} (${safeText(v.uri)})`);
    return undefined;
  }
}

/** A comment view checked as its record would be; an invalid one is skipped with a warning. */
async function checkedComment(r: Reader, c: CommentView): Promise<CommentRecord | undefined> {
  try {
    return await parseComment({
      subject: c.subject,
      body: c.body,
      createdAt: c.createdAt,
      ...(c.round === undefined ? {} : { round: c.round }),
    });
  } catch (err) {
    if (!isKnotlessError(err, 'corrupt-remote')) throw err;
    r.note(`warning: ${err.message.replace(/\.$/, '')} (${safeText(c.uri)})`);
    return undefined;
  }
}
