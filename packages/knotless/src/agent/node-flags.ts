// A `knotless agent` started by hand (or by a service manager) runs with Node's flags for
// knotless's own processes, as the agent a helper starts does (its command line carries them): the
// agent is the longest-lived process knotless has, and the one whose peak a clone through it meets.
import { NODE_FLAGS } from '../paths.ts';

/** Node 22.15 and later replace the running process in place (same pid, nothing of the old kept). */
type Execve = (file: string, args: string[], env: NodeJS.ProcessEnv) => never;

/**
 * Replaces this process with the same command under whichever of {@link NODE_FLAGS} its Node was
 * not given (on its command line or in `nodeOptions`, NODE_OPTIONS, by name: a user's own value
 * stays), before anything is opened or started. The same pid goes on, so whatever started it (a
 * shell, a service manager, a test) keeps waiting on and signalling the right process, and no
 * second Node is held meanwhile as a parent waiting on a child would be. Node older than 22.15
 * cannot do this, and the agent then runs without the flags (a few MiB more at its peak), saying so
 * in its log; so it does when Node cannot start again (its executable gone in an upgrade). Returns
 * only then.
 */
export function restartWithNodeFlags(nodeOptions: string[], log: (line: string) => void): void {
  const name = (flag: string) => flag.split('=')[0];
  const given = [...process.execArgv, ...nodeOptions].map(name);
  const missing = NODE_FLAGS.filter((flag) => !given.includes(name(flag)));
  if (missing.length === 0) return;
  const execve = (process as { execve?: Execve }).execve;
  if (typeof execve !== 'function') {
    log(
      `runs without Node's flags ${missing.join(' ')} (Node ${process.version} cannot restart itself with them; 22.15 can)`,
    );
    return;
  }
  try {
    execve.call(
      process,
      process.execPath,
      [process.execPath, ...process.execArgv, ...missing, ...process.argv.slice(1)],
      process.env,
    );
  } catch (err) {
    log(
      `runs without Node's flags ${missing.join(' ')} (Node could not restart itself with them: ${err instanceof Error ? err.message : String(err)})`,
    );
  }
}
