// A push to a repository with maintainers (format.md, "Teams"): the pusher, the owner or a
// maintainer, writes only their own table, each entry naming in `over` the values of the other
// writers it replaced (those it descends from, checked with git on local objects, or every one when
// the push was forced). Then it reads every other writer's table again and says `ok` only for the
// refs whose entry supersedes every other writer's current one (`holdsAgainst`); the others are
// withdrawn (written back as they were) and refused with git's `fetch first`. Two writers racing
// with divergent commits therefore never both get `ok`: each one's `over` names the other's old value.
import { crashPoint } from '../../crash.ts';
import { KnotlessError, isKnotlessError, type PushReason } from '../../errors.ts';
import { isAncestor, presentObjects } from '../../git/objects.ts';
import {
  readMemberTable,
  readRefTable,
  readTeamRefs,
  teamTable,
  type MemberTable,
  type TableRead,
  type TeamRead,
} from '../../records/read-refs.ts';
import {
  applyRefUpdates,
  compareRefNames,
  refTableKey,
  type Over,
  type RefTable,
  type RefUpdate,
  type TableRef,
} from '../../records/ref-table.ts';
import { maintainerList, readMaintainers, type Maintainer } from '../../records/maintainers.ts';
import { unionPacks } from '../../records/ref-record.ts';
import { SwapConflict } from '../../records/ref-writes.ts';
import type { RemoteRef, RemoteRepo } from '../../records/remote-repo.ts';
import { REPO_COLLECTION } from '../../records/collections.ts';
import { writeRefTable } from '../../records/table-write.ts';
import { holdsAgainst, type TeamTable } from '../../records/team-refs.ts';
import { printErr, safeText } from '../../text/terminal.ts';
import { copyPacks, tableBlobs } from '../team.ts';
import type { Update } from './check.ts';
import { MAX_ATTEMPTS, type WriteJob, type Written } from './job.ts';

/** Why a push was refused when another writer's table could not be read. */
const UNREAD: PushReason = "a maintainer's refs could not be read";

/** The pusher's own table of the repository: where it is, under which key, and as last read. */
interface Mine {
  remote: RemoteRepo;
  key: string;
  read: Pick<TableRead, 'cid' | 'stored' | 'table'> | undefined;
  owner: boolean;
}

/** The pusher's table of the repository, from the team the listing read. */
export function ownTable(remote: RemoteRepo, team: TeamRead, me: string): Mine {
  if (me === remote.owner.did)
    return { remote, key: refTableKey(remote.name, me, me), read: team.owner, owner: true };
  const member = team.members.find((m) => m.did === me);
  if (member === undefined) {
    const unread = team.unread.find((u) => u.did === me);
    throw new KnotlessError(
      'push-rejected',
      unread === undefined
        ? `You are not a maintainer of ${remote.label}; nothing was pushed.`
        : `Your own refs of ${remote.label} could not be read (${unread.why}); nothing was pushed, try again.`,
    );
  }
  return {
    remote: member.remote,
    key: refTableKey(remote.name, remote.owner.did, me),
    read: member.read,
    owner: false,
  };
}

/**
 * Writes a push as one writer of a team (see the file's comment). `team` is what the listing read;
 * the refs git decided on (`job.refs`) are the values the rule computed from it.
 */
export async function writeTeam(job: WriteJob, team: TeamRead): Promise<Written[]> {
  const { env, updates } = job;
  const { remote, auth } = env;
  const me = env.pusher.did;
  let mine = ownTable(remote, team, me);
  // A push is confirmed only against every other writer's table: with one unread (their PDS down,
  // a DID that does not resolve, a table that breaks a rule) nothing could be, so nothing is written.
  const unread = team.unread.filter((u) => u.did !== me);
  if (unread.length > 0) {
    printErr(
      `knotless: The refs of ${unread.map((u) => `${safeText(u.did)} (${safeText(u.why)})`).join(', ')} could not be read, and a push to ${remote.label} is confirmed only against every maintainer's; nothing was pushed, try again when they can be read.`,
    );
    return updates.map((u) => ({ dst: u.dst, error: UNREAD }));
  }
  // A maintainer's table of a public repository is plain: no key ring of theirs is looked for.
  await mine.remote.prepare('plain');
  let others = othersOf(remote, team, me);
  // The team the writes are decided against: the listing's until a conflict reads it again.
  let known = team;
  // Every blob the pusher's table lists must be in the pusher's account: copy what is not.
  // Each pack once: a table whose entry lists one pack twice breaks a rule, and every reader would
  // leave the pusher's whole table out (a tag's push can list its new pack twice).
  const packs = await copyPacks(
    mine.remote,
    auth,
    unionPacks([job.source.packs]),
    env.cache,
    { did: remote.owner.did, reader: remote.reader },
    tableBlobs(mine.read?.table),
  );
  for (let attempt = 1; ; attempt++) {
    const decided = await decide(job, others);
    const writes = decided.flatMap((d) => (d.kind === 'write' ? [d.update] : []));
    if (writes.length === 0 || (env.options.atomic && decided.some((d) => d.kind === 'refuse')))
      return answer(updates, decided, env.options.atomic);
    const withPacks = writes.map((w) => (w.target === undefined ? w : { ...w, packs }));
    const next = applyRefUpdates(
      mine.read?.table,
      withPacks,
      mine.owner
        ? {
            repo: team.owner.table.repo,
            ...(job.head === undefined ? {} : { head: job.head }),
            maintainer: false,
            tombstones: true,
          }
        : { repo: `at://${remote.owner.did}/${REPO_COLLECTION}/${remote.name}`, maintainer: true },
      new Date(),
    );
    let cid: string;
    try {
      crashPoint('push:before-record-write');
      cid = (await writeRefTable(mine.remote, auth, next, mine.read, mine.key)).cid;
      crashPoint('push:after-record-write');
    } catch (err) {
      // Another push of the pusher's own moved their table: read the team again and decide anew.
      if (!(err instanceof SwapConflict) || attempt >= MAX_ATTEMPTS) throw err;
      const fresh = await rereadTeam(remote, me);
      mine = ownTable(remote, fresh, me);
      await mine.remote.prepare('plain');
      others = othersOf(remote, fresh, me);
      known = fresh;
      continue;
    }
    const written = { cid, stored: mine.read?.stored ?? { ...next, parts: [], gone: [] }, table: next };
    // Read after the write: a value is acknowledged only when it holds against every other writer's.
    const now = await readOthers(
      remote,
      me,
      mine.owner ? next : undefined,
      known.members.map((m) => m.did),
    );
    // The write swapped on the pusher's table as listed, and every other writer's table read after
    // it is the one listed: what git was shown (the warm agent's view) was current, proved.
    if (
      attempt === 1 &&
      now.kind === 'read' &&
      remote.viewProof?.state === 'pending' &&
      sameTables(now.cids, listedCids(remote, known, me))
    )
      remote.viewProof.state = 'proven';
    const failing = new Set<string>();
    if (now.kind === 'refused') for (const w of writes) failing.add(w.ref);
    else
      for (const w of writes) {
        const entry = next.refs.find((r) => r.ref === w.ref);
        const teamEntry =
          entry === undefined ? undefined : teamTable(me, { ...next, refs: [entry] }).entries.get(w.ref);
        // A deletion that left no entry (no one else held the ref) holds while no one else holds it.
        const holds =
          teamEntry === undefined
            ? now.tables.every((t) => !t.entries.has(w.ref))
            : holdsAgainst(me, teamEntry, now.tables, w.ref);
        if (!holds) failing.add(w.ref);
      }
    const atomicFail = env.options.atomic && failing.size > 0;
    const withdraw = atomicFail ? writes.map((w) => w.ref) : [...failing];
    if (withdraw.length > 0) {
      // A writer killed here leaves its refused value standing: the divergence readers show.
      crashPoint('push:before-withdraw');
      await withdrawEntries(mine, auth, written, withdraw, remote);
    }
    if (now.kind === 'refused') {
      printErr(`knotless: ${now.sentence}`);
      return updates.map((u) => ({ dst: u.dst, error: now.reason }));
    }
    return updates.map((u): Written => {
      const d = decided.find((x) => x.dst === u.dst)!;
      if (d.kind === 'refuse') return { dst: u.dst, error: atomicFail ? 'atomic push failed' : d.why };
      if (d.kind === 'settled') return { dst: u.dst };
      // A tag another writer made meanwhile is there already, as git says of one it finds.
      if (failing.has(u.dst))
        return {
          dst: u.dst,
          error: u.dst.startsWith('refs/tags/') ? 'already exists' : 'fetch first',
          conflicted: true,
        };
      if (atomicFail) return { dst: u.dst, error: 'atomic push failed' };
      return { dst: u.dst, record: u.oid === undefined ? null : asRemote(mine, next, cid, u) };
    });
  }
}

type Decision =
  | { kind: 'write'; dst: string; update: RefUpdate }
  | { kind: 'refuse'; dst: string; why: PushReason }
  | { kind: 'settled'; dst: string };

/** The other writers' tables as the rule reads them. */
function othersOf(remote: RemoteRepo, team: TeamRead, me: string): TeamTable[] {
  return [
    teamTable(remote.owner.did, team.owner.table),
    ...team.members.map((m) => teamTable(m.did, m.read?.table)),
  ].filter((t) => t.did !== me);
}

/**
 * Each update's entry: its `over` names every other writer's current value of the ref that it
 * replaces, which it may when it is the same value, when the push is forced (a force, a delete or
 * a lease git judged against the repository's value), or when it descends from that value (git,
 * on local objects). An update that cannot replace some writer's value is refused as git refuses
 * a push behind the remote: `fetch first`.
 */
async function decide(job: WriteJob, others: TeamTable[]): Promise<Decision[]> {
  const { env } = job;
  // Another writer's value the listing did not show (one an entry superseded) may still be here,
  // as an ancestor of what was fetched: asked of git, all at once.
  const theirs = others.flatMap((t) =>
    job.updates.flatMap((u) => {
      const target = t.entries.get(u.dst)?.target;
      return target === undefined ? [] : [target];
    }),
  );
  const here = await presentObjects(theirs, { gitDir: env.gitDir });
  return Promise.all(
    job.updates.map(async (u: Update): Promise<Decision> => {
      const forced = u.force || u.oid === undefined || env.options.cas.has(u.dst);
      const over: Over[] = [];
      let behind = false;
      let exists = false;
      for (const t of others) {
        const theirs = t.entries.get(u.dst);
        if (theirs === undefined) continue;
        // A tag another writer holds at another object is replaced only by force, as git replaces one.
        if (
          u.dst.startsWith('refs/tags/') &&
          !forced &&
          theirs.target !== undefined &&
          theirs.target !== u.oid
        )
          exists = true;
        const replaces =
          theirs.target === u.oid ||
          forced ||
          theirs.target === undefined ||
          (u.oid !== undefined &&
            !exists &&
            here.has(theirs.target) &&
            (await isAncestor(theirs.target, u.oid, { gitDir: env.gitDir })));
        if (!replaces) behind = true;
        over.push(theirs.target === undefined ? { did: t.did } : { did: t.did, target: theirs.target });
      }
      if (exists) return { kind: 'refuse', dst: u.dst, why: 'already exists' };
      if (behind) return { kind: 'refuse', dst: u.dst, why: 'fetch first' };
      const update: RefUpdate =
        u.oid === undefined
          ? { ref: u.dst, ...(over.length === 0 ? {} : { over }) }
          : {
              ref: u.dst,
              target: u.oid,
              ...(u.peeled === undefined ? {} : { peeled: u.peeled }),
              ...(over.length === 0 ? {} : { over }),
            };
      return { kind: 'write', dst: u.dst, update };
    }),
  );
}

/** Outcomes when nothing was written. */
function answer(updates: Update[], decided: Decision[], atomic: boolean): Written[] {
  const refused = decided.some((d) => d.kind === 'refuse');
  return updates.map((u) => {
    const d = decided.find((x) => x.dst === u.dst)!;
    if (d.kind === 'refuse') return { dst: u.dst, error: d.why };
    if (atomic && refused) return { dst: u.dst, error: 'atomic push failed' };
    return { dst: u.dst };
  });
}

/** The team read again (a write of the pusher's own table raced this one). */
async function rereadTeam(remote: RemoteRepo, me: string): Promise<TeamRead> {
  const owner = await readRefTable(remote);
  if (owner === undefined) throw new Error(`the ref table of ${remote.label} is gone`);
  const fresh = await readTeamRefs(remote, owner);
  if (me !== remote.owner.did && !fresh.members.some((m) => m.did === me))
    throw new KnotlessError(
      'permission-denied',
      `You are no longer a maintainer of ${remote.label}; nothing was pushed.`,
    );
  return fresh;
}

/** The CID of each other writer's table the listing read (undefined: they held none). */
function listedCids(remote: RemoteRepo, team: TeamRead, me: string): Map<string, string | undefined> {
  const cids = new Map<string, string | undefined>([[remote.owner.did, team.owner.cid]]);
  for (const m of team.members) cids.set(m.did, m.read?.cid);
  cids.delete(me);
  return cids;
}

function sameTables(a: Map<string, string | undefined>, b: Map<string, string | undefined>): boolean {
  return a.size === b.size && [...a].every(([did, cid]) => b.has(did) && b.get(did) === cid);
}

/**
 * Every other writer's table, read after the pusher's write: the owner's (which says who maintains
 * the repository now) and each maintainer's it names, all in parallel: those the listing named are
 * read beside the owner's, and one the owner's table names now that the listing did not, after it. A
 * pusher no longer listed, or a writer whose table cannot be read, leaves nothing provable: the whole
 * push is refused. `cids`: each table's CID (undefined: none), the owner's included. When the owner
 * pushes, `written` is the table they just wrote (swapped on the one they read): who maintains the
 * repository is what it names, and it is not read again. A maintainer the owner adds after that write
 * holds no entry yet; their first push writes and then reads the owner's table, and is judged there.
 */
async function readOthers(
  remote: RemoteRepo,
  me: string,
  written: RefTable | undefined,
  expected: string[],
): Promise<
  | { kind: 'read'; tables: TeamTable[]; cids: Map<string, string | undefined> }
  | { kind: 'refused'; sentence: string; reason: PushReason }
> {
  type Got = { did: string; m: MemberTable } | { did: string; err: unknown };
  const readOne = (did: string): Promise<Got> =>
    readMemberTable(remote, did).then(
      (m) => ({ did, m }),
      (err: unknown) => ({ did, err }),
    );
  const early = new Map(expected.filter((d) => d !== me).map((did) => [did, readOne(did)]));
  const isOwner = written !== undefined;
  let read: { table: Pick<TableRead, 'table' | 'cid'>; maintainers: Maintainer[] } | undefined = isOwner
    ? { table: { table: written, cid: '' }, maintainers: maintainerList(written, remote.owner.did) }
    : undefined;
  try {
    read ??= await readMaintainers(remote);
  } finally {
    // Nothing left running unheard: the reads begun beside the owner's settle (they never reject).
    if (read === undefined) await Promise.all(early.values());
  }
  if (read === undefined) throw new Error(`the ref table of ${remote.label} is gone`);
  const owner = read.table;
  const listed = read.maintainers.map((m) => m.did);
  if (!isOwner && !listed.includes(me))
    return {
      kind: 'refused',
      sentence: `You are no longer a maintainer of ${remote.label}; what you pushed was withdrawn.`,
      reason: 'permission denied',
    };
  const tables: TeamTable[] = isOwner ? [] : [teamTable(remote.owner.did, owner.table)];
  const cids = new Map<string, string | undefined>(isOwner ? [] : [[remote.owner.did, owner.cid]]);
  const failed: string[] = [];
  const wanted = listed.filter((d) => d !== me);
  const got = await Promise.all([
    ...wanted.map((did) => early.get(did) ?? readOne(did)),
    // Read for a maintainer the owner's table no longer names: counted for nothing, but awaited.
    ...[...early].filter(([did]) => !wanted.includes(did)).map(([, p]) => p.then(() => undefined)),
  ]);
  for (const g of got) {
    if (g === undefined) continue;
    if ('m' in g) {
      tables.push(teamTable(g.did, g.m.read?.table));
      cids.set(g.did, g.m.read?.cid);
    } else if (isKnotlessError(g.err))
      failed.push(`${safeText(g.did)} (${g.err.message.replace(/\.$/, '')})`);
    else throw g.err;
  }
  if (failed.length > 0)
    return {
      kind: 'refused',
      sentence: `The refs of ${failed.join(', ')} could not be read after the push, so it could not be confirmed against theirs; what you pushed was withdrawn, try again.`,
      reason: UNREAD,
    };
  return { kind: 'read', tables, cids };
}

/**
 * Writes the pusher's entries of `refs` back as they were before the push (a ref the table did not
 * hold is removed again). A failure leaves a divergence every reader resolves the same way and
 * shows (format.md), so it is said, not thrown.
 */
async function withdrawEntries(
  mine: Mine,
  auth: WriteJob['env']['auth'],
  written: Pick<TableRead, 'cid' | 'stored' | 'table'>,
  refs: string[],
  remote: RemoteRepo,
): Promise<void> {
  const before = new Map((mine.read?.table.refs ?? []).map((r) => [r.ref, r]));
  const kept = written.table.refs.filter((r) => !refs.includes(r.ref));
  const back: TableRef[] = [...kept, ...refs.flatMap((r) => (before.has(r) ? [before.get(r)!] : []))];
  const table: RefTable = {
    ...written.table,
    refs: back.sort((a, b) => compareRefNames(a.ref, b.ref)),
    seq: written.table.seq + 1,
    updatedAt: new Date().toISOString(),
  };
  try {
    await writeRefTable(mine.remote, auth, table, written, mine.key);
  } catch (err) {
    if (!(err instanceof SwapConflict) && !isKnotlessError(err)) throw err;
    printErr(
      `knotless: warning: what this push wrote to ${remote.label} could not be withdrawn (${safeText(String(err instanceof Error ? err.message : err))}); readers list it apart under refs/maintainers/ until your next push`,
    );
  }
}

/** The written entry of `u` as a ref record is read (what the helper remembers of the push). */
function asRemote(mine: Mine, next: RefTable, cid: string, u: Update): RemoteRef {
  const e = next.refs.find((r) => r.ref === u.dst)!;
  const record = {
    repo: mine.remote.name,
    ref: u.dst,
    target: e.target!,
    packs: e.packs,
    updatedAt: next.updatedAt,
  };
  return {
    key: `${mine.key}#${u.dst}`,
    cid,
    rev: '',
    record: e.peeled === undefined ? record : { ...record, peeled: e.peeled },
  };
}
