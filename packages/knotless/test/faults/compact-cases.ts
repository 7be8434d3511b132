// Compaction folded into the push's own write: kill the helper or `repo commit` at each
// step of a write that merges the small packs at the end of the list, then check that the remote
// stays readable, nothing is lost, the rerun succeeds and its record is folded.
import fs from 'node:fs';
import path from 'node:path';
import { commitFiles, newRepo } from '../helpers/git.ts';
import { storedPacks } from '../helpers/ref-packs.ts';
import { EXPECTED, diedOfKill, verdicts } from './crash-cases.ts';
import { noise, onTable, type FaultCase } from './checks.ts';
import type { FaultEnv } from './env.ts';

/**
 * Sizes of incompressible files, one a push: each push writes a structure pack and a blob pack, and
 * the small structure packs alone keep the list from being geometric, so pushes fold as they go; the
 * fourth change breaks the blobs' list too, and its write folds every pack into one structure pack
 * and one blob pack of 12 KB (inline) or 22 KB (past what a pack may carry inline, so the merged blob
 * pack goes to a blob, the structure pack staying inline).
 */
const SMALL = [6000, 1500, 300, 4000];
const BIG = [9000, 3000, 1000, 9000];

/** Compaction on: the fault world turns it off for every other case. */
const FOLDING = { KNOTLESS_COMPACT: '1' };

/** The packs main lists now (in its record, or in its repository's table), read straight from the PDS. */
const packsOf = (env: FaultEnv, name: string) => storedPacks(env.t, 'alice.test', name, 'refs/heads/main');

/**
 * Pushes `files(0..2)` (compaction on), so that the fourth change folds; returns the first commit
 * and the work tree.
 */
async function setUp(
  env: FaultEnv,
  prefix: string,
  files: (i: number) => Record<string, string | Uint8Array>,
): Promise<{ name: string; url: string; dir: string; first: string }> {
  const { name, url } = await env.repo(prefix);
  const dir = await newRepo(env.alice, url);
  let first = '';
  for (let i = 0; i < 3; i++) {
    const tip = await commitFiles(env.alice, dir, files(i), `c${i}`);
    first ||= tip;
    await env.withEnv(FOLDING, () => env.alice.ok(dir, 'push', '-q', 'origin', 'main'));
  }
  return { name, url, dir, first };
}

/**
 * The verdict, plus whether the record the rerun wrote lists fewer packs than there were pushes (each
 * wrote two: its structure and its blobs), and whether the fold kept the two kinds apart.
 */
async function foldedVerdict(env: FaultEnv, name: string, facts: string): Promise<string> {
  const packs = await packsOf(env, name);
  const mixed = packs.filter((p) => p.holds === undefined).length;
  if (packs.length >= 4) return `${facts}; not folded: ${packs.length} packs after 4 pushes`;
  return `${facts}; ${mixed === 0 ? 'folded' : `folded, ${mixed} of ${packs.length} packs holding both kinds`}`;
}

function foldedPushCrash(point: string, big = false): FaultCase {
  const files = (i: number) => ({ [`f${i}.bin`]: noise((big ? BIG : SMALL)[i]!, 300 + i) });
  return {
    group: 'crash',
    name: `push folding small packs killed at ${point}${big ? ' (merged pack in blobs)' : ''}`,
    expected: `${EXPECTED}; folded`,
    async run(env) {
      const { name, url, dir, first } = await setUp(env, 'crash-fold', files);
      const next = await commitFiles(env.alice, dir, files(3), 'c3');
      const push = () => env.withEnv(FOLDING, () => env.alice.git(dir, 'push', '-q', 'origin', 'main'));
      const res = await env.crashing(point, push);
      const facts = await verdicts(env, url, res.code !== 0 && diedOfKill(res.stderr), first, push, next);
      return foldedVerdict(env, name, facts);
    },
  };
}

function foldedCommitCrash(point: string): FaultCase {
  return {
    group: 'crash',
    name: `repo commit folding small packs killed at ${point}`,
    expected: `${EXPECTED}; folded`,
    async run(env) {
      const { name, url, first } = await setUp(env, 'crash-fold-commit', (i) => ({
        [`f${i}.bin`]: noise(SMALL[i]!, 400 + i),
      }));
      const file = path.join(env.alice.dir(), 'bot.bin');
      fs.writeFileSync(file, noise(SMALL[3]!, 403));
      const commit = () =>
        env.withEnv(FOLDING, () =>
          env.alice.knotless('repo', 'commit', name, '-m', 'bot', '--add', `bot.bin=${file}`),
        );
      const res = await env.crashing(point, commit);
      let made = '';
      const facts = await verdicts(
        env,
        url,
        res.code === null,
        first,
        async () => {
          const r = await commit();
          made = r.stdout.trim();
          return r;
        },
        '',
      );
      // The rerun's commit is the tip; verdicts() could not know its id in advance.
      const fixed = facts.replace(
        /fsck clean, but refs\/heads\/main is at ([0-9a-f]+)$/,
        (all, at: string) => (at === made ? 'fsck clean' : all),
      );
      return foldedVerdict(env, name, fixed);
    },
  };
}

/** Every crash point of a folding write. */
export const COMPACT_CASES: FaultCase[] = [
  foldedPushCrash('push:packs-folded'),
  foldedPushCrash('push:before-record-write'),
  foldedPushCrash('push:after-record-write'),
  foldedPushCrash('push:blob-uploaded', true),
  foldedPushCrash('push:after-record-write', true),
  foldedCommitCrash('commit:packs-folded'),
  foldedCommitCrash('commit:before-record-write'),
];
/** The same on a ref table (the default layout), whose folded packs are its entry's. */
export const TABLE_COMPACT_CASES: FaultCase[] = COMPACT_CASES.map((c) => onTable(c));
