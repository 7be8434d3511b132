import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The executables of this package, by name, with the script each runs. */
export const BIN_SCRIPTS: Record<string, string> = {
  knotless: path.join(here, 'knotless.ts'),
  'git-remote-knotless': path.join(here, 'git-remote-knotless.ts'),
};
