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

/** The warm agent's git spawner, which the agent forks with its own Node (knotless-core git/spawner). */
export const SPAWNER_SCRIPT = path.join(root, built ? 'dist/git-spawner-main.cjs' : 'src/bin/git-spawner.ts');
