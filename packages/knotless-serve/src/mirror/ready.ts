// A plain-git clone is answered only from a mirror that holds what the index says the repository
// holds: a mirror still catching up (a push just indexed, a repository whose refs are not indexed
// yet) would otherwise serve an empty or partial repository as if it were the whole, and git would
// print "You appear to have cloned an empty repository" and exit 0.
import fs from 'node:fs';
import path from 'node:path';
import { REF_COLLECTION, XrpcError, refKeyPrefix, runGit } from 'knotless-core';
import { repoUri } from 'knotless-core/forge/records';
import { REFS_COLLECTION } from 'knotless-core/records/collections';
import { parseRefTable } from 'knotless-core/records/ref-table';
import type { Index } from '../db/index-store.ts';
import type { Mirror } from './mirror.ts';

/** Why a clone cannot be answered truthfully yet: said to git's user with HTTP 503 and Retry-After. */
export const CATCHING_UP =
  'This repository is still being mirrored by the appview; try again in a few seconds.';

/** The mirror's refs, name to object id. */
async function mirrorRefs(gitDir: string): Promise<Map<string, string> | undefined> {
  if (!fs.existsSync(path.join(gitDir, 'HEAD'))) return undefined;
  const out = await runGit(['for-each-ref', '--format=%(objectname) %(refname)'], { gitDir });
  const lines = out.stdout.toString('utf8').split('\n').filter(Boolean);
  return new Map(lines.map((l) => [l.slice(41), l.slice(0, 40)] as const));
}

/** True when the index's refs of the repository are all in the mirror, at the commits it names. */
async function matches(index: Index, mirror: Mirror, did: string, repo: string): Promise<boolean> {
  const wanted = (await index.refs(did, repo)).filter((r) => r.target !== null && r.ref !== 'HEAD');
  const have = await mirrorRefs(mirror.gitDir(did, repo));
  if (have === undefined) return false;
  return wanted.every((r) => have.get(r.ref) === r.target) && have.size === wanted.length;
}

/**
 * Whether the owner's ref table as stored names any ref: an entry with a target, or a part (each part
 * holds at least one). A table `repo create` made names none. It is read by the rule every reader
 * uses (parseRefTable); a table that rule refuses counts as naming some: the answer "empty" is given
 * only when it is known to be true.
 */
function tableHoldsRefs(value: unknown, did: string, repo: string, log: (line: string) => void): boolean {
  let table: ReturnType<typeof parseRefTable>;
  try {
    table = parseRefTable(value, repoUri(did, repo), true);
  } catch (err) {
    // Refused by the readers' rule: not known to be empty (the clone says "still being mirrored").
    log(
      `clone of ${did}/${repo}: its ref table is not one readers take: ${err instanceof Error ? err.message : String(err)}`,
    );
    return true;
  }
  return table.parts.length > 0 || table.refs.some((r) => r.target !== undefined);
}

/**
 * Whether the owner's PDS holds refs of the repository in its ref table (one getRecord) or any ref record of it
 * (one listRecords of one record, the first key after the repository's prefix). A PDS that cannot be asked counts as holding some:
 * an empty answer is given only when it is known to be true.
 */
async function ownerHasRefs(
  mirror: Mirror,
  did: string,
  repo: string,
  log: (line: string) => void,
): Promise<boolean> {
  try {
    const client = await mirror.ownerClient(did);
    // A ref table holds the refs of a repository that has one: its record is asked for first.
    const table = await client
      .query<{ value?: unknown }>('com.atproto.repo.getRecord', {
        repo: did,
        collection: REFS_COLLECTION,
        rkey: repo,
      })
      .then(
        (got) => ({ value: got.value }),
        (err: unknown) => {
          if (err instanceof XrpcError && err.error === 'RecordNotFound') return undefined;
          throw err;
        },
      );
    if (table !== undefined) return tableHoldsRefs(table.value, did, repo, log);
    const prefix = refKeyPrefix(repo);
    const page = await client.query<{ records?: { uri?: unknown }[] }>('com.atproto.repo.listRecords', {
      repo: did,
      collection: REF_COLLECTION,
      limit: 1,
      reverse: true,
      cursor: prefix,
    });
    const uri = page.records?.[0]?.uri;
    return typeof uri === 'string' && uri.slice(uri.lastIndexOf('/') + 1).startsWith(prefix);
  } catch (err) {
    log(
      `clone of ${did}/${repo}: its PDS could not say whether it holds refs: ${err instanceof Error ? err.message : String(err)}`,
    );
    return true;
  }
}

/**
 * Brings the mirror in line with the index before a clone is answered, waiting at most `waitMs` for
 * a sync: undefined when the mirror can answer truthfully, else the sentence to refuse with.
 */
export async function readyToClone(
  index: Index,
  mirror: Mirror,
  did: string,
  repo: string,
  waitMs: number,
  log: (line: string) => void,
): Promise<string | undefined> {
  const indexed = (await index.refs(did, repo)).some((r) => r.target !== null);
  // Nothing indexed: the repository is empty only if its owner's records say so.
  if (!indexed && (await ownerHasRefs(mirror, did, repo, log))) return CATCHING_UP;
  if (await matches(index, mirror, did, repo)) return undefined;
  let timer: NodeJS.Timeout | undefined;
  const out = new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)));
  await Promise.race([mirror.schedule(did, repo, true), out]).finally(() => clearTimeout(timer));
  return (await matches(index, mirror, did, repo)) ? undefined : CATCHING_UP;
}
