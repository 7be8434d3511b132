import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The knotless package's root: the nearest directory above this file with its package.json. */
function findRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('knotless: cannot find its package directory');
    dir = up;
  }
  return dir;
}

const root = findRoot();

/** The directory of the knotless package (where its package.json is). */
export function packageRoot(): string {
  return root;
}
// The bundles in dist/ are what users run (they start in a fraction of the time); the TypeScript
// sources run only where no build exists yet.
const built = fs.existsSync(path.join(root, 'dist', 'knotless-main.cjs'));

/** The executables of this package, by name, with the script each runs. */
export const BIN_SCRIPTS: Record<string, string> = {
  knotless: path.join(root, built ? 'bin/knotless.cjs' : 'src/bin/knotless.ts'),
  'git-remote-knotless': path.join(
    root,
    built ? 'bin/git-remote-knotless.cjs' : 'src/bin/git-remote-knotless.ts',
  ),
};

/**
 * Node's flags for the processes knotless starts itself: git's helper (bin/git-remote-knotless, which
 * spells them out in its shell and its Perl; a test holds them to this list) and the warm agent. A
 * young generation of 1 MiB instead of V8's 16, and one V8 worker thread instead of four (each thread
 * that allocates gets an arena of its own from the C allocator, which keeps what it was given): a
 * clone's helper peaked about 10 MiB lower with them, for no measurable CPU (performance.md, "A
 * clone's memory").
 */
export const NODE_FLAGS = ['--max-semi-space-size=1', '--v8-pool-size=1'];

/** The warm agent's git spawner, which the agent forks with its own Node (knotless-core git/spawner). */
export const SPAWNER_SCRIPT = path.join(root, built ? 'dist/git-spawner-main.cjs' : 'src/bin/git-spawner.ts');
