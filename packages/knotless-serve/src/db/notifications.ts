// A signed-in account's notifications, read from the forge's index: pull requests and issues opened
// on its repositories, comments on its items and on items of its repositories, the owner's decisions
// on its pull requests and issues, checks that count failing on its pull requests' rounds, and
// mentions of its handle (the index keeps which handles each text mentions, db/mentions.ts). Nothing
// is stored per notification:
// they are the index's rows seen from one account; only when they were last seen is kept.
import crypto from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { trustedRunners } from 'knotless-core/forge/checks';
import { indexedProtection } from './forge-store.ts';
import type { MentionTable } from './mentions.ts';
import type { Database, StoredRound } from './schema.ts';

export interface Notice {
  kind: 'pull' | 'issue' | 'comment' | 'decision' | 'mention' | 'check';
  /** Who did it. */
  did: string;
  /** What it is about: the pull request or issue, and its repository. */
  item: {
    tab: 'pulls' | 'issues';
    did: string;
    rkey: string;
    title: string;
    repoDid: string;
    repoName: string;
  };
  /** The state a decision set, the comment's text, or the failing check's context. */
  detail: string;
  time: string;
}

const LIMIT = 50;
const sha256 = (s: string): string => crypto.createHash('sha256').update(s).digest('hex');

type Db = Kysely<Database>;

/**
 * Whether the row `item` (an alias of a pulls, issues or comments table) mentions `handle`: the
 * handles its text names as a whole are indexed beside it, so this is an exact match, and no number
 * of look-alikes (`@bob.testing` for `@bob.test`) stands between a reader and a real mention. The
 * handle is the reader's own, verified where the session was made (and, for the feed, the index's
 * verified identity), never what a record claims.
 */
function mentioning(tab: MentionTable, item: string, handle: string) {
  const [did, rkey] = [sql.ref(`${item}.did`), sql.ref(`${item}.rkey`)];
  return sql<boolean>`exists (select 1 from mentions m
    where m.handle = ${handle.toLowerCase()} and m.tab = ${tab} and m.did = ${did} and m.rkey = ${rkey})`;
}

/**
 * Whether the pull request or issue `item` (an alias of the pulls or issues table) is one whose page
 * opens (web/pages/notifications.ts opensFor, by the item pages' own rules), in SQL so that the rows
 * that do not never take the place of those that do: not deleted, its author's account not
 * inactive, and of a repository known here, not deleted, not private, whose owner's account is
 * known and active.
 */
function opens(item: 'i' | 'pulls') {
  const [deleted, author] = [sql.ref(`${item}.deleted`), sql.ref(`${item}.did`)];
  const [repoDid, repoName] = [sql.ref(`${item}.repo_did`), sql.ref(`${item}.repo_name`)];
  return sql<boolean>`(${deleted} = 0
    and not exists (select 1 from owners a where a.did = ${author} and a.status is not null)
    and exists (select 1 from repos r inner join owners o on o.did = r.did
      where r.did = ${repoDid} and r.name = ${repoName} and r.deleted = 0 and r.private = 0 and o.status is null))`;
}

/** Pull requests and issues opened on `me`'s repositories, and others' whose body mentions `@handle`. */
async function opened(db: Db, me: string, handle: string): Promise<Notice[]> {
  const out: Notice[] = [];
  for (const tab of ['pulls', 'issues'] as const) {
    const rows = await db
      // Both tables have the columns read here; one name keeps kysely's types simple.
      .selectFrom(`${tab} as i` as 'pulls as i')
      .select(['did', 'rkey', 'title', 'repo_did', 'repo_name', 'created_at as time'])
      .where('did', '!=', me)
      .where((w) => w.or([w('repo_did', '=', me), mentioning(tab, 'i', handle)]))
      .where(opens('i'))
      .orderBy('created_at', 'desc')
      .orderBy('did', 'desc')
      .orderBy('rkey', 'desc')
      .limit(LIMIT)
      .execute();
    for (const r of rows) {
      out.push({
        kind: r.repo_did !== me ? 'mention' : tab === 'pulls' ? 'pull' : 'issue',
        did: r.did,
        item: { tab, did: r.did, rkey: r.rkey, title: r.title, repoDid: r.repo_did, repoName: r.repo_name },
        detail: '',
        time: r.time,
      });
    }
  }
  return out;
}

/** Comments on `me`'s items or on items of `me`'s repositories, and others' comments mentioning `@handle`. */
async function comments(db: Db, me: string, handle: string): Promise<Notice[]> {
  const out: Notice[] = [];
  for (const tab of ['pulls', 'issues'] as const) {
    const collection = tab === 'pulls' ? 'dev.knotless.pull' : 'dev.knotless.issue';
    const rows = await db
      .selectFrom('comments as c')
      .innerJoin(
        // Both tables have the columns read here; one name keeps kysely's types simple.
        `${tab} as i` as 'pulls as i',
        (j) => j.onRef('i.did', '=', 'c.subject_did').onRef('i.rkey', '=', 'c.subject_rkey'),
      )
      .select([
        'c.did as did',
        'c.rkey as rkey',
        'c.body as body',
        'c.created_at as time',
        'i.did as item_did',
        'i.rkey as item_rkey',
        'i.title as title',
        'i.repo_did as repo_did',
        'i.repo_name as repo_name',
      ])
      .where('c.subject_collection', '=', collection)
      .where('c.did', '!=', me)
      .where('c.deleted', '=', 0)
      .where((w) =>
        w.or([w('i.did', '=', me), w('i.repo_did', '=', me), mentioning('comments', 'c', handle)]),
      )
      .where(opens('i'))
      .orderBy('c.created_at', 'desc')
      .orderBy('c.did', 'desc')
      .orderBy('c.rkey', 'desc')
      .limit(LIMIT)
      .execute();
    for (const r of rows) {
      const mine = r.item_did === me || r.repo_did === me;
      out.push({
        kind: mine ? 'comment' : 'mention',
        did: r.did,
        item: {
          tab,
          did: r.item_did,
          rkey: r.item_rkey,
          title: r.title,
          repoDid: r.repo_did,
          repoName: r.repo_name,
        },
        detail: r.body,
        time: r.time,
      });
    }
  }
  return out;
}

/** Where each kind of item's decisions are: the state table, its columns naming the item and the state. */
const DECIDED = [
  { tab: 'pulls', table: 'pull_statuses', did: 'pull_did', rkey: 'pull_rkey', state: 'status' },
  { tab: 'issues', table: 'issue_states', did: 'issue_did', rkey: 'issue_rkey', state: 'state' },
] as const;

/** The decisions of the repository's owner and maintainers on `me`'s pull requests and issues (the ones that count). */
async function decisions(db: Db, me: string): Promise<Notice[]> {
  const out: Notice[] = [];
  for (const d of DECIDED) {
    // Both pairs of tables have the columns read here, under the names given above; one pair's
    // names keep kysely's types simple.
    const [did, rkey, state] = [`s.${d.did}`, `s.${d.rkey}`, `s.${d.state}`] as [
      's.pull_did',
      's.pull_rkey',
      's.status',
    ];
    const rows = await db
      .selectFrom(`${d.table} as s` as 'pull_statuses as s')
      .innerJoin(`${d.tab} as i` as 'pulls as i', (j) =>
        j.onRef('i.did', '=', did).onRef('i.rkey', '=', rkey),
      )
      .select([
        's.did as did',
        `${state} as state`,
        's.created_at as time',
        'i.rkey as rkey',
        'i.title as title',
        'i.repo_name as repo_name',
        'i.repo_did as repo_did',
      ])
      .where('i.did', '=', me)
      .where('s.did', '!=', me)
      // The owner's decisions, and a maintainer's the owner's table lists now: those that count.
      .where((eb) =>
        eb.or([
          eb('s.did', '=', eb.ref('i.repo_did')),
          eb.exists(
            eb
              .selectFrom('repo_maintainers as m')
              .select('m.maintainer')
              .whereRef('m.did', '=', 'i.repo_did')
              .whereRef('m.repo', '=', 'i.repo_name')
              .whereRef('m.maintainer', '=', 's.did'),
          ),
        ]),
      )
      .where('s.deleted', '=', 0)
      .where(opens('i'))
      .orderBy('s.created_at', 'desc')
      .limit(LIMIT)
      .execute();
    for (const r of rows)
      out.push({
        kind: 'decision',
        did: r.did,
        item: {
          tab: d.tab,
          did: me,
          rkey: r.rkey,
          title: r.title,
          repoDid: r.repo_did,
          repoName: r.repo_name,
        },
        detail: r.state,
        time: r.time,
      });
  }
  return out;
}

/**
 * Checks failing (or erring) on a round of `me`'s pull requests, by a runner whose checks count for
 * the pull request's base branch: the repository's owner, a maintainer whose protection of it
 * requires checks, or a runner such a protection trusts
 * (knotless-core's rules), so nobody else can make the author's notifications say their work fails.
 * Each runner's latest verdict only (the index keeps no other); the author's own checks are no news.
 */
async function failedChecks(db: Db, me: string): Promise<Notice[]> {
  const out: Notice[] = [];
  const pulls = await db
    .selectFrom('pulls')
    .select(['rkey', 'title', 'repo_did', 'repo_name', 'base', 'rounds'])
    .where('did', '=', me)
    .where(opens('pulls'))
    .orderBy('created_at', 'desc')
    .limit(LIMIT)
    .execute();
  for (const p of pulls) {
    const heads = (JSON.parse(p.rounds) as StoredRound[]).map((r) => r.head);
    const protection = await indexedProtection(db, p.repo_did, p.repo_name);
    const counted = [p.repo_did, ...trustedRunners(protection, p.base)].filter((d) => d !== me);
    if (heads.length === 0 || counted.length === 0) continue;
    const rows = await db
      .selectFrom('checks as c')
      .leftJoin('owners as o', 'o.did', 'c.did')
      .select(['c.did as did', 'c.context as context', 'c.created_at as time'])
      .where('c.repo_did', '=', p.repo_did)
      .where('c.repo_name', '=', p.repo_name)
      .where('c.sha', 'in', heads)
      .where('c.did', 'in', counted)
      .where('c.state', 'in', ['failure', 'error'])
      .where('c.deleted', '=', 0)
      .where('o.status', 'is', null)
      .orderBy('c.created_at', 'desc')
      .limit(LIMIT)
      .execute();
    for (const r of rows)
      out.push({
        kind: 'check',
        did: r.did,
        item: {
          tab: 'pulls',
          did: me,
          rkey: p.rkey,
          title: p.title,
          repoDid: p.repo_did,
          repoName: p.repo_name,
        },
        detail: r.context,
        time: r.time,
      });
  }
  return out;
}

/** The notices `shown` keeps (all without it), in their order. */
async function kept(all: Notice[], shown?: (n: Notice) => Promise<boolean>): Promise<Notice[]> {
  if (shown === undefined) return all;
  const out: Notice[] = [];
  for (const n of all) if (await shown(n)) out.push(n);
  return out;
}

export class Notifications {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  /**
   * The newest notifications of `me` (at most 50), newest first; only those `shown` keeps, when
   * given (the web's: those whose page opens for their reader, which each query's SQL already
   * requires, so that what it would drop never fills the limit: this only checks it again).
   */
  async list(me: string, handle: string, shown?: (n: Notice) => Promise<boolean>): Promise<Notice[]> {
    const all = [
      ...(await opened(this.#db, me, handle)),
      ...(await comments(this.#db, me, handle)),
      ...(await decisions(this.#db, me)),
      ...(await failedChecks(this.#db, me)),
    ].sort((a, b) => (a.time < b.time ? 1 : a.time > b.time ? -1 : 0));
    return (await kept(all, shown)).slice(0, LIMIT);
  }

  /** How many came after the account last looked (of those `shown` keeps, when given). */
  async unseen(me: string, handle: string, shown?: (n: Notice) => Promise<boolean>): Promise<number> {
    const row = await this.#db
      .selectFrom('web_readers')
      .select('seen_at')
      .where('did', '=', me)
      .executeTakeFirst();
    const since = row?.seen_at ?? '';
    // The newer ones first: only they are asked about, on every page the reader opens.
    const newer = (await this.list(me, handle)).filter((n) => n.time > since);
    return (await kept(newer, shown)).length;
  }

  /** Marks everything up to now seen. */
  async seen(me: string): Promise<void> {
    const now = new Date().toISOString();
    await this.#db
      .insertInto('web_readers')
      .values({ did: me, seen_at: now, feed_token: sha256(crypto.randomBytes(32).toString('hex')) })
      .onConflict((oc) => oc.column('did').doUpdateSet({ seen_at: now }))
      .execute();
  }

  /** A new private feed token for `me` (the previous one stops working); only its hash is kept. */
  async newFeedToken(me: string): Promise<string> {
    const token = crypto.randomBytes(24).toString('base64url');
    const hash = sha256(token);
    await this.#db
      .insertInto('web_readers')
      .values({ did: me, seen_at: '', feed_token: hash })
      .onConflict((oc) => oc.column('did').doUpdateSet({ feed_token: hash }))
      .execute();
    return token;
  }

  /** Whose feed a token opens, if any. */
  async feedOwner(token: string): Promise<string | undefined> {
    if (!/^[A-Za-z0-9_-]{32}$/.test(token)) return undefined;
    const row = await this.#db
      .selectFrom('web_readers')
      .select('did')
      .where('feed_token', '=', sha256(token))
      .executeTakeFirst();
    return row?.did;
  }
}
