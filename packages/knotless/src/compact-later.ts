import fs from 'node:fs';
import { callerEnv } from 'knotless-core/caller/scope';
import type { Config } from 'knotless-core/config/env';
import { claimMarker, compactionMarker } from 'knotless-core/ops/compact-marker';
import { BIN_SCRIPTS } from './paths.ts';

/**
 * Starts a detached `knotless repo compact` of `refs` of one repository, unless KNOTLESS_COMPACT=0
 * or one of this repository runs already. Its marker exists when this returns (see
 * compact-marker.ts), so whoever waits for background work can tell when it is over. Used by the
 * helper after git has its answer and by `repo commit`, only for lists far past logarithmic.
 */
export async function compactLater(config: Config, did: string, repo: string, refs: string[]): Promise<void> {
  if (!config.autoCompact) return;
  const marker = compactionMarker(config.cacheDir, did, repo);
  const fd = claimMarker(marker);
  if (fd === undefined) return;
  const args = ['repo', 'compact', `${did}/${repo}`, '--quiet', ...refs.flatMap((r) => ['--ref', r])];
  const { spawn } = await import('node:child_process');
  try {
    const child = spawn(process.execPath, [BIN_SCRIPTS['knotless']!, ...args], {
      detached: true,
      stdio: 'ignore',
      // Inside the warm agent, the environment of the helper it works for (caller/scope.ts).
      env: callerEnv(),
    });
    child.unref();
    if (child.pid === undefined) fs.rmSync(marker, { force: true });
    else fs.writeSync(fd, String(child.pid));
  } finally {
    fs.closeSync(fd);
  }
}
