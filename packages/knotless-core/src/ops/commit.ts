import fs from 'node:fs';
import path from 'node:path';
import type { BlobCache } from '../cache/blob-cache.ts';
import { Mirror } from '../cache/mirror.ts';
import { crashPoint } from '../crash.ts';
import { RefView } from '../cache/ref-view.ts';
import { KnotlessError } from '../errors.ts';
import { parseIdents, writeCommitStream, type TreeChange } from '../git/fast-import.ts';
import { checkRemovedPath, checkTreePath } from '../git/tree-path.ts';
import { isValidRefName } from '../git/refname.ts';
import { GitError, gitText } from '../git/run.ts';
import { BlobGone, MAX_RELISTS, loadPack, remoteChanged } from '../packs/transfer.ts';
import { foldPacks } from '../packs/fold.ts';
import { packMemoDir, rememberObjects } from '../packs/pack-objects-memo.ts';
import type { PackEntry, RefRecord } from '../records/ref-record.ts';
import {
  lastTableRead,
  lastTeamRead,
  readProvedRecords,
  readRepoRefs,
  tableRefs,
  type TableRead,
} from '../records/read-refs.ts';
import { applyRefUpdates, maintainersOf } from '../records/ref-table.ts';
import { writeRefTable } from '../records/table-write.ts';
import { SwapConflict } from '../records/ref-writes.ts';
import { contestedSentence, type RemoteRef, type RemoteRepo } from '../records/remote-repo.ts';
import { buildRangePacks } from '../packs/range-packs.ts';
import { storePacks } from '../packs/store-packs.ts';
import { safeText } from '../text/terminal.ts';
import { createHead } from './head.ts';
import { hasTeam, pushBranch } from './push/branch.ts';
import { tableSinceWrite } from './table-migrate.ts';
import { swapLoop } from './swap-loop.ts';
import type { Authorizer } from '../xrpc/client.ts';

/** One change to the tree: a file's new content, or a path to remove. */
export type Change = { kind: 'add'; path: string; file: string } | { kind: 'delete'; path: string };

/** What `repo commit` is asked to do. */
export interface CommitRequest {
  /** The branch (short name); default: the repository's HEAD branch, else main. */
  branch?: string;
  message: string;
  changes: Change[];
  /** "Name <email>", overriding git config and GIT_AUTHOR_*. */
  author?: string;
  /**
   * Makes the author the committer too (git config is not asked): for a front end that commits for
   * someone else, such as the appview for a signed-in reader, whose server's git identity is not theirs.
   */
  authorCommits?: boolean;
  /**
   * The branch's tip the changes were made against (a form rendered from it): when the branch is
   * elsewhere, nothing is written (`remote-changed`) instead of the changes going onto the new tip.
   */
  expect?: string;
}

/** What compaction and commits need besides the repository. */
export interface CommitEnv {
  auth: Authorizer;
  cache: BlobCache;
  cacheDir: string;
  /** Fold the small packs at the end of the list into the commit's write (off with KNOTLESS_COMPACT=0). */
  fold?: boolean;
  /** Write the structure and the blobs as two packs; undefined: yes (off with KNOTLESS_PACK_SPLIT=0). */
  split?: boolean;
  /**
   * The refs as something that follows the account holds them now (the warm agent's view), asked
   * before this machine's cached view; undefined when it has none.
   */
  known?: () => Promise<RemoteRef[] | undefined>;
  /**
   * The account committing, when it may not be the owner: a maintainer the owner's table names
   * commits into their own table (format.md, "Teams"). Undefined: the owner.
   */
  pusher?: { did: string; handle: string };
}

const MAX_ATTEMPTS = 5;

/** What a commit did: the commit id, the branch's full ref name and the pack list its record holds. */
export interface Committed {
  commit: string;
  ref: string;
  packs: PackEntry[];
  /**
   * The ref record as written (its key, CID and the account revision that wrote it, when the PDS
   * said): what the account's event stream will carry, for a reader that need not wait for it.
   */
  written: RemoteRef;
}

/**
 * The sentence refusing a commit by someone who may not write the repository: the owner and, when
 * it has some, the maintainers the owner's table lists may (both front ends say it the same way).
 */
export function commitRefusal(owner: string, label: string, me: string, maintainers: boolean): string {
  return `Only ${safeText(owner)}${maintainers ? ' and the maintainers it lists' : ''} can commit to ${label}; you are ${safeText(me)}.`;
}

/** Who the commit is by: git's identities (config and GIT_* variables), or --author for the author. */
/** `--author "Name <email>"`, split; anything else is refused before any request is made. */
function checkAuthor(author: string): RegExpExecArray {
  const parts = /^(.*?)\s*<([^<>]*)>$/.exec(author);
  if (parts === null) {
    throw new KnotlessError('usage', `--author "${author}" is not of the form "Name <email>".`);
  }
  return parts;
}

async function identities(
  mirror: Mirror,
  author: string | undefined,
  authorCommits = false,
): Promise<{ author: string; committer: string }> {
  const override = author === undefined ? undefined : checkAuthor(author);
  const env = override ? { GIT_AUTHOR_NAME: override[1]!, GIT_AUTHOR_EMAIL: override[2]! } : {};
  if (override && authorCommits)
    Object.assign(env, { GIT_COMMITTER_NAME: override[1]!, GIT_COMMITTER_EMAIL: override[2]! });
  let vars: string;
  try {
    vars = await gitText(['var', '-l'], { gitDir: mirror.gitDir, env });
  } catch (err) {
    if (!(err instanceof GitError)) throw err;
    vars = '';
  }
  return parseIdents(vars);
}

/** Applies the changes on top of `parent` (or an empty tree) in the mirror; returns the new commit. */
async function makeCommit(
  mirror: Mirror,
  parent: string | undefined,
  req: CommitRequest,
  who: { author: string; committer: string },
): Promise<{ commit: string; scratch: string }> {
  const changes: TreeChange[] = req.changes.map((c) =>
    c.kind === 'delete'
      ? c
      : {
          kind: 'add',
          path: c.path,
          executable: (fs.statSync(c.file).mode & 0o111) !== 0,
          content: fs.readFileSync(c.file),
        },
  );
  // fast-import must name a ref to update; one of this process's own, dropped once packed.
  const scratch = `refs/knotless/commit-${process.pid}-${Date.now()}`;
  const stream = writeCommitStream({ ref: scratch, parent, ...who, message: req.message, changes });
  const out = await gitText(['fast-import', '--done', '--quiet'], { gitDir: mirror.gitDir, input: stream });
  return { commit: out.trim(), scratch };
}

/** The ref a new branch starts from: HEAD's branch when the repository has one. */
function startingPoint(refs: RemoteRef[]): RemoteRef | undefined {
  const head = refs.find((r) => r.record.ref === 'HEAD')?.record.symref;
  return refs.find((r) => r.record.ref === head);
}

/**
 * Makes one commit on a branch without a clone: the objects come from the cache's mirror of the
 * repository, the refs from the cached view (no request) or one listing. The write is one
 * compare-and-swap `putRecord` (plus blob uploads for a large change); when the branch moved
 * meanwhile, the same changes are applied again on top of the new tip. Returns the commit id, the
 * branch's full ref name and the pack list its record now holds.
 */
export async function commitToBranch(
  remote: RemoteRepo,
  env: CommitEnv,
  req: CommitRequest,
): Promise<Committed> {
  // Before the mirror is touched or anything asked: a path no clone could check out is never
  // written. One to remove need only be a path: removing one git refuses repairs the repository.
  for (const c of req.changes) {
    if (c.kind === 'add') checkTreePath(c.path);
    else checkRemovedPath(c.path);
  }
  const mirror = new Mirror(env.cacheDir, remote.owner.did, remote.name);
  return mirror.hold(() => commitInMirror(remote, env, req, mirror));
}

async function commitInMirror(
  remote: RemoteRepo,
  env: CommitEnv,
  req: CommitRequest,
  mirror: Mirror,
): Promise<Committed> {
  if (req.author !== undefined) checkAuthor(req.author);
  // A branch git would refuse (`git check-ref-format --branch`) would be a record no clone can use.
  const b = req.branch;
  if (b !== undefined && (!isValidRefName(`refs/heads/${b}`) || b === 'HEAD' || b.startsWith('-'))) {
    throw new KnotlessError('usage', `"${b}" is not a branch name git accepts; pick another --branch.`);
  }
  // git's work (fast-import, pack-objects) comes before the first request: the connection's
  // handshakes (TCP, TLS) overlap with it instead of following it.
  remote.writer(env.auth).preconnect();
  const view = new RefView(env.cacheDir, remote.owner.did, remote.name);
  // An expected tip is checked against a listing, never a cached view that may be behind; so is
  // a maintainer's commit, which only a listing that read the owner's table allows.
  const pusher = env.pusher ?? { did: remote.owner.did, handle: remote.owner.handle ?? remote.owner.did };
  const foreign = pusher.did !== remote.owner.did;
  let refs = req.expect === undefined && !foreign ? ((await env.known?.()) ?? view.read()?.refs) : undefined;
  const headOf = (list: RemoteRef[] | undefined) => list?.find((r) => r.record.ref === 'HEAD')?.record.symref;
  const ref = req.branch !== undefined ? `refs/heads/${req.branch}` : (headOf(refs) ?? 'refs/heads/main');
  if (refs === undefined || !refs.some((r) => r.record.ref === ref)) {
    refs = await readRepoRefs(remote);
    // Someone else's repository that does not exist lists no maintainers: the refusal below says so.
    if (refs.length === 0 && !foreign && !(await remote.exists())) {
      throw new KnotlessError(
        'repo-missing',
        `${remote.label} does not exist; create it with \`knotless repo create ${remote.name}\`.`,
      );
    }
  }
  const team = lastTeamRead(remote);
  if (foreign && !(team?.members.some((m) => m.did === pusher.did) ?? false))
    throw new KnotlessError(
      'permission-denied',
      commitRefusal(remote.owner.handle ?? remote.owner.did, remote.label, pusher.handle, team !== undefined),
    );
  // Settled by the listing when there was one; refs from the cached view are plain ones (a private
  // repository's are never cached), and the opener still checks this machine's keys first.
  await remote.prepare(refs.length > 0 ? 'plain' : 'none');
  // Committing on one of several records that claim the branch would be choosing between them.
  const claims = refs.filter((r) => r.record.ref === ref);
  if (claims.length > 1) throw new KnotlessError('corrupt-remote', `${contestedSentence(ref, claims)}.`);
  let who: Promise<{ author: string; committer: string }> | undefined;
  let relists = 0;
  // `table`: the repository's ref table as read, which the commit is written into (one write of it).
  type Read = { refs: RemoteRef[]; current: RemoteRef | undefined; table?: TableRead };
  type Write = { key: string; record: RefRecord; commit: string; packs: PackEntry[] };
  const withRef = (list: RemoteRef[], table = lastTableRead(remote)): Read => ({
    refs: list,
    current: list.find((r) => r.record.ref === ref),
    ...(table === undefined ? {} : { table }),
  });
  // The refs read again: the table's when the repository has one, else its records, proved whole as
  // the first read was (the commit is judged on them).
  const reread = async (): Promise<Read> =>
    remote.layout === 'table' || hasTeam(remote)
      ? withRef(await readRepoRefs(remote))
      : withRef((await readProvedRecords(remote)).refs);
  const outcome = await swapLoop<Read, Write, Committed, never>({
    start: withRef(refs),
    maxAttempts: MAX_ATTEMPTS,
    decide: async ({ refs, current }) => {
      if (req.expect !== undefined && current?.record.target !== req.expect)
        throw new KnotlessError(
          'remote-changed',
          `${safeText(ref)} of ${remote.label} moved since ${req.expect.slice(0, 12)}; nothing was written.`,
        );
      const base = current ?? startingPoint(refs);
      const list: PackEntry[] = base?.record.packs ?? [];
      const synced = mirror.sync(list, (p) =>
        loadPack(remote.reader, remote.owner.did, p, env.cache, () => {}),
      );
      // The identities need the mirror to exist; asked while the packs are indexed.
      await mirror.create();
      who ??= identities(mirror, req.author, req.authorCommits);
      try {
        // Both awaited together: a failure of either is this attempt's, never an unhandled rejection.
        await Promise.all([synced, who]);
      } catch (err) {
        // A compaction or force push freed a blob of the list we read: read the refs again.
        if (!(err instanceof BlobGone)) throw err;
        if (++relists > MAX_RELISTS) throw remoteChanged(remote.label);
        const fresh = await reread();
        const packs = (fresh.current ?? startingPoint(fresh.refs))?.record.packs ?? [];
        if (packs.some((p) => p.parts?.some((part) => part.ref.$link === err.cid))) throw err;
        return { kind: 'again', state: fresh, free: true };
      }
      const parent = base?.record.target;
      // A team's write is a push of the commit (push/branch.ts), which builds its own pack.
      if (hasTeam(remote)) {
        const commit = await checkedCommit(mirror, parent, req, await who);
        const record: RefRecord = { repo: remote.name, ref, target: commit, packs: [], updatedAt: '' };
        return {
          kind: 'write',
          write: { key: current?.key ?? remote.refKey(ref), record, commit, packs: [] },
        };
      }
      const { commit, packs } = await buildCommit(remote, env, mirror, parent, list, req, await who);
      const record: RefRecord = {
        repo: remote.name,
        ref,
        target: commit,
        packs,
        updatedAt: new Date().toISOString(),
      };
      return {
        kind: 'write',
        write: { key: current?.key ?? remote.refKey(ref), record, commit, packs },
      };
    },
    write: async ({ key, record, commit, packs }, { refs, current, table }) => {
      crashPoint('commit:before-record-write');
      // One write of the table, swapped on the table as read: HEAD set when it had none.
      const intoTable = async (table: TableRead) => {
        const next = applyRefUpdates(
          table.table,
          [{ ref, target: commit, packs }],
          { repo: table.table.repo, head: ref, maintainer: false },
          new Date(),
        );
        const { cid, rev } = await writeRefTable(remote, env.auth, next, table);
        const landed = tableRefs(remote, { ...table, table: next, cid, rev });
        return { commit, ref, packs, written: landed.find((r) => r.record.ref === ref)! };
      };
      if (hasTeam(remote)) {
        const pushed = await pushBranch({
          remote,
          auth: env.auth,
          pusher,
          gitDir: mirror.gitDir,
          cache: env.cache,
          cacheDir: env.cacheDir,
          split: env.split ?? true,
          refs,
          ref,
          tip: commit,
        });
        if (pushed.kind === 'written')
          return { commit, ref, packs: pushed.written.record.packs, written: pushed.written };
        // Another writer's value that the commit does not contain: made again on top of it.
        if (pushed.reason === 'fetch first') throw new SwapConflict(`${ref} of ${remote.label} moved`);
        throw new KnotlessError(
          'push-rejected',
          `${safeText(ref)} of ${remote.label} was not written (${pushed.reason}); try again.`,
        );
      }
      if (table !== undefined) return intoTable(table);
      const { cid, rev } = await remote.putRef(env.auth, key, record, current?.cid ?? null);
      // A table created meanwhile (a migration) may have missed this record: the commit goes into
      // the table, on the value the record replaced; a table that holds another one is a conflict.
      const moved = await tableSinceWrite(remote, 1);
      if (moved !== undefined) {
        // A table naming maintainers takes the commit only as a team's write (judged against every
        // writer's value, which this machine's view of ref records never held): the commit is made
        // again on the listing of the team, and the record just written is put back as it was (swapped
        // on this write, so a later writer's record stays), since readers ignore it beside the table.
        if (maintainersOf(moved.table, remote.owner.did).length > 0) {
          try {
            if (current === undefined) await remote.deleteRef(env.auth, key, cid);
            else await remote.putRef(env.auth, key, current.record, cid);
          } catch (err) {
            if (!(err instanceof SwapConflict)) throw err;
          }
          throw new SwapConflict(`${remote.label} has maintainers now`);
        }
        const entry = moved.table.refs.find((r) => r.ref === ref && r.target !== undefined);
        if (entry?.target !== current?.record.target)
          throw new SwapConflict(`the ref table of ${remote.label} holds another value of ${ref}`);
        return intoTable(moved);
      }
      const written = [...refs.filter((r) => r.record.ref !== ref), { key, cid, rev, record }];
      if (headOf(refs) === undefined) {
        const head = await createHead(remote, env.auth, ref);
        if (head !== undefined) written.push(head);
      }
      view.write({ refs: written });
      return { commit, ref, packs, written: { key, cid, rev, record } };
    },
    reread: async ({ refs: before, table }, { key, commit }) => {
      // A team's, read as a listing reads it: the refs the rule computes from every writer's table.
      if (hasTeam(remote)) {
        const fresh = withRef(await readRepoRefs(remote));
        if (fresh.current?.record.target === commit)
          return {
            kind: 'done',
            value: { commit, ref, packs: fresh.current.record.packs, written: fresh.current },
          };
        return { kind: 'again', state: fresh };
      }
      // The table's, also when one was created under a record write (the layout is then the table),
      // read as a listing reads it: its owner may have named maintainers since.
      if (table !== undefined || remote.layout === 'table') {
        const fresh = withRef(await readRepoRefs(remote));
        if (remote.layout !== 'table') throw remoteChanged(remote.label);
        // A retried write whose first copy landed (its answer was lost) conflicts with itself: done.
        if (fresh.current?.record.target === commit)
          return {
            kind: 'done',
            value: { commit, ref, packs: fresh.current.record.packs, written: fresh.current },
          };
        return { kind: 'again', state: fresh };
      }
      const current = await remote.getRef(key);
      const refs = [
        ...before.filter((r) => r.record.ref !== ref),
        ...(current === undefined ? [] : [current]),
      ];
      // A retried write whose first copy landed (its answer was lost) conflicts with itself: done.
      if (current?.record.target === commit) {
        view.write({ refs });
        return { kind: 'done', value: { commit, ref, packs: current.record.packs, written: current } };
      }
      return { kind: 'again', state: { refs, current } };
    },
    // A new branch builds on another branch's packs, which a compaction may have freed since the
    // listing: list again and rebuild, once.
    relist: () => reread(),
  });
  if (outcome.kind === 'done') return outcome.value;
  if (outcome.kind === 'exhausted' && outcome.cause === 'blob-missing') {
    throw new KnotlessError(
      'push-rejected',
      `The PDS of ${safeText(remote.label)} kept refusing the commit because packs it builds on were removed meanwhile; try again.`,
      { cause: outcome.last },
    );
  }
  throw new KnotlessError('push-rejected', `${ref} of ${remote.label} kept changing; try again.`);
}

/** As `git commit` does, no empty commit (a --delete of a path that is not there, say): refused. */
async function refuseEmpty(
  mirror: Mirror,
  commit: string,
  parent: string | undefined,
  scratch: string,
): Promise<void> {
  if (parent === undefined) return;
  const trees = await gitText(['rev-parse', `${commit}^{tree}`, `${parent}^{tree}`], {
    gitDir: mirror.gitDir,
  });
  const [mine, theirs] = trees.trim().split('\n');
  if (mine !== theirs) return;
  await gitText(['update-ref', '-d', scratch], { gitDir: mirror.gitDir });
  throw new KnotlessError(
    'usage',
    'Nothing to commit: every --add already matches the branch, and every --delete names a path it does not have.',
  );
}

/** Makes the commit on `parent` alone (a team's write packs it as a push does); returns its id. */
async function checkedCommit(
  mirror: Mirror,
  parent: string | undefined,
  req: CommitRequest,
  who: { author: string; committer: string },
): Promise<string> {
  const { commit, scratch } = await makeCommit(mirror, parent, req, who);
  await refuseEmpty(mirror, commit, parent, scratch);
  // The objects stay in the mirror (nothing prunes it while it is held); the ref is only fast-import's.
  await gitText(['update-ref', '-d', scratch], { gitDir: mirror.gitDir });
  return commit;
}

/** Makes the commit on `parent` and the pack that carries it; returns the pack list to write. */
async function buildCommit(
  remote: RemoteRepo,
  env: CommitEnv,
  mirror: Mirror,
  parent: string | undefined,
  list: PackEntry[],
  req: CommitRequest,
  who: { author: string; committer: string },
): Promise<{ commit: string; packs: PackEntry[] }> {
  const { commit, scratch } = await makeCommit(mirror, parent, req, who);
  await refuseEmpty(mirror, commit, parent, scratch);
  const exclude = parent === undefined ? [] : [parent];
  // The structure and the blobs apart, as a push writes them (format.md, "Structure apart from
  // blobs"), so that a partial clone skips the blobs of a file committed here as it skips a push's.
  // What each pack carries is listed beside it, so the mirror adopts it without indexing it again.
  const [made] = await Promise.all([
    buildRangePacks({
      tips: [commit],
      exclude,
      progress: false,
      tmpDir: path.join(env.cacheDir, 'tmp'),
      gitDir: mirror.gitDir,
      split: env.split ?? true,
      list: true,
    }),
    gitText(['update-ref', '-d', scratch], { gitDir: mirror.gitDir }),
  ]);
  // The fold need not index the new packs either.
  const memoDir = packMemoDir(env.cacheDir);
  for (const { entry, objects } of made) {
    // Should the two ever disagree, the next sync indexes the pack as it would any other.
    if (objects?.length !== entry.count) continue;
    mirror.adopt(entry.id, [...objects]);
    if (entry.inline !== undefined) rememberObjects(entry.inline, objects, memoDir);
  }
  let built: PackEntry[] = [...list, ...made.map((m) => m.entry)];
  // The record is rewritten anyway: small packs at the end of its list merge in the same write.
  if (env.fold) {
    const folded = await foldPacks(built, {
      gitDir: mirror.gitDir,
      objectsDir: path.join(mirror.gitDir, 'objects'),
      memoDir,
    });
    if (folded !== built) crashPoint('commit:packs-folded');
    built = folded;
  }
  const packs = await storePacks(built, 1, {
    writer: remote.writer(env.auth),
    cache: env.cache,
    cacheDir: env.cacheDir,
    chatter: { verbosity: 0, progress: false },
    sealer: remote.sealer,
  });
  return { commit, packs };
}
