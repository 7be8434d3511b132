#!/usr/bin/env node
import './helper-prelude.ts';
import { helperMain } from '../helper/main.ts';
import { replayIo, type Replay } from '../helper/replay.ts';

/**
 * The helper run directly, in this process: when no warm agent runs, or (`replay`) when it went away
 * in the middle of a session (bin/git-remote-knotless-thin.ts). The committed stub calls it.
 */
export function run(replay?: Replay): void {
  // Exit explicitly: git may keep our stdin open after a failure, which would keep the process alive.
  void helperMain(process.argv.slice(2), replay === undefined ? undefined : replayIo(replay)).then((code) =>
    process.exit(code),
  );
}

// Run from the sources (no build): the file itself is the executable.
if (import.meta.main) run();
