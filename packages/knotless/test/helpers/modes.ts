import fs from 'node:fs';
import path from 'node:path';

/**
 * Everything under `dir` (and `dir` itself) that others could read or enter: folders not 0700,
 * files not 0600 (0700 when executable), as "mode path" lines; empty when the tree is private.
 * Paths in `skip` (relative to `dir`) are not looked into.
 */
export function looseModes(dir: string, skip: string[] = []): string[] {
  const loose: string[] = [];
  const walk = (p: string): void => {
    if (skip.includes(path.relative(dir, p))) return;
    const st = fs.lstatSync(p);
    const mode = st.mode & 0o777;
    if (st.isDirectory()) {
      if (mode !== 0o700) loose.push(`${mode.toString(8)} ${p}`);
      for (const name of fs.readdirSync(p)) walk(path.join(p, name));
    } else if (st.isFile() && mode !== 0o600 && mode !== 0o700) {
      loose.push(`${mode.toString(8)} ${p}`);
    }
  };
  walk(dir);
  return loose;
}
