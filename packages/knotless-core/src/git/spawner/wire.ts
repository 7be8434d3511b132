/**
 * What the warm agent and its git spawner say to each other (client.ts, host.ts). A git command's
 * order travels as the first line of its own socket connection, whose other bytes are then git's
 * stdout and (unless it reads nothing) stdin; what the spawner reports travels on the IPC channel
 * Node's `fork` opens.
 */

/** The first line of a connection to the spawner: one git command to start. */
export interface LaunchOrder {
  /** The secret the spawner was given at its start: only its agent may start commands. */
  token: string;
  id: number;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
  /**
   * 'ignore': git's stdin is /dev/null and the agent writes nothing on the connection; 'pipe': the
   * connection is git's stdin too.
   */
  stdin: 'pipe' | 'ignore';
  /** git's stdout goes to this file (opened for writing, not created) instead of the connection. */
  stdoutFile?: string;
  /** 'inherit': git's stderr is the spawner's (the agent's log); 'pipe': reported line by line. */
  stderr: 'pipe' | 'inherit';
}

/** The agent's messages to the spawner on the IPC channel. */
export type SpawnerRequest =
  { op: 'listen'; path: string; token: string } | { op: 'kill'; id: number; signal: NodeJS.Signals };

/** The spawner's messages to the agent on the IPC channel, in the order they happened. */
export type SpawnerReport =
  | { op: 'ready' }
  | { op: 'spawned'; id: number }
  | { op: 'stderr'; id: number; text: string }
  | { op: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null }
  | { op: 'failed'; id: number; code: string; message: string };

/** The longest order line the spawner reads (an environment is a few KiB). */
export const MAX_ORDER_BYTES = 1 << 20;
