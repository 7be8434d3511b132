// Builds a realistic, reproducible git repository for round-trip tests of the remote helper. Everything
// goes through one `git fast-import` stream: thousands of `git commit` processes would take minutes.
// The parts live in gen-repo/: the seeded randomness and content, the names, the stream and the history.
import fs from 'node:fs';
import os from 'node:os';
import { runProcess } from './cli.ts';
import { Generator } from './gen-repo/generator.ts';
import { fastImport } from './gen-repo/stream.ts';

/** What {@link generateRepo} makes; every field has a default, listed in {@link DEFAULTS}. */
export interface GenerateOptions {
  /** A bare repository; otherwise `main` is checked out in a work tree. */
  bare?: boolean;
  /** All commits, merges included. */
  commits?: number;
  /** Branches, `main` included. */
  branches?: number;
  /** Two-parent merge commits (part of `commits`). */
  merges?: number;
  lightweightTags?: number;
  annotatedTags?: number;
  /** Files of random bytes (NULs included), 1 KB to 200 KB each. */
  binaryFiles?: number;
  /** Ordinary text files in nested directories, besides the few special files every repo has. */
  fileCount?: number;
  seed?: number;
}

/** The options {@link generateRepo} uses for whatever the caller leaves out. */
export const DEFAULTS: Readonly<Required<GenerateOptions>> = {
  bare: false,
  commits: 2000,
  branches: 20,
  merges: 100,
  lightweightTags: 150,
  annotatedTags: 150,
  binaryFiles: 30,
  fileCount: 200,
  seed: 1,
};

/** A repository that generates in a fraction of a second, for quick tests. */
export const SMALL: Readonly<GenerateOptions> = {
  commits: 200,
  branches: 5,
  merges: 10,
  lightweightTags: 10,
  annotatedTags: 10,
  binaryFiles: 3,
  fileCount: 40,
};

/** Environment for git that ignores system and global config and any repository the caller is in. */
export function gitEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith('GIT_')) env[k] = v;
  }
  return { ...env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: os.devNull, GIT_TERMINAL_PROMPT: '0' };
}

async function git(args: string[], cwd: string): Promise<string> {
  const r = await runProcess('git', args, { env: gitEnv(), cwd });
  if (r.code !== 0) throw new Error(`git ${args.join(' ')} exited with ${r.code}: ${r.stderr}`);
  return r.stdout;
}

/**
 * Creates at `dir` (absent or empty) the repository `opts` describes, the same for the same options.
 */
export async function generateRepo(dir: string, opts: GenerateOptions = {}): Promise<void> {
  const o: Required<GenerateOptions> = { ...DEFAULTS, ...opts };
  if (o.commits < 1 || o.branches < 1) throw new Error('need at least one commit and one branch');
  if (o.merges > 0 && o.branches < 2) throw new Error('merges need at least two branches');
  if (fs.existsSync(dir) && fs.readdirSync(dir).length > 0) throw new Error(`${dir} is not empty`);

  await git(['init', '-q', ...(o.bare ? ['--bare'] : []), dir], process.cwd());
  await git(['symbolic-ref', 'HEAD', 'refs/heads/main'], dir);

  // Enough active branches that fast-import never unloads a tree it will need again.
  const args = [`--active-branches=${Math.max(5, o.branches)}`];
  await fastImport(dir, args, gitEnv(), (sink) => new Generator(o, sink).run());

  if (!o.bare) await git(['reset', '--hard', '-q'], dir);
}
