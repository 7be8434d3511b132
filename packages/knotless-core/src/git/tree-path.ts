// Which paths a commit may hold: git's own rule (`verify_path` in read-cache.c, with the NTFS and
// HFS+ checks of path.c and utf8.c), so that nothing is committed that a clone then cannot check
// out. A path git refuses never enters its index, so every clone's checkout fails on it, on every
// machine that has the protection on. NTFS's protection is on everywhere by default and HFS+'s on
// macOS; a repository is checked out anywhere, so both are applied here whatever this machine is.
// Every front end that makes a commit (the CLI's `repo commit`, the appview's file edit) asks this
// one rule.
import { KnotlessError } from '../errors.ts';
import { hasUnsafe, safeText } from '../text/terminal.ts';

/** How the path is stored: a file (the only kind `repo commit` writes) or a symbolic link. */
export type TreeEntryKind = 'file' | 'symlink';

/**
 * Code points HFS+ ignores in names (`next_hfs_char` in git's utf8.c): `.g\u200Cit` is `.git` there.
 * The bidi ones among them are refused anyway, as control characters.
 */
const HFS_IGNORED = /[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g;

/**
 * `.git` as NTFS also reads it (`is_ntfs_dotgit` in git's path.c): any case, the 8.3 short name
 * `git~1`, trailing spaces and periods (which NTFS drops), and an alternate data stream after `:`
 * (`.git::$INDEX_ALLOCATION` is the folder itself). ASCII classes, not the `i` flag: no non-ASCII
 * letter may stand for one of these.
 */
const NTFS_DOTGIT = /^(?:\.[gG][iI][tT]|[gG][iI][tT]~1)[. ]*(?::|$)/;

/**
 * `.gitmodules` as NTFS reads it (`is_ntfs_dotgitmodules`): itself, its short names `gitmod~1` to
 * `~4`, and the fallback short names git derives from its hash (`gi7eba` cut to any length, `~`, a
 * digit 1-9, digits up to 8 characters in all). Only refused for symbolic links, as git does: a
 * symlinked `.gitmodules` is how git's submodule bugs were reached.
 */
const NTFS_DOTGITMODULES = new RegExp(
  '^(?:\\.[gG][iI][tT][mM][oO][dD][uU][lL][eE][sS]|[gG][iI][tT][mM][oO][dD]~[1-4]|' +
    [0, 1, 2, 3, 4, 5, 6].map((n) => `${caseless('gi7eba'.slice(0, n))}~[1-9][0-9]{${6 - n}}`).join('|') +
    ')[. ]*(?::|$)',
);

function caseless(ascii: string): string {
  return [...ascii].map((c) => (/[a-z]/.test(c) ? `[${c}${c.toUpperCase()}]` : c)).join('');
}

/** True when `part`, with the code points HFS+ ignores taken out, is `name` in any ASCII case. */
function hfsIs(part: string, name: string): boolean {
  const seen = part.replace(HFS_IGNORED, '');
  return seen.length === name.length && /^[\x20-\x7e]*$/.test(seen) && seen.toLowerCase() === name;
}

/**
 * Why `path` names nothing a tree can hold, whatever the name's parts (the end of a sentence), or
 * undefined: what a path to remove is held to, so that one git refuses, brought by a push from
 * elsewhere, can still be removed.
 */
function formRefusal(path: string): string | undefined {
  if (path === '') return 'it is empty';
  if (path.includes('\0')) return 'it holds a NUL character';
  if (Buffer.from(path, 'utf8').toString('utf8') !== path) return 'it is not valid Unicode';
  if (path.startsWith('/')) return 'it starts with "/" (paths are relative to the repository)';
  if (path.endsWith('/')) return 'it ends with "/"';
  for (const part of path.split('/')) {
    if (part === '') return 'it has an empty part ("//")';
    if (part === '.' || part === '..') return `it has a "${part}" part`;
  }
  return undefined;
}

/**
 * Why git would not check out `path` as a `kind` entry, as the end of a sentence ("it ends with
 * /"), or undefined when it would.
 */
export function treePathRefusal(path: string, kind: TreeEntryKind = 'file'): string | undefined {
  const form = formRefusal(path);
  if (form !== undefined) return form;
  // Not git's rule but ours: a name holding an escape sequence or a bidi override prints as
  // something else in every terminal and listing that shows it (ls, git status, this tool), so a
  // file can pose as another. git stores such names; they are refused here before they are written.
  if (hasUnsafe(path)) return 'it holds a control, bidi or line-separator character';
  // A separator on Windows, where git refuses the path (a checkout there fails); elsewhere git
  // also reads `a\.git` as .git inside a, which the checks below need not repeat.
  if (path.includes('\\')) return 'it holds "\\", which Windows takes for a folder separator';
  const parts = path.split('/');
  for (const [i, part] of parts.entries()) {
    const shown = `"${safeText(part)}"`;
    if (/^\.[gG][iI][tT]$/.test(part)) return `its part ${shown} is git's own folder`;
    if (NTFS_DOTGIT.test(part)) return `its part ${shown} is the .git folder on Windows (NTFS)`;
    if (hfsIs(part, '.git')) return `its part ${shown} is the .git folder on macOS (HFS+)`;
    if (kind === 'symlink') {
      // As git checks it: on every part, so a link inside a folder named .gitmodules is refused too.
      if (/^\.[gG][iI][tT][mM][oO][dD][uU][lL][eE][sS]$/.test(part) || hfsIs(part, '.gitmodules'))
        return `a symbolic link may not be .gitmodules or inside it, and ${shown} is .gitmodules`;
      // Tried on the rest of the path, as git does: only the last part, or one with a stream (`:`).
      if (NTFS_DOTGITMODULES.test(parts.slice(i).join('/')))
        return `a symbolic link may not be .gitmodules, and ${shown} is .gitmodules on Windows (NTFS)`;
    }
  }
  return undefined;
}

/** The sentence that refuses `path` (naming it and why), or undefined when git would check it out. */
export function treePathSentence(path: string, kind: TreeEntryKind = 'file'): string | undefined {
  const why = treePathRefusal(path, kind);
  return why === undefined
    ? undefined
    : `"${safeText(path)}" is not a path git will check out: ${why}; choose another.`;
}

/** Refuses (`usage`: exit 2, HTTP 400) a path git would not check out, with its sentence. */
export function checkTreePath(path: string, kind: TreeEntryKind = 'file'): void {
  const sentence = treePathSentence(path, kind);
  if (sentence !== undefined) throw new KnotlessError('usage', sentence);
}

/**
 * Refuses (`usage`) a path to remove that no tree can hold. Only its form is checked: a path git
 * would not check out may be in a repository all the same (pushed from a git without the
 * protections), and removing it is the repair.
 */
export function checkRemovedPath(path: string): void {
  const why = formRefusal(path);
  if (why !== undefined)
    throw new KnotlessError('usage', `"${safeText(path)}" names no path a repository can hold: ${why}.`);
}
