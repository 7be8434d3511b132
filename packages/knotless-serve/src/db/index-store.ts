import { sql, type Kysely } from 'kysely';
import type { RefRecord } from 'knotless-core';
import type { Database, OwnerTable, PushTable, RefTable, RepoTable } from './schema.ts';
import { maintainedBy, maintainersOfAccount, namedMaintainers, type NamedMaintainer } from './maintainers.ts';
import { saveCursor, type EventSource } from './cursor.ts';
import { AccountStore } from './account-store.ts';
import { ForgeStore } from './forge-store.ts';
import { queuePush } from './webhook-events.ts';
import {
  applyTable,
  applyTablePart,
  hasOwnerTable,
  liveRefs,
  type ListedRef,
  type TableApplied,
  type TableChange,
} from './ref-tables.ts';
import { WebhookStore } from './webhook-store.ts';
import { packsJson } from '../model/packs.ts';
import { repoOfKey } from '../model/records.ts';
import type { Engine } from './open.ts';

export type { EventSource } from './cursor.ts';
export type { TableApplied, TableChange } from './ref-tables.ts';

/** A repository record change: `record` null for a delete. */
export interface RepoChange {
  did: string;
  name: string;
  rev: string;
  record: { description?: string; createdAt?: string; forkOf?: string; private?: boolean } | null;
  time: string;
}

/** A ref record change: `record` null for a delete. */
export interface RefChange {
  did: string;
  rkey: string;
  rev: string;
  cid: string | null;
  record: RefRecord | null;
  time: string;
}

/** A repository as the index knows it, with its owner's handle. */
export type RepoRow = Omit<RepoTable, 'deleted' | 'rev'> & { handle: string | null };
/** A ref as the index knows it. */
export type RefRow = Omit<RefTable, 'deleted'>;
/** A push, with the owner's handle. */
/**
 * A push as pages show it: the owner's handle, and who pushed when it was a maintainer's table
 * write (`pusher`, with its handle when the index knows it; absent or null for the owner).
 */
export type PushRow = Omit<PushTable, 'pusher'> & {
  handle: string | null;
  pusher?: string | null;
  pusher_handle?: string | null;
};

/**
 * Every read and write of the index. Events can arrive twice (a replay after a restart, a backfill
 * beside the stream), so every write is idempotent: a row carries the account revision that wrote
 * it, older revisions never overwrite newer ones, and pushes are keyed by (account, record, revision).
 */
export class Index {
  readonly db: Kysely<Database>;
  readonly engine: Engine;
  /** Pull requests, issues and comments. */
  readonly forge: ForgeStore;
  readonly accounts: AccountStore;
  /** Repositories' webhooks and their delivery queue. */
  readonly webhooks: WebhookStore;

  constructor(db: Kysely<Database>, engine: Engine) {
    this.db = db;
    this.engine = engine;
    this.webhooks = new WebhookStore(db, engine);
    this.forge = new ForgeStore(db);
    this.accounts = new AccountStore(db);
  }

  /** The last fully indexed sequence number of an event stream. */
  async cursor(service: string): Promise<number | undefined> {
    const row = await this.db
      .selectFrom('cursors')
      .select('seq')
      .where('service', '=', service)
      .executeTakeFirst();
    return row === undefined ? undefined : Number(row.seq);
  }

  /** Saves an event stream's position (on its own, for events that change nothing). */
  async saveCursor(source: EventSource): Promise<void> {
    await saveCursor(this.db, source);
  }

  /** Every account the index has resolved: repository owners and the forge's authors. */
  async ownerDids(): Promise<string[]> {
    return (await this.db.selectFrom('owners').select('did').execute()).map((r) => r.did);
  }

  /** The PDSes of the accounts the index has resolved (where a dev network's `.test` handle is asked). */
  async knownPdses(): Promise<string[]> {
    const rows = await this.db
      .selectFrom('owners')
      .select('pds')
      .distinct()
      .where('pds', 'is not', null)
      .execute();
    return rows.flatMap((r) => (r.pds === null ? [] : [r.pds]));
  }

  /** Forgets an event stream's position: it is followed from its live end next time. */
  async dropCursor(service: string): Promise<void> {
    await this.db.deleteFrom('cursors').where('service', '=', service).execute();
  }

  /** Applies a repository record change, and the event's position in the same transaction. */
  async applyRepo(change: RepoChange, source?: EventSource): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      const old = await tx
        .selectFrom('repos')
        .select('rev')
        .where('did', '=', change.did)
        .where('name', '=', change.name)
        .executeTakeFirst();
      if (old === undefined || old.rev <= change.rev) {
        const row: RepoTable = {
          did: change.did,
          name: change.name,
          description: change.record?.description ?? null,
          created_at: change.record?.createdAt ?? null,
          fork_of: change.record?.forkOf ?? null,
          private: change.record?.private === true ? 1 : 0,
          rev: change.rev,
          deleted: change.record === null ? 1 : 0,
          indexed_at: change.time,
        };
        await tx
          .insertInto('repos')
          .values(row)
          .onConflict((oc) => oc.columns(['did', 'name']).doUpdateSet(row))
          .execute();
      }
      if (source !== undefined) await saveCursor(tx, source);
    });
  }

  /**
   * Applies a ref record change (and the event's position) and notes the push; returns true when
   * the ref changed, so the caller knows the mirror needs updating.
   */
  async applyRef(change: RefChange, source?: EventSource): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      const old = await tx
        .selectFrom('refs')
        .selectAll()
        .where('did', '=', change.did)
        .where('rkey', '=', change.rkey)
        .executeTakeFirst();
      const changed = old === undefined || old.rev < change.rev;
      if (changed && !(old === undefined && change.record === null)) {
        const r = change.record;
        const row: RefTable = {
          did: change.did,
          rkey: change.rkey,
          repo: r?.repo ?? old?.repo ?? repoOfKey(change.rkey),
          ref: r?.ref ?? old?.ref ?? '',
          target: r?.target ?? null,
          symref: r?.symref ?? null,
          peeled: r?.peeled ?? null,
          packs: packsJson(r?.packs ?? []),
          cid: change.cid,
          rev: change.rev,
          deleted: r === null ? 1 : 0,
          updated_at: r?.updatedAt || change.time,
        };
        await tx
          .insertInto('refs')
          .values(row)
          .onConflict((oc) => oc.columns(['did', 'rkey']).doUpdateSet(row))
          .execute();
        // A repository whose refs are in its table ignores its ref records (format.md, "Old
        // repositories"): the row is kept, for the day the table is gone, but moves nothing.
        if (await hasOwnerTable(tx, row.did, row.repo)) {
          if (source !== undefined) await saveCursor(tx, source);
          return false;
        }
        const oldTarget = old === undefined || old.deleted === 1 ? null : old.target;
        if (row.ref !== 'HEAD' && oldTarget !== row.target) {
          const noted = await tx
            .insertInto('pushes')
            .values({
              did: row.did,
              rkey: row.rkey,
              rev: row.rev,
              repo: row.repo,
              ref: row.ref,
              old_target: oldTarget,
              new_target: row.target,
              time: change.time,
              seq: source?.seq ?? null,
              pusher: null,
            })
            .onConflict((oc) => oc.columns(['did', 'rkey', 'rev']).doNothing())
            .executeTakeFirst();
          // A push noted before (the same event again) has had its webhooks' deliveries queued.
          if (Number(noted.numInsertedOrUpdatedRows ?? 0) > 0)
            await queuePush(tx, { ...row, before: oldTarget, after: row.target });
        }
      }
      if (source !== undefined) await saveCursor(tx, source);
      return changed;
    });
  }

  /**
   * Applies a ref table (`dev.knotless.refs`) record change, and the event's position, in one
   * transaction (ref-tables.ts).
   */
  async applyRefTable(change: TableChange, source?: EventSource): Promise<TableApplied> {
    return this.db.transaction().execute(async (tx) => {
      const applied = await applyTable(tx, change, source);
      if (source !== undefined) await saveCursor(tx, source);
      return applied;
    });
  }

  /** Applies a ref table part (`dev.knotless.refs.part`) record change, and the event's position. */
  async applyRefTablePart(change: TableChange, source?: EventSource): Promise<TableApplied> {
    return this.db.transaction().execute(async (tx) => {
      const applied = await applyTablePart(tx, change, source);
      if (source !== undefined) await saveCursor(tx, source);
      return applied;
    });
  }

  /** The maintainers the owner's ref table of a repository lists (the last list it gave whole). */
  async maintainers(did: string, repo: string): Promise<NamedMaintainer[]> {
    return namedMaintainers(this.db, did, repo);
  }

  /** Every maintainer of every repository of an account, by repository name. */
  async accountMaintainers(did: string): Promise<Map<string, NamedMaintainer[]>> {
    return maintainersOfAccount(this.db, did);
  }

  /** The repositories of other accounts that an account maintains. */
  async maintainedBy(did: string): Promise<{ did: string; handle: string | null; repo: string }[]> {
    return maintainedBy(this.db, did);
  }

  /** Why the owner's ref table of a repository gives no listing now (its last good refs are shown). */
  async refTableProblem(did: string, repo: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('ref_tables')
      .select('problem')
      .where('did', '=', did)
      .where('rkey', '=', repo)
      .where('deleted', '=', 0)
      .executeTakeFirst();
    return row?.problem ?? undefined;
  }

  /** Records an account's verified handle (null when unverified) and PDS. */
  async putOwner(did: string, handle: string | null, pds: string | null): Promise<void> {
    const resolved = { handle, pds, resolved_at: new Date().toISOString() };
    await this.db.transaction().execute(async (tx) => {
      // A handle belongs to one account: whoever claimed it before has lost it.
      if (handle !== null)
        await tx.updateTable('owners').set({ handle: null }).where('handle', '=', handle).execute();
      // The account's status is its PDS's word, kept by its own events (accounts.setStatus).
      await tx
        .insertInto('owners')
        .values({ did, ...resolved, status: null })
        .onConflict((oc) => oc.column('did').doUpdateSet(resolved))
        .execute();
    });
  }

  /** The newest revision of an account's repository verified here, with when and against what. */
  async verified(
    did: string,
  ): Promise<{ rev: string; at: string; key: string | null; pds: string | null } | undefined> {
    const row = await this.db
      .selectFrom('owners')
      .select(['verified_rev', 'verified_at', 'verified_key', 'verified_pds'])
      .where('did', '=', did)
      .executeTakeFirst();
    if (row?.verified_rev == null || row.verified_at == null) return undefined;
    return { rev: row.verified_rev, at: row.verified_at, key: row.verified_key, pds: row.verified_pds };
  }

  /**
   * Records that the account's signed commit at `rev` was verified, by `key`, as `pds` served it:
   * only a newer revision replaces the one held, or any revision at another key or PDS (the account
   * moved or rotated its key, and its history goes on from there). The owner row must exist.
   */
  async putVerified(
    did: string,
    v: { rev: string; key: string; pds: string | null; at: string },
  ): Promise<void> {
    await this.db
      .updateTable('owners')
      .set({ verified_rev: v.rev, verified_at: v.at, verified_key: v.key, verified_pds: v.pds })
      .where('did', '=', did)
      .where((eb) =>
        eb.or([
          eb('verified_rev', 'is', null),
          eb('verified_rev', '<=', v.rev),
          eb('verified_key', 'is', null),
          eb('verified_key', '!=', v.key),
          ...(v.pds === null ? [] : [eb('verified_pds', 'is', null), eb('verified_pds', '!=', v.pds)]),
        ]),
      )
      .execute();
  }

  /** An account by DID or handle. */
  async owner(actor: string): Promise<OwnerTable | undefined> {
    const col = actor.startsWith('did:') ? 'did' : 'handle';
    return this.db
      .selectFrom('owners')
      .selectAll()
      .where(col, '=', actor.toLowerCase() === actor || col === 'did' ? actor : actor.toLowerCase())
      .executeTakeFirst();
  }

  #repos() {
    return (
      this.db
        .selectFrom('repos')
        .leftJoin('owners', 'owners.did', 'repos.did')
        .select([
          'repos.did',
          'repos.name',
          'repos.description',
          'repos.created_at',
          'repos.fork_of',
          'repos.private',
          'repos.indexed_at',
          'owners.handle',
        ])
        .where('repos.deleted', '=', 0)
        // An account that is not active has its repositories hidden until it is again.
        .where('owners.status', 'is', null)
    );
  }

  /** One repository, unless deleted or unknown. */
  async repo(did: string, name: string): Promise<RepoRow | undefined> {
    return this.#repos().where('repos.did', '=', did).where('repos.name', '=', name).executeTakeFirst();
  }

  /** Repositories, newest first; of one account when `did` is given. */
  async repos(opts: { did?: string; limit: number; offset?: number }): Promise<RepoRow[]> {
    let q = this.#repos();
    if (opts.did !== undefined) q = q.where('repos.did', '=', opts.did);
    return q
      .orderBy('repos.created_at', 'desc')
      .orderBy('repos.name')
      .limit(opts.limit)
      .offset(opts.offset ?? 0)
      .execute();
  }

  /** Repositories whose name, description or owner's handle contains `text` (any case). */
  async search(text: string, limit: number): Promise<RepoRow[]> {
    const like = `%${text.toLowerCase().replace(/[\\%_]/g, (c) => '\\' + c)}%`;
    const lower = (col: string) => sql<string>`lower(${sql.ref(col)})`;
    return this.#repos()
      .where((eb) =>
        eb.or([
          eb(lower('repos.name'), 'like', sql<string>`${like} escape '\\'`),
          eb(lower('repos.description'), 'like', sql<string>`${like} escape '\\'`),
          eb(lower('owners.handle'), 'like', sql<string>`${like} escape '\\'`),
        ]),
      )
      .orderBy('repos.created_at', 'desc')
      .limit(limit)
      .execute();
  }

  /**
   * The live refs of a repository (HEAD included), in name order: its owner's ref table's when it
   * has one, else its ref records'.
   */
  async refs(did: string, repo: string): Promise<ListedRef[]> {
    return liveRefs(this.db, did, repo);
  }

  /** Every ref row of an account, tombstones included (for a backfill to find what disappeared). */
  async allRefKeys(did: string): Promise<{ rkey: string; rev: string; deleted: number }[]> {
    return this.db.selectFrom('refs').select(['rkey', 'rev', 'deleted']).where('did', '=', did).execute();
  }

  /** Every ref table and part row of an account, tombstones included (for a backfill). */
  async allTableKeys(
    did: string,
    table: 'ref_tables' | 'ref_table_parts',
  ): Promise<{ rkey: string; rev: string; deleted: number }[]> {
    return this.db.selectFrom(table).select(['rkey', 'rev', 'deleted']).where('did', '=', did).execute();
  }

  /** Every repository row of an account, tombstones included. */
  async allRepoNames(did: string): Promise<{ name: string; rev: string; deleted: number }[]> {
    return this.db.selectFrom('repos').select(['name', 'rev', 'deleted']).where('did', '=', did).execute();
  }

  /** Recent pushes, newest first; of one repository when given. */
  async pushes(opts: { did?: string; repo?: string; limit: number }): Promise<PushRow[]> {
    let q = this.db
      .selectFrom('pushes')
      .leftJoin('owners', 'owners.did', 'pushes.did')
      .innerJoin('repos', (j) =>
        j.onRef('repos.did', '=', 'pushes.did').onRef('repos.name', '=', 'pushes.repo'),
      )
      .leftJoin('owners as pushed_by', 'pushed_by.did', 'pushes.pusher')
      .selectAll('pushes')
      .select(['owners.handle', 'pushed_by.handle as pusher_handle'])
      .where('repos.deleted', '=', 0)
      .where('owners.status', 'is', null);
    if (opts.did !== undefined) q = q.where('pushes.did', '=', opts.did);
    if (opts.repo !== undefined) q = q.where('pushes.repo', '=', opts.repo);
    return q.orderBy('pushes.time', 'desc').orderBy('pushes.rev', 'desc').limit(opts.limit).execute();
  }

  /** Every repository that has live refs, to bring mirrors up to date at start. */
  async reposWithRefs(): Promise<{ did: string; repo: string }[]> {
    const records = await this.db
      .selectFrom('refs')
      .select(['did', 'repo'])
      .distinct()
      .where('deleted', '=', 0)
      .execute();
    const tables = await this.db.selectFrom('table_refs').select(['did', 'repo']).distinct().execute();
    return [...new Map([...records, ...tables].map((r) => [`${r.did}/${r.repo}`, r])).values()];
  }

  /** Closes the connection. */
  close(): Promise<void> {
    return this.db.destroy();
  }
}
