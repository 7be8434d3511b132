// Kill the helper or the CLI (SIGKILL, as a power cut would) at each named crash point, then check
// that nothing was lost or left dangling and that running the same command again succeeds.
import fs from 'node:fs';
import path from 'node:path';
import { commitFiles, newRepo } from '../helpers/git.ts';
import { freshCloneCheck, lastLine, noise, onTable, reachable, type FaultCase } from './checks.ts';
import type { FaultEnv } from './env.ts';

export const EXPECTED = 'killed; refs stored; ok commits kept; rerun ok; fsck clean';

/** The facts every crash case reports, in the order of {@link EXPECTED}. */
export async function verdicts(
  env: FaultEnv,
  url: string,
  killed: boolean,
  kept: string,
  rerun: () => Promise<{ code: number | null; stderr: string }>,
  finalTip: string,
  ref = 'refs/heads/main',
): Promise<string> {
  const facts = [killed ? 'killed' : 'not killed'];
  const afterKill = await freshCloneCheck(env, url);
  facts.push(afterKill.verdict === 'fsck clean' ? 'refs stored' : afterKill.verdict);
  facts.push((await reachable(env, afterKill.dir, kept, ref)) ? 'ok commits kept' : 'LOST an ok commit');
  const again = await rerun();
  facts.push(again.code === 0 ? 'rerun ok' : `rerun failed: ${lastLine(again.stderr)}`);
  const final = await freshCloneCheck(env, url);
  const tip = (await env.alice.git(final.dir, 'rev-parse', ref)).stdout.trim();
  facts.push(tip === finalTip ? final.verdict : `${final.verdict}, but ${ref} is at ${tip}`);
  return facts.join('; ');
}

/** git's words when its helper was killed. */
export const diedOfKill = (stderr: string) => /died of signal 9|signal 9|Killed/.test(stderr);

/**
 * 2,000 small files: a tree and a blob pack each past what a pack may carry inline, so that the push
 * uploads both of its packs (its structure and its blobs), one after the other.
 */
function wide(): Record<string, string> {
  const files: Record<string, string> = {};
  for (let i = 0; i < 2000; i++) files[`w/${i}.txt`] = `${i}\n`;
  return files;
}

function pushCrash(
  point: string,
  opts: { big?: boolean; wide?: boolean; atomic?: boolean; newRefs?: boolean } = {},
): FaultCase {
  return {
    group: 'crash',
    name: `push killed at ${point}${opts.big ? ' (pack in blobs)' : ''}${opts.wide ? ' (both packs in blobs)' : ''}${opts.atomic ? ' (--atomic)' : ''}${opts.newRefs ? ' (new branches, created in one batch)' : ''}`,
    expected: EXPECTED,
    async run(env) {
      const { url } = await env.repo('crash-push');
      const dir = await newRepo(env.alice, url);
      const first = await commitFiles(env.alice, dir, { 'a.txt': 'one\n' }, 'one');
      await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
      const files = opts.wide
        ? wide()
        : opts.big
          ? { 'big.bin': noise(40_000, point.length) }
          : { 'a.txt': 'two\n' };
      const next = await commitFiles(env.alice, dir, files, 'two');
      const args = opts.atomic
        ? ['push', '-q', '--atomic', 'origin', 'main', 'main:refs/heads/side']
        : [
            'push',
            '-q',
            'origin',
            'main',
            ...(opts.newRefs ? ['main:refs/heads/new-a', 'main:refs/heads/new-b'] : []),
          ];
      const res = await env.crashing(point, () => env.alice.git(dir, ...args));
      return verdicts(
        env,
        url,
        res.code !== 0 && diedOfKill(res.stderr),
        first,
        () => env.alice.git(dir, ...args),
        next,
      );
    },
  };
}

function fetchCrash(point: string): FaultCase {
  return {
    group: 'crash',
    name: `fetch killed at ${point}`,
    expected: `${EXPECTED}; fetched repository whole`,
    async run(env) {
      const { url } = await env.repo('crash-fetch');
      const dir = await newRepo(env.alice, url);
      const first = await commitFiles(env.alice, dir, { 'a.txt': 'one\n' }, 'one');
      await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
      const out = env.alice.dir();
      await env.alice.ok(out, 'clone', '-q', url, 'c');
      const c = path.join(out, 'c');
      const next = await commitFiles(env.alice, dir, { 'big.bin': noise(40_000, 7) }, 'two');
      // Pushed with a cache of its own: the pusher's cache keeps what it uploads, and the fetch must download.
      const cache = path.join(env.alice.dir(), 'cache');
      await env.withEnv({ KNOTLESS_CACHE_DIR: cache }, () =>
        env.alice.ok(dir, 'push', '-q', 'origin', 'main'),
      );
      const res = await env.crashing(point, () => env.alice.git(c, 'fetch', '-q'));
      const facts = await verdicts(
        env,
        url,
        res.code !== 0 && diedOfKill(res.stderr),
        first,
        () => env.alice.git(c, 'fetch', '-q'),
        next,
      );
      const fsck = await env.alice.git(c, 'fsck', '--full');
      const tip = (await env.alice.git(c, 'rev-parse', 'refs/remotes/origin/main')).stdout.trim();
      return `${facts}; ${fsck.code === 0 && tip === next ? 'fetched repository whole' : `fetched repository: fsck ${fsck.code}, tip ${tip}`}`;
    },
  };
}

function compactCrash(point: string): FaultCase {
  return {
    group: 'crash',
    name: `compaction killed at ${point}`,
    expected: EXPECTED,
    async run(env) {
      const { name, url } = await env.repo('crash-compact');
      const dir = await newRepo(env.alice, url);
      let first = '';
      let tip = '';
      // Six pushes of 5 KB that does not compress: six inline packs that merge to one blob.
      for (let i = 0; i < 6; i++) {
        tip = await commitFiles(env.alice, dir, { [`f${i}.bin`]: noise(5000, 100 + i) }, `c${i}`);
        first ||= tip;
        await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
      }
      const compact = () => env.alice.knotless('repo', 'compact', name);
      const res = await env.crashing(point, compact);
      return verdicts(env, url, res.code === null, tip, compact, tip);
    },
  };
}

function commitCrash(point: string): FaultCase {
  return {
    group: 'crash',
    name: `repo commit killed at ${point}`,
    expected: EXPECTED,
    async run(env) {
      const { name, url } = await env.repo('crash-commit');
      const dir = await newRepo(env.alice, url);
      const first = await commitFiles(env.alice, dir, { 'a.txt': 'one\n' }, 'one');
      await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
      const file = path.join(env.alice.dir(), 'notes.txt');
      fs.writeFileSync(file, 'from a bot\n');
      const commit = () =>
        env.alice.knotless('repo', 'commit', name, '-m', 'bot', '--add', `notes.txt=${file}`);
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
      return facts.replace(/fsck clean, but refs\/heads\/main is at ([0-9a-f]+)$/, (all, at: string) =>
        at === made ? 'fsck clean' : all,
      );
    },
  };
}

/** Every crash case: each named point at least once. */
export const CRASH_CASES: FaultCase[] = [
  pushCrash('push:pack-built'),
  pushCrash('push:blob-uploaded', { big: true }),
  pushCrash('push:blob-uploaded:2', { wide: true }),
  pushCrash('push:before-record-write'),
  pushCrash('push:after-record-write'),
  pushCrash('push:after-record-write', { big: true }),
  pushCrash('push:before-record-write', { newRefs: true }),
  pushCrash('push:after-record-write', { newRefs: true }),
  pushCrash('push:before-record-write', { atomic: true }),
  pushCrash('push:after-record-write', { atomic: true }),
  compactCrash('compact:blob-uploaded'),
  compactCrash('compact:before-record-write'),
  compactCrash('compact:after-record-write'),
  fetchCrash('fetch:blob-downloaded'),
  fetchCrash('fetch:pack-indexed'),
  commitCrash('commit:before-record-write'),
];

/**
 * The same on a ref table (the default layout): a push, a commit and a compaction write the table in
 * one swapped putRecord, so a kill before it leaves the old table and one after it the new; a fetch
 * reads it.
 */
export const TABLE_CRASH_CASES: FaultCase[] = CRASH_CASES.map((c) => onTable(c));
