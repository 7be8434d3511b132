import fs from 'node:fs';
import path from 'node:path';
import type { GitUser } from './git.ts';

/**
 * Waits (bounded) until no background compaction of `user` runs: the helper leaves a marker in the
 * cache's `compacting/` for each one it starts, before git is answered, and the compaction removes
 * it when it ends (knotless-core/src/ops/compact-marker.ts). Returns how many were seen running.
 */
export async function compactionsDone(user: GitUser, timeoutMs = 60_000): Promise<number> {
  const dir = path.join(user.env['KNOTLESS_CACHE_DIR']!, 'compacting');
  const running = () => (fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => !f.startsWith('.')) : []);
  const seen = running().length;
  const deadline = Date.now() + timeoutMs;
  while (running().length > 0) {
    if (Date.now() > deadline) throw new Error(`compactions still running: ${running().join(', ')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return seen;
}
