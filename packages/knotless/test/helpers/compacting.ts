import fs from 'node:fs';
import path from 'node:path';
import type { GitUser } from './git.ts';
import { waitUntil } from './wait.ts';

/**
 * Waits until no background compaction of `user` runs: the helper leaves a marker in the
 * cache's `compacting/` for each one it starts, before git is answered, and the compaction removes
 * it when it ends (knotless-core/src/ops/compact-marker.ts). Returns how many were seen running.
 */
export async function compactionsDone(user: GitUser): Promise<number> {
  const dir = path.join(user.env['KNOTLESS_CACHE_DIR']!, 'compacting');
  const running = () => (fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => !f.startsWith('.')) : []);
  const seen = running().length;
  await waitUntil('the background compactions to end', () => (running().length === 0 ? true : undefined), 50);
  return seen;
}
