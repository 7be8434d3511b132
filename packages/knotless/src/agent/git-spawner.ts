import { useGitLauncher } from 'knotless-core/git/launch';
import { GitSpawner } from 'knotless-core/git/spawner/client';
import { safeText } from 'knotless-core/text/terminal';

/**
 * Starts the agent's git commands from a small process of their own from now on (knotless-core
 * git/spawner): each one otherwise forks the whole agent, a cost that grows with the memory it maps.
 * In the background: until the spawner listens, and should it ever stop, the agent starts git
 * itself. The spawner leaves with the agent (its IPC channel closes).
 */
export function startGitSpawner(script: string, log: (line: string) => void): void {
  // The agent's own Node flags (the sources' loader, a profiler), but no debugger: its port is the agent's.
  const flags = process.execArgv.filter((f) => !/^--(inspect|debug)/.test(f));
  GitSpawner.start(script, flags).then(
    (spawner) => useGitLauncher((args, opts) => spawner.launch(args, opts)),
    (err: unknown) => log(`git commands start from the agent itself: ${safeText(String(err))}`),
  );
}
