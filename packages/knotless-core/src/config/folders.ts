import fs from 'node:fs';
import path from 'node:path';
import { KnotlessError } from '../errors.ts';
import type { Config } from './env.ts';

/**
 * The cache folder (identities, ref views, packs, the agent's socket) and the config folder
 * (sessions and keys) are trusted as ssh trusts ~/.ssh: only when they are ours and nobody else can
 * write them or replace them. A cache someone else could write could hold an identity.json that sends
 * `knotless://bob.test/x` to another repository, or a pack of their choosing. Checked before
 * anything in them is read; a folder not made yet is checked for where it would be made.
 */
export function checkFolders(config: Pick<Config, 'cacheDir' | 'configDir'>): void {
  checkFolder(config.cacheDir, 'cache folder', 'KNOTLESS_CACHE_DIR');
  checkFolder(config.configDir, 'config folder', 'KNOTLESS_CONFIG_DIR');
}

function refuse(dir: string, what: string, why: string, fix: string, variable: string): KnotlessError {
  return new KnotlessError(
    'permission-denied',
    `knotless will not use the ${what} ${dir}: ${why}, so another user could plant files in it; ${fix}, or set ${variable} to a folder of your own.`,
  );
}

/** The folder itself: ours, not writable by group or others. Then each folder above it. */
export function checkFolder(dir: string, what: string, variable: string): void {
  const uid = process.getuid?.();
  if (uid === undefined) return; // Windows: no owners or mode bits to check.
  checkLinks(dir, what, variable, uid);
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (st !== undefined) {
    if (!st.isDirectory()) throw refuse(dir, what, 'it is not a folder', `remove it`, variable);
    if (st.uid !== uid)
      throw refuse(dir, what, `it belongs to another user (uid ${st.uid})`, `remove it`, variable);
    if ((st.mode & 0o022) !== 0)
      throw refuse(
        dir,
        what,
        `it is writable by others (mode ${(st.mode & 0o777).toString(8)})`,
        `run \`chmod go-w ${dir}\``,
        variable,
      );
  }
  // Above it, up to the root: each folder ours or root's, and writable by nobody else unless its
  // sticky bit keeps others from renaming what is not theirs (as /tmp's does).
  // Where the folder really is, so the folders above a link's target are the ones checked.
  let above = path.dirname(st === undefined ? path.resolve(dir) : fs.realpathSync(dir));
  for (;;) {
    let up: fs.Stats | undefined;
    try {
      up = fs.statSync(above);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (up !== undefined) {
      if (up.uid !== uid && up.uid !== 0)
        throw refuse(
          dir,
          what,
          `the folder above it, ${above}, belongs to another user (uid ${up.uid})`,
          'move it',
          variable,
        );
      if ((up.mode & 0o022) !== 0 && (up.mode & 0o1000) === 0)
        throw refuse(
          dir,
          what,
          `the folder above it, ${above}, is writable by others (mode ${(up.mode & 0o777).toString(8)})`,
          `run \`chmod go-w ${above}\``,
          variable,
        );
    }
    const next = path.dirname(above);
    if (next === above) return;
    above = next;
  }
}

/**
 * The path as written, component by component: a symbolic link on it is followed only when it is
 * ours (or root's, above the folder itself), since whoever owns a link can point it elsewhere at any
 * moment and where it points today proves nothing. The folders it leads to are checked by stat.
 */
function checkLinks(dir: string, what: string, variable: string, uid: number): void {
  const full = path.resolve(dir);
  let at = path.parse(full).root;
  const parts = full
    .slice(at.length)
    .split(path.sep)
    .filter((p) => p !== '');
  for (let i = 0; i < parts.length; i++) {
    at = path.join(at, parts[i]!);
    let st: fs.Stats;
    try {
      st = fs.lstatSync(at);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    if (!st.isSymbolicLink()) continue;
    const last = i === parts.length - 1;
    if (st.uid !== uid && (last || st.uid !== 0))
      throw refuse(
        dir,
        what,
        last
          ? `it is a symbolic link that belongs to another user (uid ${st.uid})`
          : `${at} on its path is a symbolic link that belongs to another user (uid ${st.uid})`,
        last ? 'remove the link' : 'move it',
        variable,
      );
  }
}
