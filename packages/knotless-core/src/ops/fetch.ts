import fs from 'node:fs';
import type { BlobCache } from '../cache/blob-cache.ts';
import { crashPoint } from '../crash.ts';
import { IndexedPacks } from '../cache/indexed-packs.ts';
import { presentObjects } from '../git/objects.ts';
import { isObjectId } from '../git/refname.ts';
import { indexPack } from '../git/pack.ts';
import type { PackFile } from '../git/pack-file.ts';
import { GitError } from '../git/run.ts';
import { KnotlessError } from '../errors.ts';
import { loadPack, mapLimit, remoteChanged, withRelist } from '../packs/transfer.ts';
import { unionPacks, type PackEntry } from '../records/ref-record.ts';
import type { RemoteRef, RemoteRepo } from '../records/remote-repo.ts';
import { safeText } from '../text/terminal.ts';
import { Meter, type Chatter } from '../text/progress.ts';

/** What a fetch works with, made by its front end (the helper, from its state). */
export interface FetchEnv {
  remote: RemoteRepo;
  /** The repository fetched into (its git directory). */
  gitDir: string;
  cache: BlobCache;
  /** The refs git was shown, by name. */
  refs: Map<string, RemoteRef>;
  /** Lists the refs again (after a blob vanished mid-download); the refs by name now. */
  relist: () => Promise<Map<string, RemoteRef>>;
  /** The largest pack (or blob) accepted, in bytes. */
  maxObjectBytes: number;
  chatter: Chatter;
}

/** One `fetch <oid> <name>` line. */
export interface Want {
  oid: string;
  name: string;
}

/**
 * Fetches what git wants: downloads the packs the wanted refs list that the repository at
 * `env.gitDir` has not indexed yet (from the cache when it has them), then indexes them in order.
 * Returns git's answer lines (a `lock` line for the last pack's .keep file).
 */
export async function fetchPacks(env: FetchEnv, wants: Want[]): Promise<string[]> {
  const dir = env.gitDir;
  const have = await presentObjects(
    wants.map((w) => w.oid),
    { gitDir: dir },
  );
  const indexed = new IndexedPacks(dir);
  const done = indexed.read();
  // A ref's object present is not the ref fetched whole: its structure pack holds its commit without
  // its blobs (format.md, "Structure apart from blobs"), and a fetch stopped between indexing the two
  // leaves the commit here and the blobs not. So a present ref whose packs are not all recorded as
  // indexed here is fetched again (its packs not recorded are downloaded); git asks the helper only
  // when it lacks something.
  const refName = (w: Want) => w.name.replace(/\^\{\}$/, '');
  const whole = (w: Want) =>
    have.has(w.oid) && (env.refs.get(refName(w))?.record.packs.every((p) => done.has(p.id)) ?? true);
  const missing = wants.filter((w) => !whole(w)).map(refName);
  if (missing.length === 0) return [];
  let refs = env.refs;
  // `git fetch origin <oid>` asks for an object by its id, named by itself: as upload-pack does for
  // any object a ref reaches, every ref's packs are fetched (a ref's packs hold its whole history).
  const byId = (name: string) => !refs.has(name) && isObjectId(name);
  const packsOf = () => {
    const names = missing.some(byId) ? [...refs.keys()].filter((n) => n !== 'HEAD') : missing;
    const records = names.map((name) => refs.get(name)?.record);
    return records.some((r) => r === undefined) ? undefined : unionPacks(records.map((r) => r!.packs));
  };
  const { remote } = env;
  // A compaction or force push landing mid-download frees the blobs of the packs it replaced: list
  // again and download what the refs list now (one listing, only when that happens).
  return withRelist(
    packsOf() ?? [],
    async () => {
      refs = await env.relist();
      return packsOf();
    },
    async (all, relisted) => {
      const lines = await indexList(env, all, indexed, wants);
      // After a force push the new packs need not hold what git asked for: say so, not "damaged".
      if (relisted) {
        const now = await presentObjects(
          wants.map((w) => w.oid),
          { gitDir: dir },
        );
        if (wants.some((w) => !now.has(w.oid))) {
          // No ref will name what was indexed: release it to git's ordinary gc.
          release(lines);
          throw remoteChanged(remote.label);
        }
      }
      return wholeOrNothing(env, wants, lines);
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
  env: FetchEnv,
  all: PackEntry[],
  indexed: IndexedPacks,
  wants: Want[],
): Promise<string[]> {
  const done = indexed.read();
  try {
    const lines = await indexAll(
      env,
      all.filter((p) => !done.has(p.id)),
      indexed,
    );
    const have = await presentObjects(
      wants.map((w) => w.oid),
      { gitDir: env.gitDir },
    );
    if (wants.every((w) => have.has(w.oid))) return lines;
    release(lines);
  } catch (err) {
    if (!(err instanceof GitError)) throw err;
  }
  try {
    return await indexAll(env, all, indexed);
  } catch (err) {
    if (!(err instanceof GitError)) throw err;
    const why = err.stderr.trim().split('\n').pop() ?? '';
    throw new KnotlessError(
      'corrupt-remote',
      `git could not index the packs of ${env.remote.label} (${safeText(why)}): the remote's packs are damaged or lack their delta bases; nothing was written.`,
      { cause: err },
    );
  }
}

/** Releases the lock files of an answer that will not be given: nothing stays kept for it. */
function release(lines: string[]): void {
  for (const line of lines) fs.rmSync(line.replace(/^lock /, ''), { force: true });
}

async function indexAll(env: FetchEnv, packs: PackEntry[], indexed: IndexedPacks): Promise<string[]> {
  const { remote } = env;
  const blobs = packs.filter((p) => p.inline === undefined);
  const meter = new Meter(env.chatter, 'Downloading packs', blobs.length);
  const max = env.maxObjectBytes;
  // Each pack waits on disk (its blobs in the cache, open) until git takes it.
  const files: PackFile[] = [];
  const keeps: string[] = [];
  try {
    await mapLimit(packs, 4, async (p, i) => {
      const f = await loadPack(
        remote.reader,
        remote.owner.did,
        p,
        env.cache,
        () => crashPoint('fetch:blob-downloaded'),
        max,
      );
      files[i] = f;
      if (p.inline === undefined) meter.tick(f.length);
    });
    meter.end();
    for (const [i, p] of packs.entries()) {
      keeps.push(
        (await indexPack(files[i]!, env.gitDir, env.chatter.progress && env.chatter.verbosity > 1)).keepFile,
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
async function wholeOrNothing(env: FetchEnv, wants: Want[], answer: string[]): Promise<string[]> {
  const have = await presentObjects(
    wants.map((w) => w.oid),
    { gitDir: env.gitDir },
  );
  const lacking = wants.find((w) => !have.has(w.oid));
  if (lacking === undefined) return answer;
  release(answer);
  if (!env.refs.has(lacking.name) && isObjectId(lacking.name)) {
    throw new KnotlessError(
      'not-found',
      `No ref of ${env.remote.label} reaches ${lacking.oid}, so it cannot be fetched by its id (as upload-pack says "not our ref"); fetch a ref that holds it.`,
    );
  }
  throw new KnotlessError(
    'corrupt-remote',
    `The packs of ${safeText(lacking.name)} in ${env.remote.label} do not hold the object it names (${lacking.oid}); the remote is damaged, nothing was fetched: its owner can push that ref again.`,
  );
}
