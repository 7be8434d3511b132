import { refKey } from '../records/ref-key.ts';
import type { RefRecord } from '../records/ref-record.ts';
import type { RemoteRef, RemoteRepo } from '../records/remote-repo.ts';
import type { Authorizer } from '../xrpc/client.ts';
import { swapLoop } from './swap-loop.ts';

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
  const key = refKey(remote.name, 'HEAD');
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
