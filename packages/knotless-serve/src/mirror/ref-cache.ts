import fs from 'node:fs';
import path from 'node:path';
import { collect, spawnGit, type DatedRef } from './history.ts';

/** Every branch and tag of a mirror, newest first, and HEAD's branch. */
export interface MirrorRefs {
  branches: DatedRef[];
  tags: DatedRef[];
  head: string | undefined;
  /** Short names (`main`, `v1`, `feature/x`) and full names to the commit they mean. */
  byName: Map<string, string>;
}

// Every page resolves a ref, and a repository of 4,000 refs costs git a for-each-ref of ~100 ms on
// a loaded machine: the list is kept per mirror and dropped when the mirror moves its refs
// ({@link refsChanged}). The packed-refs file's identity is part of the key as well, so a change
// made behind the mirror's back (git run by hand, another process) is seen once refs are packed.
const LOAD_TIMEOUT_MS = 20_000;
const cache = new Map<string, { key: string; refs: Promise<MirrorRefs> }>();
const generations = new Map<string, number>();

function statKey(file: string): string {
  try {
    const s = fs.statSync(file);
    return `${s.ino}:${s.mtimeMs}:${s.size}`;
  } catch (err) {
    // No packed-refs file yet (a new mirror) is normal; any other failure to read it surfaces.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'none';
    throw err;
  }
}

/** Called by the mirror after it changes a repository's refs or HEAD. */
export function refsChanged(dir: string): void {
  generations.set(dir, (generations.get(dir) ?? 0) + 1);
  cache.delete(dir);
}

async function load(dir: string): Promise<MirrorRefs> {
  const format = '%(refname)%00%(objectname)%00%(*objectname)%00%(creatordate:iso-strict)%00%(subject)';
  const out = await collect(
    // Not bound to the request that happened to ask first: other requests share this answer.
    spawnGit(
      dir,
      ['for-each-ref', '--sort=-creatordate', `--format=${format}`, 'refs/heads', 'refs/tags'],
      {},
      AbortSignal.timeout(LOAD_TIMEOUT_MS),
    ),
  );
  const branches: DatedRef[] = [];
  const tags: DatedRef[] = [];
  const byName = new Map<string, string>();
  for (const line of out.split('\n')) {
    const [name, oid, peeled, date, subject] = line.split('\0');
    if (name === undefined || oid === undefined || oid === '') continue;
    const target = peeled !== undefined && peeled !== '' ? peeled : oid;
    const ref = { name, oid: target, date: date ?? '', subject: subject ?? '' };
    if (name.startsWith('refs/heads/')) branches.push(ref);
    else tags.push(ref);
    byName.set(name, target);
  }
  // Short names: a branch wins over a tag of the same name.
  for (const t of tags) byName.set(t.name.slice('refs/tags/'.length), t.oid);
  for (const b of branches) byName.set(b.name.slice('refs/heads/'.length), b.oid);
  const headFile = fs.readFileSync(path.join(dir, 'HEAD'), 'utf8').trim();
  const head = headFile.startsWith('ref: ') ? headFile.slice(5) : undefined;
  return { branches, tags, head, byName };
}

/** The refs of the mirror in `dir`, from the cache when nothing changed since they were read. */
export function mirrorRefs(dir: string): Promise<MirrorRefs> {
  const key = `${generations.get(dir) ?? 0}:${statKey(path.join(dir, 'packed-refs'))}:${statKey(path.join(dir, 'HEAD'))}`;
  const hit = cache.get(dir);
  if (hit !== undefined && hit.key === key) return hit.refs;
  const refs = load(dir);
  cache.set(dir, { key, refs });
  // A failed read (a request's time limit killed git) is not kept. Not a swallow: the caller
  // awaits `refs` and sees its failure; this only forgets it.
  refs.catch(() => {
    if (cache.get(dir)?.refs === refs) cache.delete(dir);
  });
  return refs;
}
