import { KnotlessError, type PushReason } from '../../errors.ts';
import { isAncestor, lookUpObjects, presentObjects } from '../../git/objects.ts';
import { gitText } from '../../git/run.ts';
import { compactionDue } from '../../packs/geometric.ts';
import {
  lastTeamRead,
  readProvedRecords,
  readRepoRefs,
  readTeamRefs,
  useTeamRead,
} from '../../records/read-refs.ts';
import { maintainersOf } from '../../records/ref-table.ts';
import { migrateToTable, movedSentence, tableSinceWrite } from '../table-migrate.ts';
import type { PackEntry } from '../../records/ref-record.ts';
import { contestedSentence } from '../../records/remote-repo.ts';
import { REF_COLLECTION } from '../../records/collections.ts';
import { SwapConflict, writeFailure } from '../../records/ref-writes.ts';
import { hasUnsafe, printErr, safeText } from '../../text/terminal.ts';
import { writeAtomic } from './atomic.ts';
import {
  atomicFailure,
  checkUpdate,
  deleteCurrentAllowed,
  protectedRefusal,
  receiveRefusal,
  type Update,
} from './check.ts';
import { pushContested } from './contested.ts';
import { PackSource, type PushEnv, type WriteJob, type Written } from './job.ts';
import { preparePacks } from './pack.ts';
import { writeTable } from './table.ts';
import { writeTeam } from './team-push.ts';
import { writeEach } from './write.ts';

/** One `push` line: the local source (empty: delete), the remote ref, forced or not. */
export interface PushSpec {
  src: string;
  dst: string;
  force: boolean;
}

/** How one ref's push ended; `compact`: its pack list now wants a compaction of its own. */
export interface PushOutcome {
  dst: string;
  error?: PushReason;
  compact?: boolean;
}

/** What a push did: one outcome per spec, in order; the new refs that landed; the HEAD branch. */
export interface Pushed {
  outcomes: PushOutcome[];
  created: string[];
  /** The branch the remote's HEAD names (written by this push when it had none). */
  head: string | undefined;
}

/**
 * Pushes refs from the repository at `env.gitDir` to `env.remote`, deciding each with git's rules
 * against the refs git was shown, as git's own receive-pack would. A failure a user can cause is a
 * KnotlessError for the whole push; a ref refused on its own is an outcome with git's reason.
 */
export async function pushRefs(given: PushEnv, specs: PushSpec[]): Promise<Pushed> {
  let env = given;
  const { remote, pusher } = env;
  // Anyone but the owner pushes only as a maintainer the owner's table names (format.md, "Teams"):
  // known once the listing has read it, and their packs then go to their own account.
  const early = pusher.did === remote.owner.did ? undefined : await env.listing();
  const member = lastTeamRead(remote)?.members.find((m) => m.did === pusher.did);
  if (early !== undefined && member !== undefined) env = { ...env, packsTo: member.remote };
  if (early !== undefined && member === undefined) {
    throw new KnotlessError(
      'permission-denied',
      `permission denied: you are ${pusher.handle}, and only ${remote.owner.handle ?? remote.owner.did} can push to ${remote.label}; fork it with \`knotless repo fork ${remote.label}\` and push to the fork.`,
    );
  }
  // Listing checks that the repository exists (git lists before it pushes).
  const listing = early ?? (await env.listing());
  const { refs, contested } = listing;
  // A private repository's records and packs are sealed: settle which before anything is built. A
  // listing settled it already; a view (this machine's, or the agent's) counts as a plain listing,
  // since a view of a private repository exists only where its key ring was opened and cached.
  await remote.prepare('plain');
  const inRepo = { gitDir: env.gitDir };

  // What git asked to push, and which of the refs' values this repository has: one git process.
  const { found: local, present: have } = await lookUpObjects(
    specs.filter((s) => s.src !== '').map((s) => s.src),
    [...refs.values()].flatMap((r) => (r.record.target === undefined ? [] : [r.record.target])),
    inRepo,
  );
  // git tells a helper nothing of the repository's hash; an object id's length does.
  if ([...local.values()].some((o) => o.oid.length !== 40)) {
    throw new KnotlessError(
      'usage',
      'This repository uses SHA-256 object names and knotless stores SHA-1 repositories only; convert it (git fast-export into git fast-import in a SHA-1 repository) to push it.',
      { reason: 'sha-256 repository' },
    );
  }
  const types = new Map<string, string | undefined>();
  const updates: Update[] = specs.map((s) => {
    const obj = local.get(s.src);
    types.set(s.dst, obj?.type);
    if (s.src !== '' && obj === undefined)
      throw new KnotlessError('usage', `${s.src} does not name an object here.`, {
        reason: 'no such object',
      });
    return {
      dst: s.dst,
      force: s.force,
      oid: obj?.oid,
      peeled: obj?.type === 'tag' ? obj.peeled : undefined,
    };
  });
  const present = (oid: string) => have.has(oid);

  const outcomes = new Map<string, PushOutcome>();
  const toWrite: Update[] = [];
  const apart = updates.filter((u) => contested.has(u.dst));
  const done = (o: PushOutcome[]): Pushed => ({ outcomes: o, created: [], head: undefined });
  if (apart.length > 0 && env.options.atomic) {
    // Settling them is writes of their own, which an atomic push cannot make part of its one commit.
    for (const u of apart) printErr(`knotless: ${contestedSentence(u.dst, contested.get(u.dst)!)}.`);
    const reason = (u: Update): PushReason =>
      apart.includes(u) ? 'several records claim this ref' : 'atomic push failed';
    return done(updates.map((u) => ({ dst: u.dst, error: reason(u) })));
  }
  if (apart.length > 0) {
    const settled = await pushContested(env, listing, apart);
    await env.remember(settled);
    for (const o of settled)
      outcomes.set(o.dst, o.error === undefined ? { dst: o.dst } : { dst: o.dst, error: o.error });
  }
  // The refs the remote holds once this push's deletes are made; each create is checked against them.
  const names = new Set(
    [...refs.keys()].filter((r) => r !== 'HEAD' && !updates.some((u) => u.dst === r && u.oid === undefined)),
  );
  for (const u of updates) {
    if (contested.has(u.dst) || outcomes.has(u.dst)) continue;
    // Readers refuse such a name (git would print it raw): it must not be written either.
    if (hasUnsafe(u.dst)) {
      outcomes.set(u.dst, { dst: u.dst, error: 'the name holds characters that act on a terminal' });
      continue;
    }
    // A dry run never reaches a receiving end: git shows what it would send, refusals unknown.
    const refusal = env.options.dryRun
      ? undefined
      : await receiveRefusal(u, {
          type: types.get(u.dst),
          current: refs.get(u.dst),
          head: refs.get('HEAD')?.record.symref,
          names,
          deleteCurrent: () => deleteCurrentAllowed(env.gitDir),
        });
    if (refusal !== undefined) {
      printErr(`knotless: ${refusal.sentence}`);
      outcomes.set(u.dst, { dst: u.dst, error: refusal.reason });
      continue;
    }
    const verdict = await checkUpdate(
      u,
      refs.get(u.dst),
      env.options.cas.get(u.dst),
      present,
      env.gitDir,
      listing.shownToGit,
    );
    const guarded =
      verdict.kind !== 'write' || env.protection === undefined || env.options.dryRun
        ? undefined
        : await protectedRefusal(u, refs.get(u.dst), env.protection, async (from, to) =>
            present(from) ? isAncestor(from, to, inRepo) : false,
          );
    if (guarded !== undefined) {
      printErr(`knotless: ${guarded.sentence}`);
      outcomes.set(u.dst, { dst: u.dst, error: guarded.reason });
      continue;
    }
    if (verdict.kind === 'write' && u.oid !== undefined) names.add(u.dst);
    if (verdict.kind === 'write') toWrite.push(u);
    else
      outcomes.set(u.dst, verdict.kind === 'reject' ? { dst: u.dst, error: verdict.reason } : { dst: u.dst });
  }
  if (env.options.atomic && outcomes.size > 0 && [...outcomes.values()].some((o) => o.error !== undefined)) {
    const reasons = [...outcomes.values()].map((o) => o.error);
    const rest = atomicFailure(reasons);
    // A refused ref transaction is the failure of every ref in it, the refused one included; a ref
    // already up to date was never in it.
    const all = rest === 'atomic transaction failed';
    const fail = (u: Update): PushOutcome => {
      const o = outcomes.get(u.dst);
      return o !== undefined && (o.error === undefined || !all) ? o : { dst: u.dst, error: rest };
    };
    return done(updates.map(fail));
  }
  if (env.options.dryRun || toWrite.length === 0) {
    return done(updates.map((u) => outcomes.get(u.dst) ?? { dst: u.dst }));
  }
  const packs = await preparePacks(env, toWrite, present, refs);
  const head = refs.has('HEAD') ? undefined : await defaultBranch(toWrite, env.gitDir);
  const source = new PackSource(packs, () => rebuildPacks(env, toWrite, present));
  const job: WriteJob = { env, refs, updates: toWrite, source, present, head };
  const isNew = new Set(toWrite.filter((u) => u.oid !== undefined && !refs.has(u.dst)).map((u) => u.dst));
  if (env.migrate === true && env.remote.layout !== 'table' && !env.remote.isPrivate) await migrateFirst(env);
  // A ref table: every ref in one write of it. Ref records: each ref on its own compare-and-swap
  // loop (new ones batched first), or all in one commit.
  const team = lastTeamRead(env.remote);
  const written =
    team !== undefined
      ? await writeTeam(job, team)
      : env.remote.layout === 'table'
        ? await writeTable(job)
        : await keepInTable(job, env.options.atomic ? await writeAtomic(job) : await writeEach(job));
  if (written.some((w) => w.blobMissing === true)) {
    printErr(
      `knotless: The PDS of ${env.remote.label} kept refusing the push because packs it builds on were removed meanwhile (a compaction or a rewind on another machine); fetch and push again.`,
    );
  }
  await env.remember(written);
  // Only a list far past logarithmic gets a compaction of its own: preparePacks folded the rest.
  const compact = compactionDue(packs);
  for (const o of written)
    outcomes.set(o.dst, {
      ...o,
      compact: compact && toWrite.some((u) => u.dst === o.dst && u.oid !== undefined),
    });
  const created = [...isNew].filter((dst) => outcomes.get(dst)?.error === undefined);
  return {
    outcomes: updates.map((u) => outcomes.get(u.dst)!),
    created,
    head: refs.get('HEAD')?.record.symref ?? head,
  };
}

/**
 * Moves the repository onto its ref table before the push writes (unless KNOTLESS_REF_TABLE=0): the refs git
 * decided on stay what they were (the table holds the same values), and the push then writes the table,
 * deciding its refs again against it if anything moved meanwhile. Said on stderr in one line.
 */
async function migrateFirst(env: PushEnv): Promise<void> {
  const moved = await migrateToTable(env.remote, env.auth);
  env.remote.layout = 'table';
  const said = movedSentence(env.remote.label, moved);
  if (said !== undefined) printErr(said);
}

/**
 * A push that wrote ref records reads the owner's ref table once its writes have answered
 * (`tableSinceWrite`; format.md, "Old repositories"). A table found there may have been created from
 * a listing that missed these writes (their records are then ignored, or deleted by the migration):
 * the refs this push wrote are written into the table, decided against it as any push to a table is,
 * before git is told they landed. The ref records it wrote are then deleted, each only while it is
 * still the record this push wrote: no reader reads them once a table exists, and left there they
 * would be named in every reader's warning about ignored records.
 */
async function keepInTable(job: WriteJob, written: Written[]): Promise<Written[]> {
  const { remote } = job.env;
  const landed = new Set(written.filter((w) => w.error === undefined).map((w) => w.dst));
  if (landed.size === 0) return written;
  const read = await tableSinceWrite(remote, landed.size);
  if (read === undefined) return written;
  printErr(
    `knotless: ${remote.label} was moved onto its ref table while this push wrote ref records; its refs are written into the table.`,
  );
  const head = landed.has('HEAD') && read.table.head === undefined ? job.head : undefined;
  const landedJob = { ...job, updates: job.updates.filter((u) => landed.has(u.dst)), head };
  // A table naming maintainers takes the push as a team's write, judged against every writer's value.
  const team =
    maintainersOf(read.table, remote.owner.did).length === 0 ? undefined : await readTeamRefs(remote, read);
  if (team !== undefined) useTeamRead(remote, team);
  const moved = team === undefined ? await writeTable(landedJob) : await writeTeam(landedJob, team);
  const into = new Map(moved.map((w) => [w.dst, w]));
  await removeStrays(job, written);
  // HEAD was a record of its own: the table names it (or already did), and no ref record holds it now.
  return written.map((w) => (w.dst === 'HEAD' ? { dst: w.dst } : (into.get(w.dst) ?? w)));
}

/**
 * Deletes the ref records a push wrote before it found the table (see {@link keepInTable}), each
 * swapped on the CID it was written at, so that a record another machine wrote since is left alone.
 * An atomic batch's writes answer no CIDs: each such record is read, and deleted when it still holds
 * what the push wrote. A failure leaves records no reader reads: a warning, and the push stands.
 */
async function removeStrays(job: WriteJob, written: Written[]): Promise<void> {
  const { remote, auth } = job.env;
  const oids = new Map(job.updates.map((u) => [u.dst, u.oid]));
  const left: string[] = [];
  const strays = (
    await Promise.all(
      written.map(async (w) => {
        if (w.error !== undefined || w.record === null) return undefined;
        if (w.record !== undefined) return w.record;
        const oid = oids.get(w.dst);
        if (oid === undefined) return undefined;
        try {
          const now = await remote.getRef(remote.refKey(w.dst));
          return now?.record.target === oid ? now : undefined;
        } catch (err) {
          // The refs are in the table already: a read that fails here fails no part of the push.
          if (!(err instanceof KnotlessError)) throw err;
          left.push(safeText(w.dst));
          return undefined;
        }
      }),
    )
  ).filter((r) => r !== undefined);
  await Promise.all(
    strays.map(async (r) => {
      try {
        await remote.writer(auth).procedure('com.atproto.repo.deleteRecord', {
          repo: remote.owner.did,
          collection: REF_COLLECTION,
          rkey: r.key,
          swapRecord: r.cid,
        });
      } catch (err) {
        const failure = writeFailure(err, `removing the ref records of ${remote.label} this push wrote`);
        // Moved since (another machine's write, or a migration's delete): not this push's to remove.
        if (failure instanceof SwapConflict) return;
        if (!(failure instanceof KnotlessError)) throw failure;
        left.push(safeText(r.record.ref));
      }
    }),
  );
  if (left.length > 0)
    printErr(
      `knotless: warning: ${left.length} ref record(s) of ${remote.label} this push wrote before it found the table were not removed (${left.slice(0, 3).join(', ')}${left.length > 3 ? ', …' : ''}); they are never read, and \`knotless repo migrate ${safeText(remote.name)}\` removes them.`,
    );
}

/**
 * The push's pack list built again on the refs as they are now: after the PDS said a blob the
 * first one lists is gone (a compaction or a rewind elsewhere freed it after the refs were read).
 */
async function rebuildPacks(
  env: PushEnv,
  updates: Update[],
  present: (oid: string) => boolean,
): Promise<PackEntry[]> {
  // Proved, as every listing a push acts on: the objects it names are left out of the pack.
  const listed =
    env.remote.layout === 'table'
      ? await readRepoRefs(env.remote)
      : (await readProvedRecords(env.remote)).refs;
  const fresh = new Map(listed.map((r) => [r.record.ref, r]));
  const have = await presentObjects(
    [...fresh.values()].flatMap((r) => (r.record.target === undefined ? [] : [r.record.target])),
    { gitDir: env.gitDir },
  );
  return preparePacks(env, updates, (oid) => present(oid) || have.has(oid), fresh);
}

/** The branch a new repository's HEAD should name: the pusher's current branch, else main, master, the first. */
async function defaultBranch(updates: Update[], gitDir: string): Promise<string | undefined> {
  const branches = updates
    .filter((u) => u.oid !== undefined && u.dst.startsWith('refs/heads/'))
    .map((u) => u.dst);
  if (branches.length === 0) return undefined;
  // Exit 1 (a detached HEAD) is an answer: no current branch. Any other failure of git surfaces.
  const local = (await gitText(['symbolic-ref', '-q', 'HEAD'], { okCodes: [1], gitDir })).trim();
  return [local, 'refs/heads/main', 'refs/heads/master'].find((b) => branches.includes(b)) ?? branches[0];
}
