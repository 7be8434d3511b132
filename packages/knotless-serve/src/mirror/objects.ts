// The git a mirror's sync runs, each step one process: on a loaded machine a git process costs far
// more to start than to run, and a push waits for every one on its path to the page.
import fs from 'node:fs';
import path from 'node:path';
import { runGit } from 'knotless-core';

/**
 * A template for new mirrors whose config already holds their settings, so that a mirror is made by
 * one `git init`: mirrors are rebuilt from the network (no reflogs) and never gc'd automatically
 * (no gc racing index-pack). Made once per data directory.
 */
export async function mirrorTemplate(root: string): Promise<string> {
  const dir = path.join(root, '.template');
  const config = path.join(dir, 'config');
  if (fs.existsSync(config)) return dir;
  const tmp = `${dir}.${process.pid}.tmp`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  const file = path.join(tmp, 'config');
  await runGit(['config', '-f', file, 'core.logAllRefUpdates', 'false']);
  await runGit(['config', '-f', file, 'gc.auto', '0']);
  try {
    fs.renameSync(tmp, dir);
  } catch (err) {
    // Another process of a cluster sharing the data directory made it first: theirs is the same.
    fs.rmSync(tmp, { recursive: true, force: true });
    if (!fs.existsSync(config)) throw err;
  }
  return dir;
}

/** Makes the bare repository of a new mirror from the template. */
export async function createMirror(dir: string, template: string): Promise<void> {
  fs.mkdirSync(dir, { recursive: true });
  await runGit(['init', '-q', '--bare', `--template=${template}`, dir]);
}

/** The mirror's refs, name to object id. */
export async function currentRefs(dir: string): Promise<Map<string, string>> {
  const out = await runGit(['for-each-ref', '--format=%(objectname) %(refname)'], { gitDir: dir });
  return new Map(
    out.stdout
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => [l.slice(41), l.slice(0, 40)] as const),
  );
}

/** The branch HEAD names (`refs/heads/main`), read from the file: no process for a look. */
export function headSymref(dir: string): string | undefined {
  const text = fs.readFileSync(path.join(dir, 'HEAD'), 'utf8').trim();
  return text.startsWith('ref: ') ? text.slice(5) : undefined;
}

/**
 * Which of `oids` the repository has whole: the commit and everything it reaches that the refs do
 * not. Round packs go into a mirror without a ref, and anyone can write a round holding a commit
 * without its trees: such a commit must not count as present, or a branch later moved to it would
 * skip its own packs and point at a commit git calls broken.
 */
export async function wholeObjects(dir: string, oids: string[]): Promise<Set<string>> {
  const present = [...(await presentObjects(dir, oids))];
  if (await whole(dir, present)) return new Set(present);
  // Rare: one at a time, to keep the whole ones.
  const out = new Set<string>();
  for (const oid of present) if (await whole(dir, [oid])) out.add(oid);
  return out;
}

/**
 * Whether every one of `oids` is whole, in one process: git stops at the first object missing.
 * For objects just indexed, the usual case is yes, and then one process is all it costs.
 */
export async function whole(dir: string, oids: string[]): Promise<boolean> {
  if (oids.length === 0) return true;
  const r = await runGit(['rev-list', '--objects', '--quiet', '--stdin', '--not', '--all'], {
    gitDir: dir,
    input: oids.join('\n') + '\n',
    okCodes: [128],
  });
  return r.code === 0;
}

/** Which of `oids` the repository has. */
export async function presentObjects(dir: string, oids: string[]): Promise<Set<string>> {
  if (oids.length === 0) return new Set();
  const out = await runGit(['cat-file', '--batch-check=%(objectname) %(objecttype)'], {
    gitDir: dir,
    input: oids.join('\n') + '\n',
  });
  return new Set(
    out.stdout
      .toString('utf8')
      .split('\n')
      .filter((l) => l !== '' && !l.endsWith(' missing'))
      .map((l) => l.slice(0, 40)),
  );
}

/** Below these, packed refs and a commit-graph make no read measurably faster: not worth two processes. */
const PACK_REFS_FROM = 64;
const COMMIT_GRAPH_FROM_OBJECTS = 1000;

/**
 * Only speeds reads up, so it runs after the refs moved, off a push's path to its page, and only for
 * a repository big enough to gain: pages read every ref (one packed-refs file instead of thousands of
 * loose ones) and count, log and compare commits (a commit-graph, written in layers, so a push adds
 * only its own commits).
 */
export async function maintain(dir: string, size: { refs: number; objects: number }): Promise<void> {
  if (size.refs >= PACK_REFS_FROM) await runGit(['pack-refs', '--all', '--prune'], { gitDir: dir });
  if (size.objects >= COMMIT_GRAPH_FROM_OBJECTS)
    await runGit(['commit-graph', 'write', '--reachable', '--split', '--no-progress'], { gitDir: dir });
}
