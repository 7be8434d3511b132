import { readRefTable, type TableRead } from '../records/read-refs.ts';
import type { RefRecord } from '../records/ref-record.ts';
import { applyRefUpdates } from '../records/ref-table.ts';
import { rewriteTable } from '../records/table-write.ts';
import type { RemoteRef, RemoteRepo } from '../records/remote-repo.ts';
import type { Authorizer } from '../xrpc/client.ts';
import { swapLoop, type SwapStep } from './swap-loop.ts';

/** The HEAD record naming `branch` (a full ref name). */
export function headRecord(remote: RemoteRepo, branch: string): RefRecord {
  return { repo: remote.name, ref: 'HEAD', symref: branch, packs: [], updatedAt: new Date().toISOString() };
}

/**
 * Names `branch` as HEAD of a repository that has none yet (a push's first branch, `repo commit` on
 * an empty repository), on the same loop as every ref write: a create, whose swap names no record.
 * A conflict means another writer's HEAD is there; it stands, so the loop settles without reading
 * (HEAD is never moved from a value nobody here read). Returns the record written, or undefined.
 */
export async function createHead(
  remote: RemoteRepo,
  auth: Authorizer,
  branch: string,
): Promise<RemoteRef | undefined> {
  await remote.prepare();
  const key = remote.refKey('HEAD');
  const record = headRecord(remote, branch);
  const outcome = await swapLoop<null, null, RemoteRef | undefined, never>({
    start: null,
    maxAttempts: 1,
    decide: () => Promise.resolve({ kind: 'write', write: null }),
    write: async () => ({ key, ...(await remote.putRef(auth, key, record, null)), record }),
    reread: () => Promise.resolve({ kind: 'done', value: undefined }),
  });
  return outcome.kind === 'done' ? outcome.value : undefined;
}

/** What moving HEAD found: the branch it names now, and whether this call moved it. */
export interface HeadMove {
  branch: string;
  changed: boolean;
}

interface HeadState {
  head: RemoteRef | undefined;
  target: RemoteRef | undefined;
}

/**
 * Points HEAD (the default branch) at `branch`, a full `refs/heads/…` name that must exist, on the
 * swap loop like every ref write: the HEAD read is the swap, so a HEAD another writer moved meanwhile
 * is read again and judged anew rather than overwritten. Refuses with `missing` when the branch has no
 * record (or several claim it, so none counts). A repository on a ref table has its HEAD in the table's
 * `head`: the table is written (swapped on the table read, read again and judged anew on a conflict).
 */
export async function moveHead(
  remote: RemoteRepo,
  auth: Authorizer,
  branch: string,
): Promise<{ kind: 'moved'; move: HeadMove } | { kind: 'missing' } | { kind: 'busy' }> {
  await remote.prepare();
  const key = remote.refKey('HEAD');
  const read = async (): Promise<HeadState> => {
    const [head, target] = await Promise.all([remote.getRef(key), remote.getRef(remote.refKey(branch))]);
    return { head, target };
  };
  const judge = (s: HeadState): SwapStep<HeadState, null, HeadMove, 'missing'> => {
    if (s.target === undefined || s.target.record.ref !== branch || s.target.record.target === undefined)
      return { kind: 'refuse', why: 'missing' };
    if (s.head?.record.symref === branch) return { kind: 'done', value: { branch, changed: false } };
    return { kind: 'write', write: null };
  };
  // The table is read beside the records, so a repository without one waits no longer for it.
  const [table, start] = await Promise.all([
    remote.verifier === undefined ? undefined : readRefTable(remote),
    read(),
  ]);
  if (table !== undefined) return moveTableHead(remote, auth, branch, table);
  const outcome = await swapLoop<HeadState, null, HeadMove, 'missing'>({
    start,
    maxAttempts: 5,
    decide: (s) => Promise.resolve(judge(s)),
    write: async (_w, s) => {
      await remote.putRef(auth, key, headRecord(remote, branch), s.head?.cid ?? null);
      return { branch, changed: true };
    },
    reread: async () => {
      const s = await read();
      const step = judge(s);
      return step.kind === 'write' ? { kind: 'again', state: s } : step;
    },
  });
  if (outcome.kind === 'done') return { kind: 'moved', move: outcome.value };
  if (outcome.kind === 'refused') return { kind: 'missing' };
  return { kind: 'busy' };
}

/** {@link moveHead} for a repository whose refs are in a ref table: the table's `head` is HEAD. */
async function moveTableHead(
  remote: RemoteRepo,
  auth: Authorizer,
  branch: string,
  first: TableRead,
): Promise<{ kind: 'moved'; move: HeadMove } | { kind: 'missing' } | { kind: 'busy' }> {
  let missing = false;
  const res = await rewriteTable(remote, auth, first, (read) => {
    missing = !read.table.refs.some((r) => r.ref === branch && r.target !== undefined);
    if (missing || read.table.head === branch) return Promise.resolve({ kind: 'none' });
    const next = applyRefUpdates(read.table, [], { repo: read.table.repo, maintainer: false }, new Date());
    return Promise.resolve({ kind: 'write', table: { ...next, head: branch } });
  });
  if (res.kind === 'busy') return { kind: 'busy' };
  if (missing) return { kind: 'missing' };
  return { kind: 'moved', move: { branch, changed: res.kind === 'written' } };
}
