import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const owned = new Set<string>();

/**
 * A fresh directory under the system's temporary folder that is removed when this process exits,
 * whether its tests passed or failed (an uncaught error or `process.exit` included), unless
 * `release` removed it earlier. Only a kill that Node cannot see (SIGKILL) leaves it behind.
 */
export function tempDir(prefix: string): { dir: string; release(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  if (owned.size === 0) process.once('exit', removeAll);
  owned.add(dir);
  return {
    dir,
    release() {
      owned.delete(dir);
      fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    },
  };
}

function removeAll(): void {
  for (const dir of owned) {
    try {
      fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    } catch (err) {
      // At exit nothing can be waited for (a browser killed just now may still hold a file): say so.
      process.stderr.write(`could not remove ${dir}: ${String(err)}\n`);
    }
  }
  owned.clear();
}
