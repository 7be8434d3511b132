import type { Kysely } from 'kysely';
import { accountTargets, refreshTargets } from './forge-state.ts';
import type { Database } from './schema.ts';

/** The tables holding an account's own rows, all keyed by its DID in `did`. */
const ACCOUNT_TABLES = [
  'repos',
  'refs',
  'ref_tables',
  'ref_table_parts',
  'table_refs',
  'pushes',
  'pulls',
  'pull_statuses',
  'issues',
  'issue_states',
  'comments',
  'checks',
  'protections',
] as const;

/**
 * What the index knows of accounts that are not active. A deactivated, taken-down or suspended
 * account is hidden (its owner row says why) and shown again as it was when it is active again; a
 * deleted one loses every row it had, its owner row kept only to say it was deleted.
 */
export class AccountStore {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** Records an account's status (null: active). Only accounts the index knows are recorded. */
  async setStatus(did: string, status: string | null): Promise<boolean> {
    return this.#db.transaction().execute(async (tx) => {
      const res = await tx.updateTable('owners').set({ status }).where('did', '=', did).executeTakeFirst();
      // Its state records count, or stop counting, for the items they name in others' repositories.
      await refreshTargets(tx, await accountTargets(tx, did));
      return res.numUpdatedRows > 0n;
    });
  }

  /** The status of an account the index knows: null when active, undefined when unknown. */
  async status(did: string): Promise<string | null | undefined> {
    const row = await this.#db
      .selectFrom('owners')
      .select('status')
      .where('did', '=', did)
      .executeTakeFirst();
    return row?.status;
  }

  /** Removes every row of a deleted account; returns the names of its repositories (for their mirrors). */
  async purge(did: string): Promise<string[]> {
    return this.#db.transaction().execute(async (tx) => {
      const repos = await tx.selectFrom('repos').select('name').where('did', '=', did).execute();
      const refRepos = [
        ...(await tx.selectFrom('refs').select('repo').distinct().where('did', '=', did).execute()),
        ...(await tx.selectFrom('table_refs').select('repo').distinct().where('did', '=', did).execute()),
      ];
      const targets = await accountTargets(tx, did);
      for (const table of ACCOUNT_TABLES) await tx.deleteFrom(table).where('did', '=', did).execute();
      await tx.updateTable('owners').set({ status: 'deleted' }).where('did', '=', did).execute();
      await refreshTargets(tx, targets);
      return [...new Set([...repos.map((r) => r.name), ...refRepos.map((r) => r.repo)])];
    });
  }
}
