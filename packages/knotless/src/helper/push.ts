import { activeSession } from '../auth/login.ts';
import { KnotlessError, isKnotlessError, type PushReason } from 'knotless-core/errors';
import { presentObjects, resolveObjects } from 'knotless-core/git/objects';
import { GitError, gitText } from 'knotless-core/git/run';
import { compactionDue } from 'knotless-core/packs/geometric';
import { BlobMissing, contestedSentence, type RemoteRepo } from 'knotless-core/records/remote-repo';
import { hasUnsafe, printErr, safeText } from 'knotless-core/text/terminal';
import { pushContested } from './push-contested.ts';
import { checkUpdate, type Update } from './push-check.ts';
import { preparePacks } from './push-pack.ts';
import { createInBatches } from './push-create.ts';
import { BLOB_GONE, writeAtomic, writeEach, type Written, type WriteJob } from './push-write.ts';
import type { HelperState } from './state.ts';

type Outcome = { dst: string; error?: PushReason; compact?: boolean };

function parsePushLine(line: string): { src: string; dst: string; force: boolean } {
  let spec = line.slice('push '.length);
  const force = spec.startsWith('+');
  if (force) spec = spec.slice(1);
  const colon = spec.lastIndexOf(':');
  return { src: spec.slice(0, colon), dst: spec.slice(colon + 1), force };
}

/** A push's answer for git, and the refs whose pack lists now want a compaction of their own. */
export interface PushResult {
  lines: string[];
  compact: string[];
}

/** Answers a batch of `push` lines with one `ok <dst>` or `error <dst> <why>` per ref. */
export async function pushBatch(state: HelperState, lines: string[]): Promise<PushResult> {
  const specs = lines.map(parsePushLine);
  const outcomes = await push(state, specs).catch((err: unknown) => {
    if (err instanceof GitError) {
      err = new KnotlessError(
        'push-rejected',
        `git failed while preparing the push: ${err.stderr.trim().split('\n').pop() ?? ''}; run \`git fsck\` to check this repository.`,
        { cause: err, reason: 'git failed' },
      );
    }
    if (!isKnotlessError(err)) throw err;
    printErr(`knotless: ${err.message}`);
    const reason = err.reason;
    return specs.map((s): Outcome => ({ dst: s.dst, error: reason }));
  });
  return {
    // git prints the reason as it is, and a line break would end the answer: escaped, always.
    lines: outcomes.map((o) =>
      o.error === undefined ? `ok ${o.dst}` : `error ${o.dst} ${safeText(o.error)}`,
    ),
    compact: outcomes.filter((o) => o.compact === true && o.error === undefined).map((o) => o.dst),
  };
}

async function push(
  state: HelperState,
  specs: Array<{ src: string; dst: string; force: boolean }>,
): Promise<Outcome[]> {
  const remote = await state.remote();
  const auth = await activeSession(state.ctx);
  if (auth.session.did !== remote.owner.did) {
    throw new KnotlessError(
      'permission-denied',
      `permission denied: you are ${auth.session.handle}, and only ${remote.owner.handle ?? remote.owner.did} can push to ${remote.label}; fork it with \`knotless repo fork ${remote.label}\` and push to the fork.`,
    );
  }
  // Listing checks that the repository exists (git lists before it pushes).
  const refs = state.refs ?? (await state.list(true));

  const local = await resolveObjects(specs.filter((s) => s.src !== '').map((s) => s.src));
  // git tells a helper nothing of the repository's hash; an object id's length does.
  if ([...local.values()].some((o) => o.oid.length !== 40)) {
    throw new KnotlessError(
      'usage',
      'This repository uses SHA-256 object names and knotless stores SHA-1 repositories only; convert it (git fast-export into git fast-import in a SHA-1 repository) to push it.',
      { reason: 'sha-256 repository' },
    );
  }
  const updates: Update[] = specs.map((s) => {
    const obj = local.get(s.src);
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
  const have = await presentObjects(
    [...refs.values()].flatMap((r) => (r.record.target === undefined ? [] : [r.record.target])),
  );
  const present = (oid: string) => have.has(oid);

  const outcomes = new Map<string, Outcome>();
  const toWrite: Update[] = [];
  const apart = updates.filter((u) => state.contested.has(u.dst));
  if (apart.length > 0 && state.options.atomic) {
    // Settling them is writes of their own, which an atomic push cannot make part of its one commit.
    for (const u of apart) printErr(`knotless: ${contestedSentence(u.dst, state.contested.get(u.dst)!)}.`);
    const reason = (u: Update): PushReason =>
      apart.includes(u) ? 'several records claim this ref' : 'atomic push failed';
    return updates.map((u) => ({ dst: u.dst, error: reason(u) }));
  }
  if (apart.length > 0) {
    const settled = await pushContested(state, remote, auth, apart);
    await state.remember(settled);
    for (const o of settled)
      outcomes.set(o.dst, o.error === undefined ? { dst: o.dst } : { dst: o.dst, error: o.error });
  }
  for (const u of updates) {
    if (state.contested.has(u.dst) || outcomes.has(u.dst)) continue;
    // Readers refuse such a name (git would print it raw): it must not be written either.
    if (hasUnsafe(u.dst)) {
      outcomes.set(u.dst, { dst: u.dst, error: 'the name holds characters that act on a terminal' });
      continue;
    }
    const verdict = await checkUpdate(u, refs.get(u.dst), state.options.cas.get(u.dst), present);
    if (verdict.kind === 'write') toWrite.push(u);
    else
      outcomes.set(u.dst, verdict.kind === 'reject' ? { dst: u.dst, error: verdict.reason } : { dst: u.dst });
  }
  if (
    state.options.atomic &&
    outcomes.size > 0 &&
    [...outcomes.values()].some((o) => o.error !== undefined)
  ) {
    return updates.map((u) => outcomes.get(u.dst) ?? { dst: u.dst, error: 'atomic push failed' });
  }
  if (state.options.dryRun || toWrite.length === 0) {
    return updates.map((u) => outcomes.get(u.dst) ?? { dst: u.dst });
  }
  const packs = await preparePacks(state, auth, toWrite, present);
  const head = refs.has('HEAD') ? undefined : await defaultBranch(toWrite);
  const job: WriteJob = { state, remote, auth, updates: toWrite, packs, present, head };
  const isNew = new Set(toWrite.filter((u) => u.oid !== undefined && !refs.has(u.dst)).map((u) => u.dst));
  const written = await writeRebuildingOnce(job);
  await state.remember(written);
  // Only a list far past logarithmic gets a compaction of its own: preparePacks folded the rest.
  const compact = compactionDue(packs);
  for (const o of written)
    outcomes.set(o.dst, {
      ...o,
      compact: compact && toWrite.some((u) => u.dst === o.dst && u.oid !== undefined),
    });
  const created = [...isNew].filter((dst) => outcomes.get(dst)?.error === undefined);
  printCompareLinks(state, remote, created, refs.get('HEAD')?.record.symref ?? head);
  return updates.map((u) => outcomes.get(u.dst)!);
}

/** Writes the push: atomically, or new refs in batches then the rest one by one. */
async function writeAll(job: WriteJob): Promise<Written[]> {
  try {
    return job.state.options.atomic ? await writeAtomic(job) : await writeBatchedThenEach(job);
  } catch (err) {
    if (!(err instanceof BlobMissing)) throw err;
    return job.updates.map((u) => ({ dst: u.dst, error: BLOB_GONE, blobMissing: true }));
  }
}

/**
 * Writes the push; when the PDS says a blob the new records list is gone (a compaction or a rewind
 * elsewhere freed it after the refs were read), reads the refs again, rebuilds the pack list of the
 * refs it hit from what is there now, and writes those once more. The compare-and-swap of each write
 * still names the value git was shown, so the re-read changes what is built on, never what is replaced.
 */
async function writeRebuildingOnce(job: WriteJob): Promise<Written[]> {
  const first = await writeAll(job);
  const missing = new Set(first.filter((w) => w.blobMissing === true).map((w) => w.dst));
  if (missing.size === 0) return first;
  const { state, remote, auth } = job;
  const fresh = new Map((await remote.listRefs()).map((r) => [r.record.ref, r]));
  const have = await presentObjects(
    [...fresh.values()].flatMap((r) => (r.record.target === undefined ? [] : [r.record.target])),
  );
  const present = (oid: string) => job.present(oid) || have.has(oid);
  const updates = job.updates.filter((u) => missing.has(u.dst));
  const packs = await preparePacks(state, auth, updates, present, fresh);
  const head = first.some((w) => w.dst === 'HEAD' && w.error === undefined) ? undefined : job.head;
  const again = await writeAll({ ...job, updates, packs, present, head });
  if (again.some((w) => w.blobMissing === true)) {
    printErr(
      `knotless: The PDS of ${remote.label} kept refusing the push because packs it builds on were removed meanwhile (a compaction or a rewind on another machine); fetch and push again.`,
    );
  }
  return [...first.filter((w) => !missing.has(w.dst)), ...again];
}

/** New refs in batches first (one commit per 199), then everything else one by one. */
async function writeBatchedThenEach(job: WriteJob): Promise<Written[]> {
  const batched = await createInBatches(job);
  if (batched.rest.length === 0) return batched.written;
  return [...batched.written, ...(await writeEach({ ...job, updates: batched.rest, head: batched.head }))];
}

/**
 * After new branches land, prints where to compare them and open a pull request, as GitHub does.
 * Computed locally: the appview learns of the push from the network, not from us.
 */
function printCompareLinks(
  state: HelperState,
  remote: RemoteRepo,
  created: string[],
  head: string | undefined,
): void {
  const appview = state.ctx.config.appview;
  if (appview === undefined || state.options.verbosity < 1 || head === undefined) return;
  const base = head.replace(/^refs\/heads\//, '');
  for (const ref of created) {
    if (!ref.startsWith('refs/heads/') || ref === head) continue;
    const branch = ref.replace(/^refs\/heads\//, '');
    const owner = encodeURIComponent(remote.owner.handle ?? remote.owner.did);
    const path = (name: string) => name.split('/').map(encodeURIComponent).join('/');
    const link = `${appview}/${owner}/${encodeURIComponent(remote.name)}/compare/${path(base)}...${path(branch)}`;
    printErr(
      'knotless:',
      `knotless: Create a pull request for '${safeText(branch)}' by visiting:`,
      `knotless:      ${link}`,
      'knotless:',
    );
  }
}

/** The branch a new repository's HEAD should name: the pusher's current branch, else main, master, the first. */
async function defaultBranch(updates: Update[]): Promise<string | undefined> {
  const branches = updates
    .filter((u) => u.oid !== undefined && u.dst.startsWith('refs/heads/'))
    .map((u) => u.dst);
  if (branches.length === 0) return undefined;
  // Exit 1 (a detached HEAD) is an answer: no current branch. Any other failure of git surfaces.
  const local = (await gitText(['symbolic-ref', '-q', 'HEAD'], { okCodes: [1] })).trim();
  return [local, 'refs/heads/main', 'refs/heads/master'].find((b) => branches.includes(b)) ?? branches[0];
}
