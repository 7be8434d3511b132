import fs from 'node:fs';
import { BlobCache } from '../cache/blob-cache.ts';
import { crashPoint } from '../crash.ts';
import { IndexedPacks } from '../cache/indexed-packs.ts';
import { gitDir, presentObjects } from '../git/objects.ts';
import { indexPack } from '../git/pack.ts';
import { GitError } from '../git/run.ts';
import { KnotlessError } from '../errors.ts';
import { loadPack, mapLimit } from '../remote/packs.ts';
import { unionPacks, type PackEntry } from '../remote/ref-record.ts';
import { safeText } from '../text/terminal.ts';
import { Meter } from './progress.ts';
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
  const all = unionPacks(missing.map((name) => state.refs?.get(name)?.record.packs ?? []));
  const done = indexed.read();
  try {
    return await wholeOrNothing(
      state,
      wants,
      await indexAll(
        state,
        dir,
        all.filter((p) => !done.has(p.id)),
        indexed,
      ),
    );
  } catch (err) {
    // A pack recorded as indexed may have been lost (gc, a copied repository): index the full list.
    if (!(err instanceof GitError)) throw err;
  }
  try {
    return await wholeOrNothing(state, wants, await indexAll(state, dir, all, indexed));
  } catch (err) {
    if (!(err instanceof GitError)) throw err;
    const why = err.stderr.trim().split('\n').pop() ?? '';
    throw new KnotlessError(
      'corrupt-remote',
      `git could not index the packs of ${(await state.remote()).label} (${why}): the remote's packs are damaged or lack their delta bases; nothing was written.`,
      { cause: err },
    );
  }
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
  const bytes = await mapLimit(packs, 4, async (p) => {
    const cache = new BlobCache(state.ctx.config.cacheDir);
    const b = await loadPack(
      remote.reader,
      remote.owner.did,
      p,
      cache,
      () => crashPoint('fetch:blob-downloaded'),
      max,
    );
    if (p.inline === undefined) meter.tick(b.length);
    return b;
  });
  meter.end();
  const keeps: string[] = [];
  try {
    for (const [i, p] of packs.entries()) {
      keeps.push(
        (await indexPack(bytes[i]!, dir, state.options.progress && state.options.verbosity > 1)).keepFile,
      );
      crashPoint('fetch:pack-indexed');
      indexed.add(p.id);
    }
  } catch (err) {
    // No ref will name what was indexed: release it to git's ordinary gc.
    for (const k of keeps) fs.rmSync(k, { force: true });
    throw err;
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
  for (const line of answer) fs.rmSync(line.replace(/^lock /, ''), { force: true });
  throw new KnotlessError(
    'corrupt-remote',
    `The packs of ${safeText(lacking.name)} in ${(await state.remote()).label} do not hold the object it names (${lacking.oid}); the remote is damaged, nothing was fetched: its owner can push that ref again.`,
  );
}
