// The events webhooks are told of, worked out in the transaction that indexes a record: a push
// when a ref's target changed (the pushes row is new), a pull request or issue opened, a new round,
// a state that changed (closed, merged, reopened), a comment made. Each is queued under a key
// naming it, so the same record seen again (a replayed stream, a backfill) queues nothing more.
import type { Kysely, Transaction } from 'kysely';
import type { Database } from './schema.ts';
import { queueEvent } from './webhook-store.ts';

type Db = Kysely<Database> | Transaction<Database>;

async function repository(tx: Db, did: string, name: string): Promise<Record<string, unknown>> {
  const owner = await tx.selectFrom('owners').select('handle').where('did', '=', did).executeTakeFirst();
  return { did, handle: owner?.handle ?? null, name };
}

/**
 * A ref of `did`'s repository moved from `before` to `after` (null: created, deleted), by its owner
 * or by `pusher`, a maintainer (their DID) whose own table moved it.
 */
export async function queuePush(
  tx: Db,
  p: {
    did: string;
    rkey: string;
    rev: string;
    repo: string;
    ref: string;
    before: string | null;
    after: string | null;
    pusher?: string | null;
  },
): Promise<void> {
  const repo = await repository(tx, p.did, p.repo);
  const by =
    p.pusher == null
      ? undefined
      : await tx.selectFrom('owners').select('handle').where('did', '=', p.pusher).executeTakeFirst();
  await queueEvent(tx, p.did, p.repo, 'push', `push:${p.did}/${p.rkey}@${p.rev}`, {
    event: 'push',
    repository: repo,
    ref: p.ref,
    before: p.before,
    after: p.after,
    // The owner's records and table are the account's own writes; a maintainer writes their own table.
    pusher:
      p.pusher == null
        ? { did: p.did, handle: repo['handle'] }
        : { did: p.pusher, handle: by?.handle ?? null },
  });
}

/** A pull request or issue a forge write may change the state of. */
export interface Item {
  kind: 'pulls' | 'issues';
  did: string;
  rkey: string;
}

/** The items' states now (undefined for one not indexed or deleted), to compare after the write. */
export async function itemStates(tx: Db, items: Item[]): Promise<(string | undefined)[]> {
  const out: (string | undefined)[] = [];
  for (const it of items) {
    const row = await tx
      .selectFrom(it.kind as 'issues')
      .select('state')
      .where('did', '=', it.did)
      .where('rkey', '=', it.rkey)
      .where('deleted', '=', 0)
      .executeTakeFirst();
    out.push(row?.state);
  }
  return out;
}

const PULL_COLLECTION = 'dev.knotless.pull';
const ISSUE_COLLECTION = 'dev.knotless.issue';

async function itemView(
  tx: Db,
  it: Item,
): Promise<{ repo: [string, string]; view: Record<string, unknown> } | undefined> {
  const row = await tx
    .selectFrom(it.kind as 'pulls')
    .selectAll()
    .where('did', '=', it.did)
    .where('rkey', '=', it.rkey)
    .where('deleted', '=', 0)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  const author = await tx.selectFrom('owners').select('handle').where('did', '=', it.did).executeTakeFirst();
  const collection = it.kind === 'pulls' ? PULL_COLLECTION : ISSUE_COLLECTION;
  const view: Record<string, unknown> = {
    uri: `at://${it.did}/${collection}/${it.rkey}`,
    author: { did: it.did, handle: author?.handle ?? null },
    title: row.title,
    state: row.state,
    labels: JSON.parse(row.labels) as unknown,
  };
  if (it.kind === 'pulls') {
    const rounds = JSON.parse(row.rounds) as { head: string; base: string }[];
    Object.assign(view, {
      base: row.base,
      head: { repo: row.head_repo, branch: row.head_branch },
      rounds: rounds.length,
      headCommit: rounds.at(-1)?.head ?? null,
      merged: row.merged,
    });
  }
  return { repo: [row.repo_did, row.repo_name], view };
}

/** What the state change from `before` to `after` is called, or undefined when it is none. */
function stateAction(before: string | undefined, after: string | undefined): string | undefined {
  if (before === undefined || after === undefined || before === after) return undefined;
  if (after === 'open') return 'reopened';
  return after === 'merged' ? 'merged' : 'closed';
}

/**
 * Queues the events one forge write made: `items` are the pull requests and issues it may have
 * changed, `before` their states before it; `old` the row the write replaced (undefined: a new
 * record) and `row` the one written (undefined: a delete).
 */
export async function queueForgeEvents(
  tx: Db,
  change: { did: string; collection: string; rkey: string; rev: string },
  table: string,
  row: Record<string, unknown> | undefined,
  old: Record<string, unknown> | undefined,
  items: Item[],
  before: (string | undefined)[],
): Promise<void> {
  const after = await itemStates(tx, items);
  const name = (kind: Item['kind']) => (kind === 'pulls' ? 'pull_request' : 'issue');
  const fresh = row !== undefined && (old === undefined || old['deleted'] === 1);
  for (const [i, it] of items.entries()) {
    const made = fresh && (table === 'pulls' || table === 'issues');
    let action = made ? 'opened' : stateAction(before[i], after[i]);
    let key = made
      ? `${it.did}/${it.rkey}`
      : `${it.did}/${it.rkey}:${change.did}/${change.collection}/${change.rkey}@${change.rev}`;
    if (action === undefined && table === 'pulls' && row !== undefined && old !== undefined) {
      const n = (JSON.parse(String(row['rounds'])) as unknown[]).length;
      const was = (JSON.parse(String(old['rounds'])) as unknown[]).length;
      if (n > was) {
        action = 'round';
        key = `${it.did}/${it.rkey}#${n}`;
      }
    }
    if (action === undefined) continue;
    const item = await itemView(tx, it);
    if (item === undefined) continue;
    const kind = name(it.kind);
    await queueEvent(tx, item.repo[0], item.repo[1], kind, `${kind}.${action}:${key}`, {
      event: kind,
      action,
      repository: await repository(tx, item.repo[0], item.repo[1]),
      [kind === 'pull_request' ? 'pull' : 'issue']: item.view,
    });
  }
  if (table === 'comments' && fresh && row !== undefined) {
    const subject: Item = {
      kind: row['subject_collection'] === PULL_COLLECTION ? 'pulls' : 'issues',
      did: String(row['subject_did']),
      rkey: String(row['subject_rkey']),
    };
    if (row['subject_collection'] !== PULL_COLLECTION && row['subject_collection'] !== ISSUE_COLLECTION)
      return;
    const item = await itemView(tx, subject);
    if (item === undefined) return;
    const author = await tx
      .selectFrom('owners')
      .select('handle')
      .where('did', '=', change.did)
      .executeTakeFirst();
    await queueEvent(tx, item.repo[0], item.repo[1], 'comment', `comment:${change.did}/${change.rkey}`, {
      event: 'comment',
      action: 'created',
      repository: await repository(tx, item.repo[0], item.repo[1]),
      comment: {
        uri: `at://${change.did}/dev.knotless.comment/${change.rkey}`,
        author: { did: change.did, handle: author?.handle ?? null },
        body: row['body'],
        ...(row['path'] == null ? {} : { path: row['path'], line: row['line'] }),
      },
      subject: { kind: subject.kind === 'pulls' ? 'pull_request' : 'issue', ...item.view },
    });
  }
}

/** A runner's verdict on a commit changed state (`before` null: its first on that context). */
export async function queueCheck(
  tx: Db,
  c: {
    did: string;
    rkey: string;
    repoDid: string;
    repoName: string;
    before: string | null;
    record: { commit: string; context: string; state: string; targetUrl?: string; description?: string };
  },
): Promise<void> {
  const runner = await tx.selectFrom('owners').select('handle').where('did', '=', c.did).executeTakeFirst();
  await queueEvent(tx, c.repoDid, c.repoName, 'check', `check:${c.did}/${c.rkey}`, {
    event: 'check',
    action: 'state',
    repository: await repository(tx, c.repoDid, c.repoName),
    check: {
      uri: `at://${c.did}/dev.knotless.check/${c.rkey}`,
      runner: { did: c.did, handle: runner?.handle ?? null },
      commit: c.record.commit,
      context: c.record.context,
      state: c.record.state,
      previousState: c.before,
      targetUrl: c.record.targetUrl ?? null,
      description: c.record.description ?? null,
    },
  });
}
