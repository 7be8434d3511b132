import fs from 'node:fs';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { crashPoint } from 'knotless-core/crash';
import { IndexedPacks } from 'knotless-core/cache/indexed-packs';
import { gitDir, presentObjects } from 'knotless-core/git/objects';
import { indexPack } from 'knotless-core/git/pack';
import type { PackFile } from 'knotless-core/git/pack-file';
import { GitError } from 'knotless-core/git/run';
import { KnotlessError } from 'knotless-core/errors';
import { loadPack, mapLimit, remoteChanged, withRelist } from 'knotless-core/packs/transfer';
import { unionPacks, type PackEntry } from 'knotless-core/records/ref-record';
import { safeText } from 'knotless-core/text/terminal';
import { Meter } from 'knotless-core/text/progress';
import type { HelperState } from './state.ts';

/**
 * Answers a batch of `fetch <oid> <name>`: downloads the packs the wanted refs list that this
 * repository has not indexed yet (from the cache when it has them), then indexes them in order.
 * Returns the answer lines (a `lock` line for the last pack's .keep file).
 */
export async function fetchBatch(state: HelperState, lines: string[]): Promise<string[]> {
  const wants = lines.map((l) => l.split(' ')).map(([, oid, name]) => ({ oid: oid!, name: name! }));
  const have = await presentObjects(wants.map((w) => w.oid));
  const missing = wants.filter((w) => !have.has(w.oid)).map((w) => w.name.replace(/\^\{\}$/, ''));
  if (missing.length === 0) return [];
  const dir = await gitDir();
  const indexed = new IndexedPacks(dir);
  const packsOf = () => {
    const records = missing.map((name) => state.refs?.get(name)?.record);
    return records.some((r) => r === undefined) ? undefined : unionPacks(records.map((r) => r!.packs));
  };
  const remote = await state.remote();
  // A compaction or force push landing mid-download frees the blobs of the packs it replaced: list
  // again and download what the refs list now (one listing, only when that happens).
  return withRelist(
    packsOf() ?? [],
    async () => {
      await state.list(false);
      return packsOf();
    },
    async (all, relisted) => {
      const lines = await indexList(state, dir, all, indexed, wants);
      // After a force push the new packs need not hold what git asked for: say so, not "damaged".
      if (relisted) {
        const now = await presentObjects(wants.map((w) => w.oid));
        if (wants.some((w) => !now.has(w.oid))) {
          // No ref will name what was indexed: release it to git's ordinary gc.
          release(lines);
          throw remoteChanged(remote.label);
        }
      }
      return wholeOrNothing(state, wants, lines);
    },
    remote.label,
  );
}

/**
 * Indexes the packs of `all` this repository lacks, or the whole list when that lacks bases or
 * leaves a wanted object missing (a pack recorded as indexed may have been lost: gc, a copied
 * repository).
 */
async function indexList(
  state: HelperState,
  dir: string,
  all: PackEntry[],
  indexed: IndexedPacks,
  wants: Array<{ oid: string; name: string }>,
): Promise<string[]> {
  const done = indexed.read();
  try {
    const lines = await indexAll(
      state,
      dir,
      all.filter((p) => !done.has(p.id)),
      indexed,
    );
    const have = await presentObjects(wants.map((w) => w.oid));
    if (wants.every((w) => have.has(w.oid))) return lines;
    release(lines);
  } catch (err) {
    if (!(err instanceof GitError)) throw err;
  }
  try {
    return await indexAll(state, dir, all, indexed);
  } catch (err) {
    if (!(err instanceof GitError)) throw err;
    const why = err.stderr.trim().split('\n').pop() ?? '';
    throw new KnotlessError(
      'corrupt-remote',
      `git could not index the packs of ${(await state.remote()).label} (${safeText(why)}): the remote's packs are damaged or lack their delta bases; nothing was written.`,
      { cause: err },
    );
  }
}

/** Releases the lock files of an answer that will not be given: nothing stays kept for it. */
function release(lines: string[]): void {
  for (const line of lines) fs.rmSync(line.replace(/^lock /, ''), { force: true });
}

async function indexAll(
  state: HelperState,
  dir: string,
  packs: PackEntry[],
  indexed: IndexedPacks,
): Promise<string[]> {
  const remote = await state.remote();
  const blobs = packs.filter((p) => p.inline === undefined);
  const meter = new Meter(state.options, 'Downloading packs', blobs.length);
  const max = state.ctx.config.maxObjectBytes;
  // Each pack waits on disk (its blobs in the cache, open) until git takes it.
  const files: PackFile[] = [];
  const keeps: string[] = [];
  try {
    await mapLimit(packs, 4, async (p, i) => {
      const cache = new BlobCache(state.ctx.config.cacheDir);
      const f = await loadPack(
        remote.reader,
        remote.owner.did,
        p,
        cache,
        () => crashPoint('fetch:blob-downloaded'),
        max,
      );
      files[i] = f;
      if (p.inline === undefined) meter.tick(f.length);
    });
    meter.end();
    for (const [i, p] of packs.entries()) {
      keeps.push(
        (await indexPack(files[i]!, dir, state.options.progress && state.options.verbosity > 1)).keepFile,
      );
      files[i]!.close();
      crashPoint('fetch:pack-indexed');
      indexed.add(p.id);
    }
  } catch (err) {
    // No ref will name what was indexed: release it to git's ordinary gc.
    for (const k of keeps) fs.rmSync(k, { force: true });
    throw err;
  } finally {
    for (const f of files) f?.close();
  }
  // git accepts one lock file per fetch; the others are released now that their packs are in place.
  const last = keeps.pop();
  for (const k of keeps) fs.rmSync(k, { force: true });
  return last === undefined ? [] : [`lock ${last}`];
}

/**
 * Checks that every object git asked for is here now: a ref whose packs do not hold its target would
 * otherwise end in git's own "bad object". Refused with our sentence before git is answered, and the
 * last pack's lock released so that nothing stays kept for a ref that was not fetched.
 */
async function wholeOrNothing(
  state: HelperState,
  wants: Array<{ oid: string; name: string }>,
  answer: string[],
): Promise<string[]> {
  const have = await presentObjects(wants.map((w) => w.oid));
  const lacking = wants.find((w) => !have.has(w.oid));
  if (lacking === undefined) return answer;
  release(answer);
  throw new KnotlessError(
    'corrupt-remote',
    `The packs of ${safeText(lacking.name)} in ${(await state.remote()).label} do not hold the object it names (${lacking.oid}); the remote is damaged, nothing was fetched: its owner can push that ref again.`,
  );
}
