import fs from 'node:fs';
import path from 'node:path';

/**
 * The dev network's data is private to its user: the PDS's databases hold every account's session
 * tokens and the actors' signing keys sit beside them, so nothing in it may be readable by others.
 * The PDS and SQLite create their files with the process's umask (typically 0644 files in 0755
 * folders) and offer no option for modes, so the umask is narrowed to 0077 while any network runs in
 * this process (when asked: see NetworkOptions.privateFiles): files they create then come out 0600
 * and folders 0700, including the actor folders and keys made later, at account creation. The umask
 * is process-wide; it is restored when the last network of the process that asked closes.
 */
let open = 0;
let saved: number | undefined;

/** Narrows the umask for the life of one network; call the returned function when it closes. */
export function holdPrivateUmask(): () => void {
  if (open++ === 0) saved = process.umask(0o077);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--open === 0 && saved !== undefined) process.umask(saved);
  };
}

/**
 * Makes an existing tree private: folders 0700, files 0600 (0700 when executable, as the bin
 * wrappers are). A directory made by an earlier version, before the umask was narrowed, gets its
 * modes fixed on the next start. Symbolic links are left alone: chmod would follow them outside.
 */
export function makePrivate(dir: string): void {
  const stat = fs.lstatSync(dir);
  if (!stat.isDirectory()) return;
  fs.chmodSync(dir, 0o700);
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) makePrivate(full);
    else if (entry.isFile()) {
      const exec = (fs.statSync(full).mode & 0o100) !== 0;
      fs.chmodSync(full, exec ? 0o700 : 0o600);
    }
  }
}
