import { activeSession } from '../auth/login.ts';
import { KnotlessError, isKnotlessError } from '../errors.ts';
import { presentObjects, resolveObjects } from '../git/objects.ts';
import { GitError, gitText } from '../git/run.ts';
import { hashedRefKey, refKey } from '../remote/ref-key.ts';
import type { PackEntry, RefRecord } from '../remote/ref-record.ts';
import {
  KeyRefused,
  SwapConflict,
  type RemoteRef,
  type RemoteRepo,
  type RefWrite,
} from '../remote/remote-repo.ts';
import { mapLimit } from '../remote/packs.ts';
import type { Authorizer } from '../xrpc/client.ts';
import { checkUpdate, type Update, type Verdict } from './push-check.ts';
import { preparePacks, unionPacks } from './push-pack.ts';
import { planMerge } from '../remote/geometric.ts';
import type { HelperState } from './state.ts';

/** Compare-and-swap retries per ref, and commit-race retries per atomic push. */
const MAX_ATTEMPTS = 5;
/** The PDS's limit on writes in one commit. */
const MAX_WRITES_PER_COMMIT = 200;

type Outcome = { dst: string; error?: string; compact?: boolean };

function parsePushLine(line: string): { src: string; dst: string; force: boolean } {
  let spec = line.slice('push '.length);
  const force = spec.startsWith('+');
  if (force) spec = spec.slice(1);
  const colon = spec.lastIndexOf(':');
  return { src: spec.slice(0, colon), dst: spec.slice(colon + 1), force };
}

/** A push's answer for git, and the refs whose pack lists now want compacting. */
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
        { cause: err },
      );
    }
    if (!isKnotlessError(err)) throw err;
    process.stderr.write(`knotless: ${err.message}\n`);
    const short = err.message.split(/[;:]/)[0]!.toLowerCase();
    return specs.map((s): Outcome => ({ dst: s.dst, error: short }));
  });
  return {
    lines: outcomes.map((o) => (o.error === undefined ? `ok ${o.dst}` : `error ${o.dst} ${o.error}`)),
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
      `permission denied: you are ${auth.session.handle}, and only ${remote.owner.handle ?? remote.owner.did} can push to ${remote.label}; fork it into your account instead.`,
    );
  }
  // Listing checks that the repository exists (git lists before it pushes).
  const refs = state.refs ?? (await state.list());

  const local = await resolveObjects(specs.filter((s) => s.src !== '').map((s) => s.src));
  const updates: Update[] = specs.map((s) => {
    const obj = local.get(s.src);
    if (s.src !== '' && obj === undefined)
      throw new KnotlessError('usage', `${s.src} does not name an object here.`);
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
  for (const u of updates) {
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
  const written = state.options.atomic
    ? await writeAtomic(state, remote, auth, toWrite, packs, present, head)
    : await writeEach(state, remote, auth, toWrite, packs, present, head);
  const compact = planMerge(packs) !== undefined;
  for (const o of written)
    outcomes.set(o.dst, {
      ...o,
      compact: compact && toWrite.some((u) => u.dst === o.dst && u.oid !== undefined),
    });
  const created = toWrite.filter(
    (u) => u.oid !== undefined && !refs.has(u.dst) && outcomes.get(u.dst)?.error === undefined,
  );
  printCompareLinks(
    state,
    remote,
    created.map((u) => u.dst),
    refs.get('HEAD')?.record.symref ?? head,
  );
  return updates.map((u) => outcomes.get(u.dst)!);
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
    process.stderr.write(
      `knotless:\nknotless: Create a pull request for '${branch}' by visiting:\nknotless:      ${link}\nknotless:\n`,
    );
  }
}

function recordFor(remote: RemoteRepo, u: Update, packs: PackEntry[]): RefRecord {
  return {
    repo: remote.name,
    ref: u.dst,
    target: u.oid!,
    ...(u.peeled === undefined ? {} : { peeled: u.peeled }),
    packs,
    updatedAt: new Date().toISOString(),
  };
}

function headRecord(remote: RemoteRepo, branch: string): RefRecord {
  return { repo: remote.name, ref: 'HEAD', symref: branch, packs: [], updatedAt: new Date().toISOString() };
}

/** The branch a new repository's HEAD should name: the pusher's current branch, else main, master, the first. */
async function defaultBranch(updates: Update[]): Promise<string | undefined> {
  const branches = updates
    .filter((u) => u.oid !== undefined && u.dst.startsWith('refs/heads/'))
    .map((u) => u.dst);
  if (branches.length === 0) return undefined;
  const local = (await gitText(['symbolic-ref', '-q', 'HEAD'], { okCodes: [1] }).catch(() => '')).trim();
  return [local, 'refs/heads/main', 'refs/heads/master'].find((b) => branches.includes(b)) ?? branches[0];
}

/** Writes each ref on its own, with compare-and-swap; a conflict re-reads the ref and decides again. */
async function writeEach(
  state: HelperState,
  remote: RemoteRepo,
  auth: Authorizer,
  updates: Update[],
  shared: PackEntry[],
  present: (oid: string) => boolean,
  head: string | undefined,
): Promise<Outcome[]> {
  const outcomes = await mapLimit(updates, 8, async (u): Promise<Outcome> => {
    let packs = shared;
    let current = state.refs?.get(u.dst);
    let key = current?.key ?? refKey(remote.name, u.dst);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      try {
        if (u.oid === undefined) {
          if (current !== undefined) await remote.deleteRef(auth, current.key, current.cid);
        } else {
          await remote.putRef(auth, key, recordFor(remote, u, packs), current?.cid ?? null);
        }
        return { dst: u.dst };
      } catch (err) {
        if (err instanceof KeyRefused && current === undefined) {
          key = hashedRefKey(remote.name, u.dst);
          continue;
        }
        if (!(err instanceof SwapConflict)) throw err;
      }
      const before = current;
      current = await remote.getRef(key);
      // Only the packs changed (a compaction landed): build on its list rather than undo it.
      if (before !== undefined && current !== undefined && current.record.target === before.record.target) {
        const old = new Set(before.record.packs.map((p) => p.id));
        packs = unionPacks([current.record.packs, packs.filter((p) => !old.has(p.id))]);
      }
      const verdict: Verdict = await checkUpdate(u, current, state.options.cas.get(u.dst), present);
      if (verdict.kind === 'reject') return { dst: u.dst, error: verdict.reason };
      if (verdict.kind === 'up-to-date') return { dst: u.dst };
    }
    return { dst: u.dst, error: 'the ref kept changing; try again' };
  });
  const pushed = head !== undefined && outcomes.some((o) => o.dst === head && o.error === undefined);
  if (pushed) {
    await remote
      .putRef(auth, refKey(remote.name, 'HEAD'), headRecord(remote, head), null)
      .catch((err: unknown) => {
        if (!(err instanceof SwapConflict)) throw err;
      });
  }
  return outcomes;
}

/** Writes every ref in one commit that applies only if nothing in the account changed since it was read. */
async function writeAtomic(
  state: HelperState,
  remote: RemoteRepo,
  auth: Authorizer,
  updates: Update[],
  packs: PackEntry[],
  present: (oid: string) => boolean,
  head: string | undefined,
): Promise<Outcome[]> {
  const fail = (error: string) => updates.map((u) => ({ dst: u.dst, error }));
  if (updates.length + (head === undefined ? 0 : 1) > MAX_WRITES_PER_COMMIT) {
    process.stderr.write(
      `knotless: an atomic push can update at most ${MAX_WRITES_PER_COMMIT} refs (the PDS's limit per commit); push in smaller groups.\n`,
    );
    return fail('atomic push exceeds 200 refs');
  }
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const commit = await remote.latestCommit();
    const refs: Map<string, RemoteRef> = new Map((await remote.listRefs()).map((r) => [r.record.ref, r]));
    const writes: RefWrite[] = [];
    for (const u of updates) {
      const current = refs.get(u.dst);
      const verdict = await checkUpdate(u, current, state.options.cas.get(u.dst), present);
      if (verdict.kind === 'reject')
        return updates.map((x) => ({ dst: x.dst, error: x === u ? verdict.reason : 'atomic push failed' }));
      if (verdict.kind === 'up-to-date') continue;
      if (u.oid === undefined) {
        if (current !== undefined) writes.push({ action: 'delete', key: current.key });
      } else {
        writes.push({
          action: current === undefined ? 'create' : 'update',
          key: current?.key ?? refKey(remote.name, u.dst),
          record: recordFor(remote, u, packs),
        });
      }
    }
    if (head !== undefined && !refs.has('HEAD')) {
      writes.push({ action: 'create', key: refKey(remote.name, 'HEAD'), record: headRecord(remote, head) });
    }
    if (writes.length === 0) return updates.map((u) => ({ dst: u.dst }));
    try {
      await remote.applyWrites(auth, writes, commit);
      return updates.map((u) => ({ dst: u.dst }));
    } catch (err) {
      if (!(err instanceof SwapConflict)) throw err;
    }
  }
  return fail('the account kept changing; try again');
}
